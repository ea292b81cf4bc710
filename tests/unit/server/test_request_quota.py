"""request_percentage on the gRPC listeners: which RPCs are exempt, the throttle of a
handled request (the larger of its byte-rate and request throttles), how it reaches
the answer, the interceptor's metering of a unary call and of a stream, and the
per-entity quota metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from headwater.quotas.entities import QuotaEntity, QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.quotas.rates import WindowConfig
from headwater.server.metrics import BrokerMetrics
from headwater.server.services import throttling
from headwater.server.services.throttling import (
    RequestThrottle,
    exempt,
    is_follower_request,
    metered,
    settle,
    with_throttle_time,
)
from headwater.v1 import broker_pb2

CONFIG = WindowConfig(num=2, size_seconds=1)


def quotas_with(**by_client: float) -> ClientQuotas:
    quotas = ClientQuotas(CONFIG)
    quotas.replace(
        {
            QuotaEntity.of(client_id=c): {QuotaKey.REQUEST_PERCENTAGE: bound}
            for c, bound in by_client.items()
        }
    )
    return quotas


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


class FakeContext:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5000"


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("/headwater.v1.SaslService/SaslHandshake", True),
        ("/headwater.v1.SaslService/SaslAuthenticate", True),
        ("/headwater.v1.Control/LeaderAndIsr", True),
        ("/headwater.v1.Transaction/WriteTxnMarkers", True),
        ("/grpc.health.v1.Health/Check", True),
        ("/headwater.v1.Broker/Produce", False),
        ("/headwater.v1.Broker/Metadata", False),
        ("/headwater.v1.Transaction/EndTxn", False),
        ("/headwater.v1.ScramAdmin/DescribeUserScramCredentials", False),
    ],
)
def test_exempt_rpcs_are_the_ones_kafka_never_throttles(method: str, expected: bool) -> None:
    assert exempt(method) is expected


def test_only_a_replicas_fetch_is_a_followers() -> None:
    fetch = "/headwater.v1.Broker/Fetch"
    assert is_follower_request(fetch, broker_pb2.FetchRequest(replica_id=2))
    assert is_follower_request("/headwater.v1.Broker/FetchStream", broker_pb2.FetchRequest())
    assert not is_follower_request(fetch, broker_pb2.FetchRequest(replica_id=-1))
    listed = broker_pb2.ListOffsetsRequest(replica_id=2)
    assert not is_follower_request("/headwater.v1.Broker/ListOffsets", listed)


def test_cpu_time_over_the_quota_throttles_and_within_it_does_not() -> None:
    quotas = quotas_with(busy=1.0, idle=1000.0)
    # 20 ms of CPU is 2 percent-seconds; over a 1 s window that is 2 % of a thread.
    over = settle(quotas, user="u", client_id="busy", cpu_seconds=0.02, byte_ms=0, now_ms=0)
    assert over.request_ms == over.ms == 1000  # (2 - 1) / 1 * 1000 ms
    within = settle(quotas, user="u", client_id="idle", cpu_seconds=0.02, byte_ms=0, now_ms=0)
    assert within == RequestThrottle(0, 0)


def test_the_throttle_is_the_larger_of_the_byte_rate_and_request_throttles() -> None:
    quotas = quotas_with(busy=1.0)
    low = settle(quotas, user="u", client_id="busy", cpu_seconds=0.02, byte_ms=1500, now_ms=0)
    assert low.ms == 1500 and 0 < low.request_ms < 1500
    free = settle(quotas, user="u", client_id="none", cpu_seconds=5.0, byte_ms=300, now_ms=0)
    assert free == RequestThrottle(300, 0)


def test_the_request_throttle_reaches_a_produce_or_fetch_answer_above_the_byte_one() -> None:
    produced = with_throttle_time(broker_pb2.ProduceResponse(), RequestThrottle(700, 700), 0)
    assert produced.throttle_time_ms == 700
    byte_throttled = broker_pb2.ProduceResponse(throttle_time_ms=900)
    kept = with_throttle_time(byte_throttled, RequestThrottle(900, 400), 900)
    assert kept.throttle_time_ms == 900
    fetched = broker_pb2.FetchResponse(throttle_time_ms=100).SerializeToString()
    encoded = with_throttle_time(fetched, RequestThrottle(700, 700), 100)
    assert broker_pb2.FetchResponse.FromString(encoded).throttle_time_ms == 700
    metadata = broker_pb2.MetadataResponse(cluster_id="c")
    assert with_throttle_time(metadata, RequestThrottle(700, 700), 0) == metadata


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(throttling.asyncio, "sleep", sleep)
    return slept


def unary_handler(byte_ms: int) -> grpc.RpcMethodHandler[Any, Any]:
    async def produce(request: Any, context: Any) -> broker_pb2.ProduceResponse:
        burn(0.02)
        await throttling.hold(byte_ms)  # as Produce does for producer_byte_rate
        return broker_pb2.ProduceResponse(throttle_time_ms=byte_ms)

    return grpc.unary_unary_rpc_method_handler(produce)


def test_a_unary_call_is_held_once_for_the_larger_throttle(sleeps: list[float]) -> None:
    handler = metered(
        unary_handler(1500),
        quotas_with(busy=1.0),
        method="/headwater.v1.Broker/Produce",
        client_id="busy",
    )
    answer = asyncio.run(handler.unary_unary(broker_pb2.ProduceRequest(), FakeContext()))
    assert answer.throttle_time_ms == 1500
    assert sleeps == [1.5]  # not the byte-rate hold and then the request's


def test_a_unary_call_over_its_request_quota_carries_the_request_throttle(
    sleeps: list[float],
) -> None:
    handler = metered(
        unary_handler(0),
        quotas_with(busy=1.0),
        method="/headwater.v1.Broker/Produce",
        client_id="busy",
    )
    answer = asyncio.run(handler.unary_unary(broker_pb2.ProduceRequest(), FakeContext()))
    assert answer.throttle_time_ms >= 1000
    assert sleeps == [answer.throttle_time_ms / 1000]


def test_a_streams_requests_are_metered_one_by_one(sleeps: list[float]) -> None:
    async def produce_stream(
        requests: AsyncIterator[broker_pb2.ProduceRequest], context: Any
    ) -> AsyncIterator[broker_pb2.ProduceResponse]:
        async for request in requests:
            burn(0.02 if request.acks else 0.0)
            yield broker_pb2.ProduceResponse()

    handler = metered(
        grpc.stream_stream_rpc_method_handler(produce_stream),
        quotas_with(busy=1.0),
        method="/headwater.v1.Broker/ProduceStream",
        client_id="busy",
    )

    async def requests() -> AsyncIterator[broker_pb2.ProduceRequest]:
        for acks in (0, 1):
            yield broker_pb2.ProduceRequest(acks=acks)

    async def run() -> list[broker_pb2.ProduceResponse]:
        return [a async for a in handler.stream_stream(requests(), FakeContext())]

    answers = asyncio.run(run())
    # The first request's few microseconds are within 1 %; the second's 20 ms are not.
    assert answers[0].throttle_time_ms == 0
    assert answers[1].throttle_time_ms >= 500
    assert sleeps == [answers[1].throttle_time_ms / 1000]


def test_an_rpc_without_quota_is_not_wrapped() -> None:
    handler = unary_handler(0)
    interceptor = throttling.RequestQuotaInterceptor(ClientQuotas(CONFIG))

    async def continuation(details: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return handler

    class Details:
        method = "/headwater.v1.Broker/Produce"
        invocation_metadata = (("client-id", "busy"),)

    assert asyncio.run(interceptor.intercept_service(continuation, Details())) is handler
    exempted = throttling.RequestQuotaInterceptor(quotas_with(busy=1.0))
    Details.method = "/headwater.v1.SaslService/SaslAuthenticate"
    assert asyncio.run(exempted.intercept_service(continuation, Details())) is handler
    Details.method = "/headwater.v1.Broker/Produce"
    assert asyncio.run(exempted.intercept_service(continuation, Details())) is not handler


def test_quota_metrics_are_per_entity_with_a_quota_only() -> None:
    quotas = ClientQuotas(CONFIG)
    quotas.replace({QuotaEntity.of(user="alice"): {QuotaKey.PRODUCER_BYTE_RATE: 1000.0}})
    metrics = BrokerMetrics()
    metrics.register_client_quotas(lambda: ((str(k), u, c, f) for k, u, c, f in quotas.figures()))
    labels = {"quota": "producer_byte_rate", "user": "alice", "client_id": ""}
    get = metrics.registry.get_sample_value
    assert get("headwater_client_quota_throttle_time_ms_total", labels) is None
    quotas.record(QuotaKey.PRODUCER_BYTE_RATE, user="alice", client_id="app", value=500, now_ms=0)
    assert get("headwater_client_quota_throttle_time_ms_total", labels) == 0
    assert get("headwater_client_quota_rate", labels) == 500.0  # 500 B over a 1 s window
    ms = quotas.record(
        QuotaKey.PRODUCER_BYTE_RATE, user="alice", client_id="app", value=1500, now_ms=0
    )
    assert ms == 1000
    assert get("headwater_client_quota_throttle_time_ms_total", labels) == 1000
    assert get("headwater_client_quota_throttled_requests_total", labels) == 1
    assert get("headwater_client_quota_recorded_total", labels) == 2000
    assert get("headwater_client_quota_bound", labels) == 1000
    quotas.record(QuotaKey.PRODUCER_BYTE_RATE, user="bob", client_id="app", value=9, now_ms=20)
    assert [u for _, u, _, _ in quotas.figures()] == ["alice"]  # bob has no quota
