"""Inline calls as messages on long-lived streams (``client.transport.streams``, issue 16).

Against real brokers: a producer and a consumer working one record at a time
send every inline request on one ``ProduceStream`` / ``FetchStream`` to the
leader, and each answer is the unary call's (a corrupt batch is refused on the
stream with CORRUPT_MESSAGE, and the stream goes on).  Against a gRPC server
in this process, standing in for brokers the tests make misbehave: a broker
without the stream methods (UNIMPLEMENTED, as one from before them in a rolling
upgrade) gets the unary call for that request and every later one; an answer
that never comes fails the call with REQUEST_TIMED_OUT after its timeout and
the next call opens a new stream; a stream the broker aborts fails the call
with a retriable network error and is not reused.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import headwater
import pytest
from headwater import errors, records
from headwater.client.transport import connection, streams
from headwater.testing import Cluster
from headwater.v1 import broker_pb2, broker_pb2_grpc

from tests.e2e.client.conftest import make_topic
from tests.e2e.client.raw import wait_leader

pytestmark = pytest.mark.e2e
TP = headwater.TopicPartition


def test_one_at_a_time_calls_ride_one_stream_per_thread(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "ENABLED", True)  # whatever the default, this test is of streams
    topic = make_topic(cluster.bootstrap)
    leader = cluster.brokers[wait_leader(cluster, topic)].address
    with (
        headwater.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest") as c,
        headwater.Producer(cluster.bootstrap, acks="all", linger_ms=0) as p,
    ):
        c.assign([TP(topic, 0)])
        got: list[bytes | None] = []
        for i in range(50):
            p.send(topic, b"%03d" % i).result(60)
            for _ in range(100):  # bounded: 100 polls of 300 ms
                polled = c.poll(300)
                if polled:
                    got += [r.value for r in polled]
                    break
        produce_streams = dict(p._sender._inline._streams)
        fetch_streams = dict(c._fetcher._inline._streams)
    assert got == [b"%03d" % i for i in range(50)]
    assert list(produce_streams) == [leader] and list(fetch_streams) == [leader]


def test_a_corrupt_batch_on_the_stream_is_refused_and_the_stream_goes_on(
    cluster: Cluster,
) -> None:
    topic = make_topic(cluster.bootstrap, replication_factor=1)
    leader = cluster.brokers[wait_leader(cluster, topic)].address
    good = records.build_batch([records.Record(None, b"v", (), 0)], base_offset=0)
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # outside the header: only the CRC can tell

    def request(batch: bytes) -> broker_pb2.ProduceRequest:
        return broker_pb2.ProduceRequest(
            acks=1,
            timeout_ms=10_000,
            partitions=[broker_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)],
        )

    channels = connection.Channels()
    calls = streams.StreamedCalls(channels, "Produce")
    try:
        assert isinstance(calls, streams.StreamedCalls)
        for _ in range(200):  # bounded: until the leader has applied its LeaderAndIsr
            refused = calls.call(leader, request(bytes(bad)), timeout_s=10).partitions[0]
            if refused.error not in NOT_YET_LEADER:
                break
            time.sleep(0.05)
        stream = calls._streams[leader]
        accepted = calls.call(leader, request(good), timeout_s=10).partitions[0]
        assert calls._streams[leader] is stream  # the same stream carried both
    finally:
        calls.close()
        channels.close()
    assert refused.error == errors.ErrorCode.CORRUPT_MESSAGE
    assert accepted.error == errors.ErrorCode.NONE and accepted.base_offset == 0


NOT_YET_LEADER = (
    errors.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    errors.ErrorCode.NOT_LEADER_OR_FOLLOWER,
    errors.ErrorCode.LEADER_NOT_AVAILABLE,
)


class MisbehavingBroker(broker_pb2_grpc.BrokerServicer):
    """Unary Produce answers; ProduceStream does what ``stream_mode`` says:
    ``"missing"`` (UNIMPLEMENTED), ``"silent"`` (reads requests, never answers
    the first stream, answers later ones) or ``"abort"`` (UNAVAILABLE)."""

    def __init__(self, stream_mode: str) -> None:
        self.stream_mode = stream_mode
        self.unary_calls = 0
        self.streams_opened = 0
        self.stream_requests = 0
        self.lock = threading.Lock()

    @staticmethod
    def answer(request: broker_pb2.ProduceRequest, base_offset: int) -> Any:
        return broker_pb2.ProduceResponse(
            partitions=[
                broker_pb2.ProducePartitionResponse(
                    topic=p.topic, partition=p.partition, base_offset=base_offset
                )
                for p in request.partitions
            ]
        )

    def Produce(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.unary_calls += 1
        return self.answer(request, 7)

    def ProduceStream(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        with self.lock:
            self.streams_opened += 1
            opened = self.streams_opened
        if self.stream_mode == "missing":
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        if self.stream_mode == "abort":
            context.abort(grpc.StatusCode.UNAVAILABLE, "going away")
        for request in requests:
            with self.lock:
                self.stream_requests += 1
            if self.stream_mode == "silent" and opened == 1:
                continue  # never answered: the client's deadline must end it
            yield self.answer(request, 8)


@pytest.fixture
def misbehaving() -> Iterator[tuple[MisbehavingBroker, str]]:
    servicer = MisbehavingBroker("missing")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    broker_pb2_grpc.add_BrokerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        server.stop(0)


REQUEST = broker_pb2.ProduceRequest(
    acks=1, partitions=[broker_pb2.ProducePartitionData(topic="t", partition=0, records=b"")]
)


def test_a_broker_without_the_stream_methods_gets_unary_calls(
    misbehaving: tuple[MisbehavingBroker, str],
) -> None:
    servicer, address = misbehaving
    channels = connection.Channels()
    calls = streams.StreamedCalls(channels, "Produce")
    try:
        first = calls.call(address, REQUEST, timeout_s=10)
        second = calls.call(address, REQUEST, timeout_s=10)
    finally:
        calls.close()
        channels.close()
    assert first.partitions[0].base_offset == 7 and second.partitions[0].base_offset == 7
    assert servicer.streams_opened == 1  # tried once, then unary for this channel
    assert servicer.unary_calls == 2 and servicer.stream_requests == 0


def test_an_answer_that_never_comes_times_out_and_the_stream_is_replaced(
    misbehaving: tuple[MisbehavingBroker, str],
) -> None:
    servicer, address = misbehaving
    servicer.stream_mode = "silent"
    channels = connection.Channels()
    calls = streams.StreamedCalls(channels, "Produce")
    try:
        started = time.monotonic()
        with pytest.raises(errors.RequestTimedOutError):
            calls.call(address, REQUEST, timeout_s=0.3)
        waited = time.monotonic() - started
        after = calls.call(address, REQUEST, timeout_s=10)
    finally:
        calls.close()
        channels.close()
    assert waited >= 0.3  # not before its deadline (the watchdog cancels it after)
    assert after.partitions[0].base_offset == 8
    assert servicer.streams_opened == 2 and servicer.unary_calls == 0


def test_a_stream_the_broker_aborts_fails_the_call_retriably_and_is_not_reused(
    misbehaving: tuple[MisbehavingBroker, str],
) -> None:
    servicer, address = misbehaving
    servicer.stream_mode = "abort"
    channels = connection.Channels()
    calls = streams.StreamedCalls(channels, "Produce")
    try:
        with pytest.raises(errors.NetworkError) as failed:
            calls.call(address, REQUEST, timeout_s=10)
        assert not calls._streams
        servicer.stream_mode = "answer"
        after = calls.call(address, REQUEST, timeout_s=10)
    finally:
        calls.close()
        channels.close()
    assert failed.value.retriable
    assert after.partitions[0].base_offset == 8
    assert servicer.streams_opened == 2 and servicer.unary_calls == 0


def test_many_open_streams_on_one_connection_hold_back_no_other_call(cluster: Cluster) -> None:
    """Every Producer and Consumer keeps a stream open per broker; many clients in one
    process share a connection, which must not cap them at HTTP/2's customary 100."""
    topic = make_topic(cluster.bootstrap, replication_factor=1)
    leader = cluster.brokers[wait_leader(cluster, topic)].address
    channel = grpc.insecure_channel(leader)
    stub = broker_pb2_grpc.BrokerStub(channel)
    long_poll = broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=20_000,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            broker_pb2.FetchPartition(
                topic=topic,
                partition=0,
                fetch_offset=0,
                current_leader_epoch=-1,
                partition_max_bytes=1 << 20,
            )
        ],
    )
    held = [stub.FetchStream(iter([long_poll]), timeout=30) for _ in range(150)]
    try:
        time.sleep(1.0)  # let them all reach the broker and wait there
        answer = stub.Metadata(broker_pb2.MetadataRequest(topics=[topic]), timeout=10)
    finally:
        for call in held:
            call.cancel()
        channel.close()
    assert answer.topics[0].name == topic and answer.topics[0].partitions[0].leader >= 0
