"""Kafka-listener throttling: bytes counted per batch, throttle time in the response,
KIP-219's immediate answer for self-throttling clients and held-back answer for old
ones."""

from __future__ import annotations

import datetime

from headwater.kafka.protocol import Request, build, response_module
from headwater.kafka.throttling import decide, fetch_bytes, produce_bytes
from headwater.quotas.entities import QuotaEntity, QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.quotas.rates import WindowConfig
from kio.schema.produce.v9.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)


def produce_request(version: int, batch: bytes, client_id: str = "app") -> Request:
    body = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            TopicProduceData(
                name="t",
                partition_data=(
                    PartitionProduceData(index=0, records=batch),
                    PartitionProduceData(index=1, records=batch),
                ),
            ),
        ),
    )
    return Request(0, version, 1, client_id, body)


def produce_response(version: int) -> object:
    module = response_module(0, version)
    return build(module.ProduceResponse, responses=(), throttle_time=datetime.timedelta(0))


def quotas_of(**keys: float) -> ClientQuotas:
    quotas = ClientQuotas(WindowConfig(num=11, size_seconds=1))
    quotas.replace({QuotaEntity.of(client_id="app"): {QuotaKey(k): v for k, v in keys.items()}})
    return quotas


def test_produce_bytes_are_the_batches() -> None:
    assert produce_bytes(produce_request(9, b"x" * 100).body) == 200


def test_no_quota_no_throttle_and_the_response_untouched() -> None:
    response = produce_response(9)
    throttle = decide(
        ClientQuotas(),
        produce_request(9, b"x" * 10**6),
        response,
        user="u",
        cpu_seconds=0.0,
        now_ms=0,
    )
    assert (throttle.ms, throttle.response) == (0, response)


def test_over_the_produce_rate_sets_throttle_time_and_answers_at_once() -> None:
    quotas = quotas_of(producer_byte_rate=1000)
    # 20,000 bytes over the 10 s minimum window: 2000 B/s, twice the bound: 10 s
    throttle = decide(
        quotas,
        produce_request(9, b"x" * 10_000),
        produce_response(9),
        user="u",
        cpu_seconds=0.0,
        now_ms=0,
    )
    assert throttle.ms == 10_000
    assert throttle.response.throttle_time == datetime.timedelta(seconds=10)
    assert not throttle.delay_response


def test_an_old_client_gets_its_answer_held_back() -> None:
    quotas = quotas_of(producer_byte_rate=1000)
    throttle = decide(
        quotas,
        produce_request(5, b"x" * 10_000),
        produce_response(5),
        user="u",
        cpu_seconds=0.0,
        now_ms=0,
    )
    assert throttle.ms > 0 and throttle.delay_response


def test_acks_0_has_no_response_but_is_still_throttled() -> None:
    quotas = quotas_of(producer_byte_rate=1000)
    throttle = decide(
        quotas, produce_request(9, b"x" * 10_000), None, user="u", cpu_seconds=0.0, now_ms=0
    )
    assert throttle.ms == 10_000 and throttle.response is None


def test_another_client_id_is_not_throttled() -> None:
    quotas = quotas_of(producer_byte_rate=1000)
    request = produce_request(9, b"x" * 10_000, client_id="other")
    assert decide(quotas, request, produce_response(9), user="u", cpu_seconds=0.0, now_ms=0).ms == 0


def test_request_percentage_counts_handler_time() -> None:
    quotas = quotas_of(request_percentage=10)
    # 2 s of one thread over a 10 s window is 20 percent, twice the bound
    throttle = decide(
        quotas, produce_request(9, b""), produce_response(9), user="u", cpu_seconds=2.0, now_ms=0
    )
    assert throttle.ms == 10_000


def test_fetch_bytes_are_the_response_batches() -> None:
    module = response_module(1, 12)
    partition = build(
        module.PartitionData,
        partition_index=0,
        error_code=0,
        high_watermark=0,
        last_stable_offset=0,
        log_start_offset=0,
        aborted_transactions=(),
        preferred_read_replica=-1,
        records=b"y" * 300,
    )
    response = build(
        module.FetchResponse,
        throttle_time=datetime.timedelta(0),
        error_code=0,
        session_id=0,
        responses=(build(module.FetchableTopicResponse, topic="t", partitions=(partition,)),),
    )
    assert fetch_bytes(response) == 300
