"""The producer's record accumulator: per-partition batches waiting to be sent.

``send`` appends records here from the user's threads; the sender thread
drains whole batches.  A partition's batch is *ready* when it is full
(``batch_size`` bytes), has waited ``linger_ms``, a flush or close is under
way, or it is a retry whose backoff has passed.

Ordering is kept per partition across retries (Kafka's idempotent producer).  Up
to ``max_in_flight_per_partition`` batches of a partition may be unresolved at
once: drained, and not yet acknowledged or failed (the partition's *window*).
Each batch keeps its place (``drain_order``) and, with idempotence, its sequence
numbers for good.  A batch put back for a retry goes back in front of every
batch drained after it (Kafka's ``insertInSequenceOrder``), and a retry is sent
only when nothing else of its partition is in flight, so the broker sees the
partition's sequences in order; a batch whose predecessor it has not appended
answers OUT_OF_ORDER_SEQUENCE_NUMBER and is retried the same way.  The window
also bounds how far the broker can get past a batch whose answer was lost: at
most ``max_in_flight_per_partition - 1`` later batches, so the retry is still
among the last 5 batches the broker remembers and is answered as a duplicate.

Answers come back in any order (separate gRPC calls), so outcomes are recorded
with :meth:`RecordAccumulator.finish`, which hands back the batches whose
futures may now resolve: always the oldest of the window first, so futures of
one partition resolve in send order.  With a window of 1 (a producer without
idempotence that retries, see :attr:`ProducerSettings.max_in_flight_per_partition`)
this is one batch per partition at a time, as before.

Memory is bounded: every queued record reserves its estimated size from
``buffer_memory``; an append that would exceed it blocks for at most
``max_block_ms`` (then fails with :class:`BufferExhaustedError`) until the
sender releases acknowledged batches.

Records are encoded as they are appended, as in Kafka's ``MemoryRecordsBuilder``:
each batch holds a :class:`~headwater.records.RecordsBuilder` of the record codec
in use, ``send`` appends to it under the accumulator's lock, and the sender only
adds the header (and compression) when it drains the batch.  With the native
codec that moves the per-record encoding into C on the caller's thread and
leaves the sender thread per-batch work only.  Batch fullness and
``buffer_memory`` still count :func:`estimate_size` (an upper bound known
before encoding, which is what deciding "does it fit" needs).

Thread-safety: every method takes the accumulator's lock; ``clock`` gives
monotonic milliseconds and ``wait`` blocks on the condition (both injectable,
so tests drive time).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from headwater import errors
from headwater.client.producer.futures import BatchResult, RecordCallback, RecordFuture
from headwater.client.producer.native import native_send_path_type
from headwater.client.types import TopicPartition
from headwater.clock import Clock, monotonic_ms, wall_ms
from headwater.records import Header, Record, RecordsBuilder, new_records_builder

RECORD_OVERHEAD_BYTES = 21
"""Upper estimate of a record's framing in a batch (length, attributes, deltas, counts)."""
BATCH_OVERHEAD_BYTES = 61
"""A RecordBatch v2 header."""
_new_future = tuple.__new__
"""Builds a :class:`RecordFuture` (a tuple subclass) without a Python-level call (per record)."""
MAX_INITIAL_BUILDER_BYTES = 64 * 1024
"""A new batch's builder starts with room for ``min(batch_size, this)`` bytes and grows by
doubling.  Not ``batch_size`` itself: the native builder keeps large values by reference
until the batch is sent, so with big records it writes little at append time, and a
producer with many partitions must not reserve ``batch_size`` for each (measured with
1 MiB batches: starting at 1 MiB cost more page faults than growing from 64 KiB)."""


class BufferExhaustedError(errors.HeadwaterError):
    """``send`` waited ``max_block_ms`` for ``buffer_memory`` to free up (Kafka's
    ``BufferExhaustedException``, a ``TimeoutException``)."""

    code = errors.ErrorCode.REQUEST_TIMED_OUT


def estimate_size(record: Record) -> int:
    """Bytes ``record`` will take in a batch (before compression), slightly over."""
    size = RECORD_OVERHEAD_BYTES
    if record.key is not None:
        size += len(record.key)
    if record.value is not None:
        size += len(record.value)
    for hkey, hvalue in record.headers:
        size += len(hkey) + (len(hvalue) if hvalue is not None else 0) + 10
    return size


@dataclasses.dataclass(eq=False, slots=True)
class ProducerBatch:
    """Records bound for one partition, sent and acknowledged together.

    Owned by the accumulator while queued and by the sender while in flight;
    ``builder`` holds the records, encoded as they were appended; it is only
    appended to under the accumulator's lock while ``closed`` is false.
    ``base_sequence`` and ``encoded`` are set on the first drain and reused on
    every retry, so a retry is byte-for-byte the original request (a new
    producer epoch renumbers it).  ``drain_order``, ``in_flight``,
    ``predecessor_unresolved`` and ``outcome`` change under the accumulator's lock.
    """

    tp: TopicPartition
    created_ms: float
    builder: RecordsBuilder = dataclasses.field(default_factory=new_records_builder)
    size_bytes: int = BATCH_OVERHEAD_BYTES
    """``BATCH_OVERHEAD_BYTES`` plus the :func:`estimate_size` of every record."""
    attempts: int = 0
    retry_after_ms: float = 0.0
    base_sequence: int = -1
    encoded: bytes | None = None
    producer: tuple[int, int] = (-1, -1)
    """Producer id and epoch ``encoded`` was built with (idempotence)."""
    closed: bool = False
    """No more appends (it filled up, or it has been drained once)."""
    drain_order: int = -1
    """Its rank among drained batches (set on the first drain, kept on retries)."""
    in_flight: bool = False
    """Drained and not yet answered (acknowledged, failed or put back)."""
    predecessor_unresolved: bool = False
    """When last drained, an earlier batch of the partition had no outcome yet: the
    broker may not have appended it, so OUT_OF_ORDER_SEQUENCE_NUMBER is expected."""
    outcome: Outcome | None = None
    """Set by :meth:`RecordAccumulator.finish`; the future resolves with it in order."""
    result: BatchResult = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.result = BatchResult(self.tp)

    def __len__(self) -> int:
        return self.builder.count

    def complete(self, *, base_offset: int, timestamp_ms: int | None) -> None:
        """Resolve every record's future; record ``i`` is at ``base_offset + i``.

        ``timestamp_ms`` is the broker's LogAppendTime, or None to report each
        record's own (create) timestamp.
        """
        self.result.set(base_offset=base_offset, timestamp_ms=timestamp_ms, error=None)

    def fail(self, exc: BaseException) -> None:
        self.result.set(base_offset=-1, timestamp_ms=None, error=exc)

    def resolve(self) -> None:
        """Resolve the futures with ``outcome`` (set by :meth:`RecordAccumulator.finish`)."""
        assert self.outcome is not None
        self.result.set(
            base_offset=self.outcome.base_offset,
            timestamp_ms=self.outcome.timestamp_ms,
            error=self.outcome.error,
        )


class Outcome(NamedTuple):
    """How a batch ended: acknowledged at ``base_offset`` or failed with ``error``."""

    base_offset: int
    timestamp_ms: int | None
    """The broker's LogAppendTime, or None for each record's own timestamp."""
    error: BaseException | None


class AppendResult(NamedTuple):
    future: RecordFuture
    """Resolves when the record's batch is acknowledged or fails."""
    batch_full: bool
    """The partition's newest batch cannot take more records: time to send it."""
    new_batch: bool
    """This append started a new batch (the linger timer started)."""


class ReadyCheck(NamedTuple):
    ready: list[TopicPartition]
    """Partitions whose head batch should be sent now, in queue order."""
    next_check_ms: float
    """How long until another partition may become ready (for the sender's wait)."""


class RecordAccumulator:
    """Per-partition queues of :class:`ProducerBatch` (see the module docstring)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        delivery_timeout_ms: int,
        max_in_flight_per_partition: int = 1,
        clock: Clock = monotonic_ms,
        wait: Callable[[threading.Condition, float], object] | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.buffer_memory = buffer_memory
        self.delivery_timeout_ms = delivery_timeout_ms
        self._builder_bytes = min(batch_size, MAX_INITIAL_BUILDER_BYTES)
        self._clock = clock
        self._lock = threading.RLock()  # C-level ``with`` for the hot path; re-entrant
        self._cond = threading.Condition(self._lock)
        self._wait = wait or (lambda cond, timeout_ms: cond.wait(timeout_ms / 1000.0))
        self._queues: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        self.max_in_flight_per_partition = max_in_flight_per_partition
        self.may_pipeline: Callable[[TopicPartition], bool] = lambda tp: True
        """Whether ``tp`` may have more than one batch in flight now; set by the sender
        (sequence numbers protect the order only once the leader has the producer's
        state for the partition).  Called from the sender thread, under the lock."""
        self._window: dict[TopicPartition, collections.deque[ProducerBatch]] = {}
        """Per partition, drained batches without a resolved future, in drain order."""
        self._in_flight: dict[TopicPartition, int] = {}
        self._drained = 0
        self._incomplete: set[ProducerBatch] = set()
        self._used_bytes = 0
        self._flushes = 0
        self._closed = False

    # -- user threads ---------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        record: Record,
        *,
        max_block_ms: float,
        size: int | None = None,
        callback: RecordCallback | None = None,
    ) -> AppendResult:
        """Queue ``record`` for ``tp``; blocks up to ``max_block_ms`` for space.

        A record without a timestamp is stamped with the wall clock now.  A
        record the codec cannot encode (TypeError, ValueError) changes nothing.
        ``callback`` is the record's thunk (see :mod:`headwater.client.producer.futures`).
        """
        key, value, headers, timestamp_ms = record
        if timestamp_ms is None:
            timestamp_ms = wall_ms()
        if size is None:
            size = estimate_size(record)
        with self._cond:
            self._reserve(size, max_block_ms)
            try:
                queue = self._queues.get(tp)
                if queue is None:
                    queue = self._queues[tp] = collections.deque()
                last = queue[-1] if queue else None
                new_batch = (
                    last is None
                    or last.closed
                    or (len(last) > 0 and last.size_bytes + size > self.batch_size)
                )
                if new_batch:
                    # Encode first: a record that cannot be encoded leaves no empty batch.
                    builder = new_records_builder(capacity=max(self._builder_bytes, size))
                    index = builder.append(key, value, headers, timestamp_ms)
                    if last is not None:
                        last.closed = True
                    last = ProducerBatch(tp, created_ms=self._clock(), builder=builder)
                    queue.append(last)
                    self._incomplete.add(last)
                    if callback is not None:
                        last.result.thunks += (callback, index, timestamp_ms)
                else:
                    assert last is not None
                    index = last.builder.append_thunk(
                        key, value, headers, timestamp_ms, callback, last.result.thunks
                    )
            except BaseException:
                self._used_bytes -= size
                raise
            future = _new_future(RecordFuture, (last.result, index, timestamp_ms))
            last.size_bytes += size
            full = last.size_bytes >= self.batch_size
            if full:
                last.closed = True
            return AppendResult(
                future=future,
                batch_full=full or (new_batch and len(queue) > 1),
                new_batch=new_batch,
            )

    def try_append(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        size: int,
        callback: RecordCallback | None = None,
    ) -> tuple[RecordFuture, bool] | None:
        """The per-record fast path: join ``tp``'s open batch if it has room, never block.

        Returns the record's future and whether the batch is now full, or None
        when the caller must take :meth:`append` (a new batch is needed, the
        buffer is full, or the producer is closed) -- once per batch, so that
        path may be slower.  Uses the plain lock (C-level ``with``) rather than
        the condition.  A record the codec cannot encode raises and changes nothing.
        ``callback`` joins the batch's thunks here, under the lock that keeps the
        batch open, so no other lock is taken for it, in the builder's call that
        appends the record and makes its future (``append_future``: one C call with
        the native codec).
        """
        with self._lock:
            queue = self._queues.get(tp)
            if not queue or self._closed or self._used_bytes + size > self.buffer_memory:
                return None
            last = queue[-1]
            batch_bytes = last.size_bytes + size
            if last.closed or batch_bytes > self.batch_size:
                return None
            result = last.result
            future = last.builder.append_future(
                key, value, headers, timestamp_ms, callback, result.thunks, result, RecordFuture
            )
            self._used_bytes += size
            last.size_bytes = batch_bytes
            if batch_bytes >= self.batch_size:
                last.closed = True
                return future, True
            return future, False

    def native_send_path(
        self,
        *,
        metadata: object,
        tp_cache: Mapping[str, tuple[object, list[TopicPartition]]],
        sticky: dict[str, int] | None,
        on_full: Callable[[str, int, int], object],
        max_request_size: int,
    ) -> Callable[..., RecordFuture | None] | None:
        """``Producer.send``'s common case in one C call (``_native.SendPath.send``),
        or None without the native codec (``HEADWATER_PURE_PYTHON_RECORDS``, not built).

        ``send(topic, key, value, partition, timestamp_ms, callback)`` is
        :meth:`try_append` after the producer's partition choice, under this
        accumulator's lock (acquired and released from C, waiting for it as
        ``with`` does), for bytes or None keys and values, no headers, the
        topic's partitions cached in ``tp_cache`` for ``metadata.current``, and
        the partition given or chosen by the default partitioner (``sticky`` is
        its sticky-partition dict; None for another partitioner: only explicit
        partitions).  It answers None, having changed nothing, wherever
        ``send``'s Python path must decide (no open batch with room, the buffer
        full, closed, anything unusual); ``on_full(topic, partition, count)``
        runs after the lock when the record filled its batch.  It reads and
        writes the state :meth:`try_append` does (``_closed``, ``_used_bytes``
        and the batch's ``closed``, ``size_bytes``, ``builder``, ``result``,
        the last four through ``ProducerBatch``'s slots, the first two and
        ``metadata.current`` through the instances' dicts: they must stay plain
        attributes), so the two paths
        interleave freely and :meth:`abort_all` sees every record it appended.
        """
        send_path = native_send_path_type()
        if send_path is None:
            return None
        send: Callable[..., RecordFuture | None] = send_path(
            lock=self._lock,
            accumulator=self,
            queues=self._queues,
            metadata=metadata,
            tp_cache=tp_cache,
            sticky=sticky,
            future_type=RecordFuture,
            on_full=on_full,
            batch_type=ProducerBatch,
            result_type=BatchResult,
            batch_size=self.batch_size,
            buffer_memory=self.buffer_memory,
            max_request_size=max_request_size,
        ).send
        return send

    def _reserve(self, size: int, max_block_ms: float) -> None:
        if self._closed:
            raise errors.HeadwaterError("producer is closed")
        if size > self.buffer_memory:
            raise errors.RecordListTooLargeError(
                f"record of ~{size} bytes is larger than buffer_memory={self.buffer_memory}"
            )
        if self._used_bytes + size > self.buffer_memory:
            self._block_for(size, max_block_ms)
        self._used_bytes += size

    def _block_for(self, size: int, max_block_ms: float) -> None:
        deadline = self._clock() + max_block_ms
        while self._used_bytes + size > self.buffer_memory:
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise BufferExhaustedError(
                    f"failed to allocate {size} bytes within max_block_ms={max_block_ms:g} "
                    f"(buffer_memory={self.buffer_memory} in use)"
                )
            self._wait(self._cond, remaining)
            if self._closed:
                raise errors.HeadwaterError("producer is closed")

    @property
    def used_bytes(self) -> int:
        return self._used_bytes

    # -- sender thread --------------------------------------------------------------

    def ready(self, now_ms: float) -> ReadyCheck:
        """Which partitions to drain now, and how long until the next may be ready.

        A partition whose window is full, whose head is a retry waiting for the
        partition's in-flight batches to come back, or whose head is a partial
        batch while others are in flight, is left out without a time: an answer
        wakes the sender.
        """
        ready: list[TopicPartition] = []
        next_check = float(self.linger_ms) if self.linger_ms else 1000.0
        with self._cond:
            flushing = self._flushes > 0 or self._closed
            for tp, queue in self._queues.items():
                if not queue:
                    continue
                head = queue[0]
                if not self._may_drain(tp, head):
                    continue
                if head.attempts > 0:
                    wait = head.retry_after_ms - now_ms
                else:
                    wait = self.linger_ms - (now_ms - head.created_ms)
                    if head.closed or len(queue) > 1 or flushing:
                        wait = 0.0
                if wait <= 0:
                    ready.append(tp)
                else:
                    next_check = min(next_check, wait)
        return ReadyCheck(ready, next_check)

    def _may_drain(self, tp: TopicPartition, head: ProducerBatch) -> bool:
        if head.drain_order >= 0:
            # A retry goes alone, after every batch sent before it has come back, so
            # the broker sees its sequence before any later one (Kafka does the same).
            return not self._in_flight.get(tp)
        window = self._window.get(tp)
        if not window:
            return True
        if len(window) >= self.max_in_flight_per_partition or not self.may_pipeline(tp):
            return False
        # Pipelining is for full batches.  A partial one (the latency case: a
        # trickle of records, linger_ms=0) waits for the partition's batches in
        # flight, so that records arriving meanwhile join it: fewer, larger
        # requests, as with Nagle's rule.  Requests cost this client far more than
        # records do (thread hand-offs, the broker's per-request work).
        return head.closed

    def drain(self, tps: Iterable[TopicPartition]) -> list[ProducerBatch]:
        """Take the head batch of each of ``tps`` that may go now, for sending."""
        out: list[ProducerBatch] = []
        with self._cond:
            for tp in tps:
                queue = self._queues.get(tp)
                if not queue or not self._may_drain(tp, queue[0]):
                    continue
                batch = queue.popleft()
                batch.closed = True
                window = self._window.get(tp)
                if window is None:
                    window = self._window[tp] = collections.deque()
                if batch.drain_order < 0:
                    batch.drain_order = self._drained
                    self._drained += 1
                    window.append(batch)
                batch.predecessor_unresolved = window[0] is not batch
                batch.in_flight = True
                self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
                out.append(batch)
        return out

    def _landed(self, batch: ProducerBatch) -> None:
        if batch.in_flight:
            batch.in_flight = False
            left = self._in_flight[batch.tp] - 1
            if left:
                self._in_flight[batch.tp] = left
            else:
                del self._in_flight[batch.tp]

    def reenqueue(self, batch: ProducerBatch, *, retry_after_ms: float) -> None:
        """Put an unanswered batch back for a retry, ahead of every batch drained after it."""
        with self._cond:
            self._landed(batch)
            batch.retry_after_ms = retry_after_ms
            queue = self._queues.setdefault(batch.tp, collections.deque())
            # Retries sit at the head, in drain order, ahead of never-drained batches.
            i = 0
            while i < len(queue) and 0 <= queue[i].drain_order < batch.drain_order:
                i += 1
            queue.insert(i, batch)

    def finish(self, batch: ProducerBatch, outcome: Outcome) -> list[ProducerBatch]:
        """Record how ``batch`` ended; return the batches whose futures may resolve now.

        Those are the oldest of the partition's window that have an outcome, in
        drain order; ``batch`` itself waits while an earlier batch of its
        partition has none (a retry under way).  A batch never drained (it
        expired in the queue) queues behind the window the same way.  The caller
        calls :meth:`ProducerBatch.resolve` and then :meth:`done` on each,
        outside the lock (user callbacks run there).
        """
        with self._cond:
            self._landed(batch)
            if batch.outcome is not None:
                return []
            batch.outcome = outcome
            window = self._window.get(batch.tp)
            if not window:
                return [batch]
            if batch.drain_order < 0:
                window.append(batch)
            out: list[ProducerBatch] = []
            while window and window[0].outcome is not None:
                out.append(window.popleft())
            if not window:
                del self._window[batch.tp]
            return out

    def done(self, batch: ProducerBatch) -> None:
        """``batch`` is finished (its future resolved): release its memory."""
        with self._cond:
            self._landed(batch)
            if batch in self._incomplete:
                self._incomplete.discard(batch)
                self._used_bytes -= batch.size_bytes - BATCH_OVERHEAD_BYTES
            self._cond.notify_all()

    def in_flight(self, tp: TopicPartition) -> int:
        """How many of ``tp``'s batches are drained and not yet answered."""
        with self._cond:
            return self._in_flight.get(tp, 0)

    def expire(self, now_ms: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``delivery_timeout_ms``."""
        expired: list[ProducerBatch] = []
        with self._cond:
            for queue in self._queues.values():
                while queue and now_ms - queue[0].created_ms >= self.delivery_timeout_ms:
                    expired.append(queue.popleft())
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        """Remove and return every batch not yet resolved, queued or drained (a forced close)."""
        with self._cond:
            batches = {b: None for w in self._window.values() for b in w}
            batches.update((b, None) for q in self._queues.values() for b in q)
            for q in self._queues.values():
                q.clear()
            self._window.clear()
            self._in_flight.clear()
            for b in batches:
                b.in_flight = False
        return list(batches)

    # -- flush and close ------------------------------------------------------------

    def begin_flush(self) -> None:
        with self._cond:
            self._flushes += 1

    def end_flush(self) -> None:
        with self._cond:
            self._flushes -= 1

    def close(self) -> None:
        """Refuse new appends and make every queued batch ready."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def has_incomplete(self) -> bool:
        with self._cond:
            return bool(self._incomplete)

    def queued_partitions(self) -> list[TopicPartition]:
        """The partitions with records waiting to be drained."""
        with self._cond:
            return [tp for tp, queue in self._queues.items() if queue]

    def has_queued(self) -> bool:
        with self._cond:
            return any(self._queues.values())

    def await_incomplete(self, *, timeout_ms: float | None) -> bool:
        """Block until every batch appended so far is finished; False on timeout."""
        with self._cond:
            pending = set(self._incomplete)
            deadline = None if timeout_ms is None else self._clock() + timeout_ms
            while pending & self._incomplete:
                if deadline is None:
                    self._cond.wait(1.0)
                    continue
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return False
                self._wait(self._cond, remaining)
            return True
