"""The record accumulator under a fake clock: batching by batch_size and linger_ms,
buffer_memory blocking bounded by max_block_ms, retries at the head of the queue, a
window of one batch per partition by default (more: test_pipelining.py), expiry and
flush bookkeeping; records
encoded into each batch's builder as they are appended, and (native codec) a record
that cannot be encoded raising at once and changing nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from headwater.client.producer.accumulator import (
    BufferExhaustedError,
    Outcome,
    RecordAccumulator,
    estimate_size,
)
from headwater.client.types import TopicPartition
from headwater.records import (
    NativeRecordCodec,
    Record,
    finish_batch,
    native_available,
    read_batches,
    record_codec,
    set_record_codec,
)

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, cond: threading.Condition, timeout_ms: float) -> None:
        """Stands in for Condition.wait: time passes, nobody frees memory."""
        self.waits.append(timeout_ms)
        self.now += timeout_ms


def rec(n: int = 10) -> Record:
    return Record(None, b"x" * n, (), 0)


def make(clock: FakeClock, **kw: int) -> RecordAccumulator:
    args = {
        "batch_size": 1000,
        "linger_ms": 5,
        "buffer_memory": 100_000,
        "delivery_timeout_ms": 120_000,
        **kw,
    }
    return RecordAccumulator(clock=clock, wait=clock.wait, **args)


def test_not_ready_before_linger_then_ready() -> None:
    clock = FakeClock()
    acc = make(clock)
    r = acc.append(A, rec(), max_block_ms=0)
    assert r.new_batch and not r.batch_full
    check = acc.ready(clock.now)
    assert check.ready == [] and check.next_check_ms == pytest.approx(5)
    clock.now = 4.9
    assert acc.ready(clock.now).ready == []
    clock.now = 5
    assert acc.ready(clock.now).ready == [A]


def test_full_batch_is_ready_at_once_and_new_batch_starts() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=220, linger_ms=10_000)
    size = estimate_size(rec(50))
    results = [acc.append(A, rec(50), max_block_ms=0) for _ in range(4)]
    assert 61 + 2 * size <= 220 < 61 + 3 * size
    assert [r.batch_full for r in results] == [False, False, True, False]
    assert acc.ready(clock.now).ready == [A]
    batches = acc.drain([A])
    assert len(batches) == 1 and len(batches[0]) == 2


def test_linger_zero_sends_immediately() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0)
    acc.append(A, rec(), max_block_ms=0)
    assert acc.ready(clock.now).ready == [A]


def test_record_larger_than_batch_size_gets_its_own_batch() -> None:
    clock = FakeClock()
    acc = make(clock, batch_size=100, linger_ms=1000)
    acc.append(A, rec(10), max_block_ms=0)
    r = acc.append(A, rec(500), max_block_ms=0)
    assert r.new_batch and r.batch_full
    drained = acc.drain([A])
    assert len(drained[0]) == 1


def test_drain_holds_partition_until_finished() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0)
    acc.append(A, rec(), max_block_ms=0)
    (first,) = acc.drain([A])
    acc.append(A, rec(), max_block_ms=0)
    assert acc.ready(clock.now).ready == []  # A's window of 1 is full: first is in flight
    assert acc.drain([A]) == []
    assert acc.finish(first, Outcome(0, None, None)) == [first]
    first.resolve()
    acc.done(first)
    assert acc.ready(clock.now).ready == [A]


def test_retry_goes_back_to_head_and_waits_for_backoff() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0)
    acc.append(A, rec(1), max_block_ms=0)
    (first,) = acc.drain([A])
    acc.append(A, rec(2), max_block_ms=0)
    first.attempts = 1
    acc.reenqueue(first, retry_after_ms=100)
    assert acc.ready(clock.now).ready == []
    assert acc.ready(clock.now).next_check_ms == pytest.approx(100)
    clock.now = 100
    assert acc.ready(clock.now).ready == [A]
    (again,) = acc.drain([A])
    assert again is first


def test_buffer_memory_blocks_for_at_most_max_block_ms() -> None:
    clock = FakeClock()
    size = estimate_size(rec(100))
    acc = make(clock, buffer_memory=2 * size)
    acc.append(A, rec(100), max_block_ms=0)
    acc.append(B, rec(100), max_block_ms=0)
    with pytest.raises(BufferExhaustedError):
        acc.append(A, rec(100), max_block_ms=250)
    assert sum(clock.waits) == pytest.approx(250)
    assert acc.used_bytes == 2 * size


def test_buffer_space_freed_by_done_unblocks() -> None:
    clock = FakeClock()
    size = estimate_size(rec(100))
    acc = make(clock, buffer_memory=size, linger_ms=0)
    acc.append(A, rec(100), max_block_ms=0)
    (batch,) = acc.drain([A])

    def free_then_wait(cond: threading.Condition, timeout_ms: float) -> None:
        acc.done(batch)  # the sender acknowledges while we wait (the RLock is re-entrant)

    acc._wait = free_then_wait
    acc.append(A, rec(100), max_block_ms=1000)
    assert acc.used_bytes == size


def test_record_bigger_than_buffer_memory_fails_fast() -> None:
    clock = FakeClock()
    acc = make(clock, buffer_memory=50)
    with pytest.raises(Exception, match="buffer_memory"):
        acc.append(A, rec(100), max_block_ms=1000)
    assert clock.waits == []


def test_expire_removes_old_queued_batches() -> None:
    clock = FakeClock()
    acc = make(clock, delivery_timeout_ms=1000)
    acc.append(A, rec(), max_block_ms=0)
    clock.now = 999
    assert acc.expire(clock.now) == []
    clock.now = 1000
    (expired,) = acc.expire(clock.now)
    expired.fail(TimeoutError("expired"))
    assert expired.result.error is not None


def test_flush_makes_lingering_batches_ready() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=10_000)
    acc.append(A, rec(), max_block_ms=0)
    assert acc.ready(clock.now).ready == []
    acc.begin_flush()
    assert acc.ready(clock.now).ready == [A]
    acc.end_flush()
    assert acc.has_incomplete()


def test_futures_resolve_with_consecutive_offsets() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0)
    futs = [acc.append(A, Record(None, b"v", (), 42), max_block_ms=0).future for _ in range(3)]
    (batch,) = acc.drain([A])
    batch.complete(base_offset=100, timestamp_ms=None)
    acc.done(batch)
    assert [f.result(0).offset for f in futs] == [100, 101, 102]
    assert futs[0].result(0).timestamp_ms == 42
    assert not acc.has_incomplete()
    assert acc.await_incomplete(timeout_ms=0)


def test_closed_accumulator_refuses_appends() -> None:
    clock = FakeClock()
    acc = make(clock)
    acc.close()
    with pytest.raises(Exception, match="closed"):
        acc.append(A, rec(), max_block_ms=0)


def test_drained_batch_holds_the_encoded_records() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0)
    acc.append(A, Record(b"k", b"first", [("h", b"x")], 10), max_block_ms=0)
    fast = acc.try_append(A, None, b"second", (), 12, estimate_size(rec(6)))
    assert fast is not None and fast[1] is False
    (batch,) = acc.drain([A])
    [decoded] = read_batches(finish_batch(batch.builder))
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in decoded.records()] == [
        (0, 10, b"k", b"first", (("h", b"x"),)),
        (1, 12, None, b"second", ()),
    ]


def test_record_without_timestamp_is_stamped_at_append() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0)
    before = time.time_ns() // 1_000_000
    future = acc.append(A, Record(None, b"v"), max_block_ms=0).future
    (batch,) = acc.drain([A])
    batch.complete(base_offset=5, timestamp_ms=None)
    stamped = future.result(0).timestamp_ms
    assert before <= stamped <= time.time_ns() // 1_000_000
    assert batch.builder.base_timestamp == stamped


@pytest.fixture
def native() -> Iterator[None]:
    if not native_available():
        pytest.skip("native record codec not built")
    previous = record_codec()
    set_record_codec(NativeRecordCodec())
    try:
        yield
    finally:
        set_record_codec(previous)


@pytest.mark.usefixtures("native")
def test_unencodable_record_raises_and_changes_nothing() -> None:
    clock = FakeClock()
    acc = make(clock)
    with pytest.raises(TypeError):
        acc.append(A, Record(None, "text", (), 1), max_block_ms=0)  # type: ignore[arg-type]
    assert acc.used_bytes == 0 and not acc.has_queued() and not acc.has_incomplete()
    acc.append(A, rec(), max_block_ms=0)
    used = acc.used_bytes
    with pytest.raises(TypeError):
        acc.try_append(A, None, "text", (), 1, 30)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        acc.append(A, Record(None, "text", (), 1), max_block_ms=0)  # type: ignore[arg-type]
    assert acc.used_bytes == used
    (batch,) = acc.drain([A])
    assert len(batch) == 1


def test_retries_put_back_in_any_order_go_out_again_in_drain_order() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0, max_in_flight_per_partition=3)
    drained = []
    for _ in range(3):
        acc.append(A, rec(1000), max_block_ms=0)  # fills its batch: full batches pipeline
        drained += acc.drain([A])
    acc.append(A, rec(), max_block_ms=0)  # never drained: stays behind the retries
    first, second, third = drained
    for batch in (third, first, second):  # answers (failures) arrive in any order
        batch.attempts = 1
        acc.reenqueue(batch, retry_after_ms=0)
    resent = []
    for _ in range(4):
        (batch,) = acc.drain([A])  # a retry goes alone: one at a time
        resent.append(batch)
        for done in acc.finish(batch, Outcome(0, None, None)):
            acc.done(done)
    assert resent[:3] == [first, second, third]
    assert resent[3] not in drained


def test_full_batches_pipeline_and_a_partial_one_waits_for_those_in_flight() -> None:
    clock = FakeClock()
    acc = make(clock, linger_ms=0, max_in_flight_per_partition=5)
    acc.append(A, rec(1000), max_block_ms=0)
    acc.append(A, rec(1000), max_block_ms=0)
    first, second = acc.drain([A]) + acc.drain([A])  # two full batches in flight
    acc.append(A, rec(), max_block_ms=0)
    # A partial batch waits while its partition has batches in flight (records
    # arriving meanwhile join it), with no timer: an answer wakes the sender.
    check = acc.ready(clock.now)
    assert check.ready == [] and acc.drain([A]) == []
    acc.append(A, rec(), max_block_ms=0)
    for batch in (first, second):
        for done in acc.finish(batch, Outcome(0, None, None)):
            acc.done(done)
    assert acc.ready(clock.now).ready == [A]
    (partial,) = acc.drain([A])
    assert len(partial) == 2  # both late records in one request
