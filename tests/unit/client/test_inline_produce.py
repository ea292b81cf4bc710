"""The sender's inline Produce call (issue 16): when the sender thread makes the call
itself instead of handing it to a pool worker.

Covers: :func:`inline_calls.may_produce_inline`, each condition alone refusing; the real Sender and
RecordAccumulator on a virtual clock with a fake broker whose Produce is either made
inline (answered within the same sender loop, on the sender's thread) or submitted to
a fake pool: the first request to a broker goes through the pool, later idle ones
inline; anything else waiting (a queued batch, a second broker, a request in flight)
keeps the pool, as does a request over ``INLINE_MAX_BYTES``; a transport failure
inline is retried through the pool and the broker is called inline again only once
it answered; an idempotent producer's
sequence numbers and a retriable error answered inline; ``acks=0`` never inline.
"""

from __future__ import annotations

import threading
from typing import Any, cast

import grpc
import pytest
from headwater.client.producer.accumulator import RecordAccumulator
from headwater.client.producer.sender import Sender
from headwater.client.settings import ProducerSettings
from headwater.client.transport.inline_calls import INLINE_MAX_BYTES, may_produce_inline
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.streams import UnaryCalls
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.records import Record, parse_header
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2

TP = TopicPartition("t", 0)
OTHER_TP = TopicPartition("t", 1)
LEADERS = {TP: "a:9092", OTHER_TP: "b:9092"}
BACKOFF_MS = 10

ALL_TRUE = {
    "acks": 1,
    "requests_in_flight": 0,
    "brokers_to_send": 1,
    "leaderless": False,
    "answered_before": True,
    "queued": False,
    "request_bytes": 100,
}


def test_may_produce_inline_when_nothing_else_waits() -> None:
    assert may_produce_inline(**ALL_TRUE)  # type: ignore[arg-type]
    assert may_produce_inline(**{**ALL_TRUE, "acks": -1})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"acks": 0},
        {"requests_in_flight": 1},
        {"brokers_to_send": 2},
        {"leaderless": True},
        {"answered_before": False},
        {"queued": True},
        {"request_bytes": INLINE_MAX_BYTES + 1},
    ],
    ids=lambda c: next(iter(c)),
)
def test_may_produce_inline_refuses_when_anything_else_could_wait(change: dict[str, Any]) -> None:
    assert not may_produce_inline(**{**ALL_TRUE, **change})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Unavailable(grpc.RpcError):
    """What a blocking call raises when the broker cannot be reached (no status)."""


class FakeStub:
    """One broker: ``Produce(request, timeout=)`` is the inline (blocking) call, answered
    at once; ``Produce.future`` is never used here (the pool's calls go through FakePool)."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.inline: list[Any] = []
        self.threads: list[threading.Thread] = []
        self.next_errors: list[ErrorCode | BaseException] = []
        self.log_end = 0
        self.Produce = self

    def __call__(self, request: Any, timeout: float) -> Any:
        self.inline.append(request)
        self.threads.append(threading.current_thread())
        return self.answer(request)

    def InitProducerId(self, request: Any, timeout: float) -> Any:
        return broker_pb2.InitProducerIdResponse(producer_id=7, producer_epoch=0)

    def answer(self, request: Any) -> Any:
        error: ErrorCode | BaseException = ErrorCode.NONE
        if self.next_errors:
            error = self.next_errors.pop(0)
        if isinstance(error, BaseException):
            raise error
        partitions = []
        for p in request.partitions:
            base = -1
            if error is ErrorCode.NONE:
                base = self.log_end
                self.log_end += parse_header(p.records, 0).last_offset_delta + 1
            partitions.append(
                broker_pb2.ProducePartitionResponse(
                    topic=p.topic,
                    partition=p.partition,
                    error=int(error),
                    base_offset=base,
                    log_append_time_ms=-1,
                )
            )
        return broker_pb2.ProduceResponse(partitions=partitions)


class FakePool:
    """Holds submitted calls until the test answers them (``answer_all``)."""

    def __init__(self) -> None:
        self.pending: list[tuple[FakeStub, Any, Any]] = []
        self.submitted = 0

    def submit(
        self, method: Any, request: Any, *, address: str, timeout_s: float, done: Any
    ) -> None:
        self.submitted += 1
        self.pending.append((method, request, done))

    def answer_all(self) -> None:
        pending, self.pending = self.pending, []
        for stub, request, done in pending:
            try:
                done(stub.answer(request), None)
            except grpc.RpcError:
                from headwater.errors import NetworkError

                done(None, NetworkError("injected"))


class FakeChannels:
    def __init__(self) -> None:
        self.stubs = {a: FakeStub(a) for a in LEADERS.values()}
        self.pool = FakePool()

    def broker(self, address: str) -> FakeStub:
        return self.stubs[address]

    def inline_caller(self, method: str) -> UnaryCalls:
        return UnaryCalls(self, method)  # the stub's unary method, as over a SASL channel


class _Leader:
    def __init__(self, address: str) -> None:
        self.address = address


class _Cluster:
    brokers = {n: _Leader(a) for n, a in enumerate(LEADERS.values())}

    def leader(self, tp: TopicPartition) -> _Leader:
        return _Leader(LEADERS[tp])


class FakeMetadata:
    current = _Cluster()

    def maybe_refresh(self) -> None:
        pass

    def request_update(self) -> None:
        pass


class Harness:
    """A producer without its threads: ``send`` appends, ``step`` runs one sender loop."""

    def __init__(self, **settings: Any) -> None:
        settings.setdefault("enable_idempotence", settings.get("acks", -1) == -1)
        self.clock = Clock()
        self.channels = FakeChannels()
        self.settings = ProducerSettings(
            bootstrap_servers=("a:9092",),
            linger_ms=0,
            batch_size=100,  # one 60-byte record per batch
            retry=RetryPolicy(retry_backoff_ms=BACKOFF_MS, jitter=0.0),
            **settings,
        )
        self.acc = RecordAccumulator(
            batch_size=self.settings.batch_size,
            linger_ms=0,
            buffer_memory=1 << 20,
            delivery_timeout_ms=self.settings.delivery_timeout_ms,
            max_in_flight_per_partition=self.settings.max_in_flight_per_partition,
            clock=self.clock,
            wait=lambda cond, ms: None,
        )
        self.sender = Sender(
            settings=self.settings,
            accumulator=self.acc,
            metadata=cast(MetadataManager, FakeMetadata()),
            channels=cast(Any, self.channels),
            clock=self.clock,
        )
        self.a = self.channels.stubs["a:9092"]
        self.b = self.channels.stubs["b:9092"]

    def send(self, tp: TopicPartition = TP) -> Any:
        return self.acc.append(tp, Record(None, b"x" * 40, (), 0), max_block_ms=0).future

    def step(self) -> None:
        self.sender.wakeup()  # never block on the event: time is virtual
        self.sender.run_once()

    def first_answered(self) -> None:
        """One batch through the pool and answered: broker a has answered before."""
        fut = self.send()
        self.step()
        assert self.channels.pool.submitted == 1 and not self.a.inline
        self.channels.pool.answer_all()
        self.step()
        assert fut.done()


def test_an_idle_request_to_a_broker_that_answered_is_made_and_answered_inline() -> None:
    h = Harness(acks=1)
    h.first_answered()
    fut = h.send()
    h.step()  # one loop: sent, answered, resolved
    assert fut.result(0).offset == 1
    assert len(h.a.inline) == 1 and h.channels.pool.submitted == 1
    assert h.a.threads == [threading.current_thread()]  # the sender's own thread
    assert not h.sender._pending()


def test_a_queued_batch_behind_the_request_keeps_the_pool() -> None:
    h = Harness(acks=1, max_in_flight_requests_per_connection=1)
    h.first_answered()
    first, second = h.send(), h.send()  # two batches: the second waits behind the first
    h.step()
    assert h.channels.pool.submitted == 2 and not h.a.inline
    h.channels.pool.answer_all()
    h.step()  # the second goes now, alone with nothing queued: inline
    assert first.done() and second.done() and len(h.a.inline) == 1


def test_two_brokers_to_send_to_keep_the_pool() -> None:
    h = Harness(acks=1)
    h.first_answered()
    h.send(TP)
    h.send(OTHER_TP)
    h.step()
    assert h.channels.pool.submitted == 3 and not h.a.inline and not h.b.inline


def test_a_request_in_flight_elsewhere_keeps_the_pool() -> None:
    h = Harness(acks=1)
    h.first_answered()
    h.send(OTHER_TP)
    h.step()  # to b: first time, pool, left unanswered
    h.send(TP)
    h.step()
    assert h.channels.pool.submitted == 3 and not h.a.inline


def test_a_transport_failure_inline_is_retried_through_the_pool_until_the_broker_answers() -> None:
    h = Harness(acks=1)
    h.first_answered()
    h.a.next_errors.append(Unavailable())
    fut = h.send()
    h.step()
    assert len(h.a.inline) == 1 and not fut.done()  # retriable: re-enqueued
    h.clock.now += 4 * BACKOFF_MS
    h.step()
    assert h.channels.pool.submitted == 2  # no longer answered_before: the pool
    h.channels.pool.answer_all()
    h.step()
    assert fut.result(0).offset == 1
    h.send()
    h.step()
    assert len(h.a.inline) == 2  # it answered again: inline again


def test_idempotent_sequences_and_a_retriable_answer_inline() -> None:
    h = Harness()  # idempotent by default
    h.first_answered()
    h.a.next_errors.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    fut = h.send()
    h.step()
    assert not fut.done()
    h.clock.now += 4 * BACKOFF_MS
    h.step()
    assert fut.result(0).offset == 1
    sequences = [parse_header(r.partitions[0].records, 0).base_sequence for r in h.a.inline]
    assert sequences == [1, 1]  # the retry keeps its sequence
    h.send()
    h.step()
    assert parse_header(h.a.inline[-1].partitions[0].records, 0).base_sequence == 2


def test_a_large_request_keeps_the_pool() -> None:
    h = Harness(acks=1)  # a record over batch_size: a batch of its own
    h.first_answered()
    fut = h.acc.append(
        TP, Record(None, b"x" * (INLINE_MAX_BYTES + 1), (), 0), max_block_ms=0
    ).future
    h.step()
    assert h.channels.pool.submitted == 2 and not h.a.inline
    h.channels.pool.answer_all()
    h.step()
    assert fut.result(0).offset == 1


def test_acks_0_never_inline() -> None:
    h = Harness(acks=0, enable_idempotence=False, max_in_flight_requests_per_connection=1)
    for _ in range(3):
        fut = h.send()
        h.step()
        assert fut.done()
        h.channels.pool.answer_all()  # a's requests are answered: answered_before
        h.step()
    assert h.sender._answered == {"a:9092"}
    assert h.channels.pool.submitted == 3 and not h.a.inline
