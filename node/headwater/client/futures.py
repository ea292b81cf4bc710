"""Delivery futures: one shared result per batch, one light future per record.

``Producer.send`` returns a future per record, and at hundreds of thousands of
records per second a :class:`concurrent.futures.Future` (a lock and a
condition each) costs more than the encoding.  As in Kafka's Java client
(``ProduceRequestResult`` + ``FutureRecordMetadata``), a batch owns one
:class:`BatchResult` with one event, and each record's :class:`RecordFuture`
is three slots pointing at it: the record's offset is the batch's base offset
plus its index.  ``RecordFuture`` has the ``concurrent.futures.Future`` reading
API (``result``, ``exception``, ``done``, ``add_done_callback``).

Callbacks are Kafka's ``thunks``: the batch keeps one list of them, in the
order they were added, and when it completes runs them all in one tight loop
on the sender thread.  The list is flat, three items per thunk, so that a
queued record adds no object the garbage collector must track (a tuple per
thunk would make the collector scan every queued record).  A
``send(..., callback=cb)`` callback is stored as it is, with the record's
index and timestamp, and called with a :class:`RecordMetadata` built right
there: no closure, no future, no event wait per record, which would cost the
sender thread more than the record itself (docs/performance.md, "Figures
behind rules in the code").
With the C extension built, that loop is ``_speedups.run_thunks`` (the same
loop in C: no bytecode per record); :meth:`BatchResult._run_python` is the
reference and the fallback, and tests run both.  A :class:`RecordFuture` is a
tuple subclass made with ``tuple.__new__`` (no Python ``__init__`` per record)
that keeps identity equality, as a future should.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from headwater.client.types import RecordMetadata, TopicPartition
from headwater.records.native import native_run_thunks

log = logging.getLogger(__name__)

RecordCallback = Callable[[RecordMetadata | None, BaseException | None], object]
"""Called as ``callback(metadata, None)`` on success, ``callback(None, error)`` on failure."""
DoneCallback = Callable[["RecordFuture"], object]
"""``RecordFuture.add_done_callback``'s kind: called with the (done) future."""
Thunk = tuple[Any, int, Any]
"""``(callback, record index, record timestamp)``: a :data:`RecordCallback` for the
record at that index, or ``(callback, -1, future)``: a :data:`DoneCallback`.  Stored
flat in :attr:`BatchResult.thunks`, three items each."""

_new_tuple = tuple.__new__
"""Builds a :class:`RecordMetadata` or :class:`RecordFuture` without a Python-level
``__new__`` or ``__init__`` (per record)."""
_native_run = native_run_thunks()
"""``_speedups.run_thunks`` or None (see :meth:`BatchResult._run`)."""


def _log_callback_error(exc: BaseException) -> None:
    log.error("producer callback raised", exc_info=exc)


class BatchResult:
    """The outcome of one produce batch; set once, from the sender thread.

    ``thunks`` (flat :data:`Thunk` items) is extended by the accumulator, under its
    own lock, while the batch is open (it cannot complete then: a batch is taken out of its queue,
    under that lock, before it is sent or expired), and by :meth:`add_callback`
    under this result's lock; :meth:`set` swaps it out under this lock and runs
    it.  ``is_done`` is set once, before the thunks run, and never cleared.
    """

    __slots__ = (
        "_event",
        "_lock",
        "base_offset",
        "error",
        "is_done",
        "thunks",
        "timestamp_ms",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.base_offset = -1
        self.timestamp_ms: int | None = None
        self.error: BaseException | None = None
        self.is_done = False
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.thunks: list[Any] = []

    def done(self) -> bool:
        return self.is_done

    def wait(self, timeout_s: float | None) -> bool:
        return self.is_done or self._event.wait(timeout_s)

    def set(
        self, *, base_offset: int, timestamp_ms: int | None, error: BaseException | None
    ) -> None:
        with self._lock:
            if self.is_done:
                return
            self.base_offset = base_offset
            self.timestamp_ms = timestamp_ms
            self.error = error
            self.is_done = True
            self._event.set()
            thunks, self.thunks = self.thunks, []
        if thunks:
            self._run(thunks)

    def add_callback(self, fn: DoneCallback, fut: RecordFuture) -> None:
        """Call ``fn(fut)`` when the batch completes (now, if it has)."""
        with self._lock:
            if not self.is_done:
                self.thunks += (fn, -1, fut)
                return
        self._run([fn, -1, fut])

    def add_record_callback(self, fn: RecordCallback, index: int, timestamp_ms: int) -> None:
        """Call ``fn(metadata, error)`` for record ``index`` when the batch completes."""
        with self._lock:
            if not self.is_done:
                self.thunks += (fn, index, timestamp_ms)
                return
        self._run([fn, index, timestamp_ms])

    def _run(self, thunks: list[Any]) -> None:
        """Run ``thunks`` in order; a callback that raises is logged, the rest still run."""
        if _native_run is None:
            self._run_python(thunks)
            return
        topic, partition = self.tp
        _native_run(
            thunks,
            topic,
            partition,
            self.base_offset,
            self.timestamp_ms,
            self.error,
            RecordMetadata,
            _log_callback_error,
        )

    def _run_python(self, thunks: list[Any]) -> None:
        """:meth:`_run` in Python: the reference of ``_speedups.run_thunks``."""
        error = self.error
        topic, partition = self.tp
        base = self.base_offset
        log_append = self.timestamp_ms
        new = _new_tuple
        metadata = RecordMetadata
        items = iter(thunks)
        for fn, index, ts in zip(items, items, items, strict=False):  # len % 3 == 0
            try:
                if index < 0:
                    fn(ts)  # a DoneCallback: ts is its future
                elif error is not None:
                    fn(None, error)
                else:
                    fn(
                        new(
                            metadata,
                            (
                                topic,
                                partition,
                                base + index if base >= 0 else -1,
                                ts if log_append is None else log_append,
                            ),
                        ),
                        None,
                    )
            except Exception as exc:  # a user callback must not kill the sender thread
                _log_callback_error(exc)


class RecordFuture(tuple[BatchResult, int, int]):
    """The future of one sent record: ``(batch result, index, timestamp)``; resolves
    to :class:`RecordMetadata`.  Compares and hashes by identity, as a future."""

    __slots__ = ()
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __new__(cls, batch: BatchResult, index: int, timestamp_ms: int) -> RecordFuture:
        return _new_tuple(cls, (batch, index, timestamp_ms))

    @property
    def _batch(self) -> BatchResult:
        return self[0]

    @property
    def _index(self) -> int:
        return self[1]

    @property
    def _timestamp_ms(self) -> int:
        return self[2]

    def __repr__(self) -> str:
        return f"RecordFuture({self[0].tp}, index={self[1]}, done={self[0].is_done})"

    def done(self) -> bool:
        return self._batch.is_done

    def cancelled(self) -> bool:
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the delivery error, or TimeoutError."""
        b = self._batch
        if not b.is_done and not b.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout} s")
        if b.error is not None:
            raise b.error
        offset = b.base_offset + self._index if b.base_offset >= 0 else -1
        ts = b.timestamp_ms if b.timestamp_ms is not None else self._timestamp_ms
        return RecordMetadata(b.tp.topic, b.tp.partition, offset, ts)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        b = self._batch
        if not b.is_done and not b.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout} s")
        return b.error

    def add_done_callback(self, fn: DoneCallback) -> None:
        self._batch.add_callback(fn, self)


def failed_future(
    tp: TopicPartition, error: BaseException, *, callback: RecordCallback | None = None
) -> RecordFuture:
    """A future that is already failed (a record refused before it was queued);
    ``callback`` is called with ``(None, error)`` before this returns."""
    result = BatchResult(tp)
    result.set(base_offset=-1, timestamp_ms=None, error=error)
    if callback is not None:
        result.add_record_callback(callback, 0, -1)
    return RecordFuture(result, 0, -1)


__all__ = [
    "BatchResult",
    "DoneCallback",
    "RecordCallback",
    "RecordFuture",
    "Thunk",
    "failed_future",
]
