"""The consumer fetcher's inline Fetch (issue 16): when the fetcher thread makes the
long poll itself instead of handing it to a pool worker.

Covers: :func:`inline_calls.may_fetch_inline`, each condition alone refusing; the
real Fetcher and SubscriptionState with a fake broker whose Fetch is either made
inline (its records buffered for ``poll`` within the same fetcher loop, on the
fetcher's thread) or submitted to a fake pool: the first fetch from a broker goes
through the pool and later ones inline; partitions led by two brokers, or one held
back after an error, keep the pool; a large answer of an inline fetch has its
next fetch sent through the pool before it is decoded (pipelining); a transport
failure inline is retried through the pool and the broker is called inline again
once it answered.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple, cast

import pytest
from headwater import errors, records
from headwater.client.consumer.fetcher import PIPELINE_MIN_BYTES, Fetcher
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.transport.inline_calls import may_fetch_inline
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.streams import UnaryCalls
from headwater.client.types import TopicPartition
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2

TP = TopicPartition("t", 0)
OTHER_TP = TopicPartition("t", 1)

ALL_TRUE = {
    "requests_in_flight": 0,
    "leaders": 1,
    "held_back": False,
    "undecoded": False,
    "pipelined": False,
    "answered_before": True,
}


def test_may_fetch_inline_when_nothing_else_waits() -> None:
    assert may_fetch_inline(**ALL_TRUE)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"requests_in_flight": 1},
        {"leaders": 2},
        {"leaders": 0},
        {"held_back": True},
        {"undecoded": True},
        {"pipelined": True},
        {"answered_before": False},
    ],
    ids=lambda c: f"{next(iter(c))}={next(iter(c.values()))}",
)
def test_may_fetch_inline_refuses_when_anything_else_could_wait(change: dict[str, Any]) -> None:
    assert not may_fetch_inline(**{**ALL_TRUE, **change})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeStub:
    """One broker's log of one-record batches; ``Fetch(request, timeout=)`` is the inline
    call, ``answer`` what the pool's calls get when the test answers them."""

    def __init__(self) -> None:
        self.inline: list[Any] = []
        self.threads: list[threading.Thread] = []
        self.fail_next = False
        self.log: dict[TopicPartition, list[bytes]] = {TP: [], OTHER_TP: []}
        self.Fetch = self

    def append(self, tp: TopicPartition, value: bytes = b"") -> None:
        base = len(self.log[tp])
        self.log[tp].append(
            records.build_batch(
                [records.Record(None, value or b"%d" % base, (), 0)], base_offset=base
            )
        )

    def __call__(self, request: Any, timeout: float) -> Any:
        self.inline.append(request)
        self.threads.append(threading.current_thread())
        return self.answer(request)

    def answer(self, request: Any) -> Any:
        if self.fail_next:
            self.fail_next = False
            raise errors.NetworkError("injected: connection lost")
        out = []
        for p in request.partitions:
            tp = TopicPartition(p.topic, p.partition)
            batches = self.log[tp]
            out.append(
                broker_pb2.FetchedPartition(
                    topic=p.topic,
                    partition=p.partition,
                    high_watermark=len(batches),
                    log_start_offset=0,
                    records=b"".join(batches[p.fetch_offset :]),
                )
            )
        return broker_pb2.FetchResponse(partitions=out)


class FakePool:
    """Holds submitted calls until the test answers them."""

    def __init__(self) -> None:
        self.pending: list[tuple[Any, Any, Any, str]] = []
        self.submitted: list[str] = []

    def submit(
        self, method: Any, request: Any, *, address: str, timeout_s: float, done: Any
    ) -> None:
        self.submitted.append(address)
        self.pending.append((method, request, done, address))

    def answer_all(self) -> None:
        pending, self.pending = self.pending, []
        for stub, request, done, _ in pending:
            try:
                done(stub.answer(request), None)
            except errors.HeadwaterError as exc:
                done(None, exc)


class _Leader(NamedTuple):
    """A leader as the metadata gives it: equal (and hashed) by value, as BrokerMetadata is."""

    address: str


class _Cluster:
    def __init__(self) -> None:
        self.leaders = {TP: "a:9092", OTHER_TP: "a:9092"}

    def leader(self, tp: TopicPartition) -> _Leader | None:
        address = self.leaders.get(tp)
        return None if address is None else _Leader(address)


class FakeMetadata:
    def __init__(self) -> None:
        self.current = _Cluster()

    def maybe_refresh(self) -> None:
        pass

    def request_update(self) -> None:
        pass

    def add_topics(self, topics: Any) -> None:
        pass


class FakeChannels:
    def __init__(self) -> None:
        self.stubs = {"a:9092": FakeStub(), "b:9092": FakeStub()}
        self.pool = FakePool()

    def broker(self, address: str) -> FakeStub:
        return self.stubs[address]

    def inline_caller(self, method: str) -> UnaryCalls:
        return UnaryCalls(self, method)  # the stub's unary method, as over a SASL channel


class Harness:
    def __init__(self, *tps: TopicPartition) -> None:
        self.clock = Clock()
        self.channels = FakeChannels()
        self.metadata = FakeMetadata()
        self.subs = SubscriptionState(default_reset="earliest")
        self.subs.assign(list(tps or (TP,)))
        for tp in tps or (TP,):
            self.subs.seek(tp, 0)
        self.fetcher = Fetcher(
            settings=ConsumerSettings(
                bootstrap_servers=("a:9092",), retry=RetryPolicy(retry_backoff_ms=10, jitter=0.0)
            ),
            subscriptions=self.subs,
            metadata=cast(MetadataManager, self.metadata),
            channels=cast(Any, self.channels),
            clock=self.clock,
        )
        self.a = self.channels.stubs["a:9092"]
        self.b = self.channels.stubs["b:9092"]

    def step(self) -> None:
        self.fetcher.wakeup()  # never block on the event
        self.fetcher.run_once()

    def take(self) -> list[int]:
        return [r.offset for r in self.fetcher.take(100, paused=lambda tp: False)]

    def first_answered(self) -> None:
        """One fetch through the pool, answered with one record and taken."""
        self.a.append(TP)
        self.step()
        assert self.channels.pool.submitted == ["a:9092"] and not self.a.inline
        self.channels.pool.answer_all()
        self.step()
        assert self.take() == [0]


def test_a_fetch_from_the_only_leader_that_answered_is_made_and_handled_inline() -> None:
    h = Harness()
    h.first_answered()
    h.a.append(TP)
    h.step()  # one loop: fetched, decoded, buffered for poll
    assert h.take() == [1]
    assert len(h.a.inline) == 1 and h.channels.pool.submitted == ["a:9092"]
    assert h.a.threads == [threading.current_thread()]
    assert not h.fetcher._in_flight


def test_partitions_led_by_two_brokers_keep_the_pool() -> None:
    h = Harness(TP, OTHER_TP)
    h.metadata.current.leaders[OTHER_TP] = "b:9092"
    for _ in range(3):  # both brokers answered before, and again
        h.a.append(TP)
        h.step()
        h.channels.pool.answer_all()
        h.step()
        h.take()
    assert h.channels.pool.submitted.count("a:9092") == 3
    assert not h.a.inline and not h.b.inline


def test_a_partition_held_back_keeps_the_pool() -> None:
    h = Harness(TP, OTHER_TP)
    del h.metadata.current.leaders[OTHER_TP]  # no leader: a refresh asked for, backing off
    for _ in range(3):
        h.a.append(TP)
        h.step()
        h.channels.pool.answer_all()
        h.step()
        h.take()
    assert h.channels.pool.submitted == ["a:9092"] * 3 and not h.a.inline
    h.metadata.current.leaders[OTHER_TP] = "a:9092"  # a leader again, past the backoff
    h.clock.now += 1000
    h.a.append(TP)
    h.step()
    assert len(h.a.inline) == 1 and h.take() == [3]


def test_a_transport_failure_inline_is_retried_through_the_pool_until_the_broker_answers() -> None:
    h = Harness()
    h.first_answered()
    h.a.fail_next = True
    h.a.append(TP)
    h.step()
    assert len(h.a.inline) == 1 and h.take() == []
    h.clock.now += 1000  # past the backoff
    h.step()
    assert h.channels.pool.submitted == ["a:9092", "a:9092"]
    h.channels.pool.answer_all()
    h.step()
    assert h.take() == [1]
    h.a.append(TP)
    h.step()
    assert len(h.a.inline) == 2 and h.take() == [2]


def test_without_allow_inline_every_fetch_goes_through_the_pool() -> None:
    h = Harness()
    h.fetcher._allow_inline = False
    h.first_answered()
    h.a.append(TP)
    h.step()
    assert h.channels.pool.submitted == ["a:9092", "a:9092"] and not h.a.inline


def test_a_large_inline_answer_is_pipelined_its_next_fetch_through_the_pool() -> None:
    h = Harness()
    h.first_answered()
    h.a.append(TP, b"x" * PIPELINE_MIN_BYTES)
    h.step()  # inline fetch, large answer: the next fetch out before decoding it
    assert len(h.a.inline) == 1
    assert h.channels.pool.submitted == ["a:9092", "a:9092"]
    (request,) = [r for _s, r, _d, _a in h.channels.pool.pending]
    assert [p.fetch_offset for p in request.partitions] == [2]
    assert h.take() == [1]
    h.channels.pool.answer_all()  # nothing new: an empty answer
    h.step()
    assert h.channels.pool.submitted == ["a:9092", "a:9092"]  # next one inline again
    assert len(h.a.inline) == 2
