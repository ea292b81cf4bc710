"""Delivery futures: one shared result per batch, one light future per record.

``Producer.send`` returns a future per record, and at hundreds of thousands of
records per second a :class:`concurrent.futures.Future` (a lock and a
condition each) costs more than the encoding.  As in Kafka's Java client
(``ProduceRequestResult`` + ``FutureRecordMetadata``), a batch owns one
:class:`BatchResult` with one event, and each record's :class:`RecordFuture`
is four slots pointing at it: the record's offset is the batch's base offset
plus its index.  ``RecordFuture`` has the ``concurrent.futures.Future`` reading
API (``result``, ``exception``, ``done``, ``add_done_callback``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from headwater.client.types import RecordMetadata, TopicPartition


class BatchResult:
    """The outcome of one produce batch; set once, from the sender thread."""

    __slots__ = ("_callbacks", "_event", "_lock", "base_offset", "error", "timestamp_ms", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.base_offset = -1
        self.timestamp_ms: int | None = None
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[tuple[Callable[[RecordFuture], object], RecordFuture]] = []

    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float | None) -> bool:
        return self._event.wait(timeout_s)

    def set(
        self, *, base_offset: int, timestamp_ms: int | None, error: BaseException | None
    ) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.base_offset = base_offset
            self.timestamp_ms = timestamp_ms
            self.error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn, fut in callbacks:
            _run_callback(fn, fut)

    def add_callback(self, fn: Callable[[RecordFuture], object], fut: RecordFuture) -> None:
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append((fn, fut))
                return
        _run_callback(fn, fut)


def _run_callback(fn: Callable[[RecordFuture], object], fut: RecordFuture) -> None:
    try:
        fn(fut)
    except Exception:  # a user callback must not kill the sender thread
        import logging

        logging.getLogger(__name__).exception("producer callback raised")


class RecordFuture:
    """The future of one sent record; resolves to :class:`RecordMetadata`."""

    __slots__ = ("_batch", "_index", "_timestamp_ms")

    def __init__(self, batch: BatchResult, index: int, timestamp_ms: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp_ms = timestamp_ms

    def done(self) -> bool:
        return self._batch.done()

    def cancelled(self) -> bool:
        return False

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the delivery error, or TimeoutError."""
        if not self._batch.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout} s")
        b = self._batch
        if b.error is not None:
            raise b.error
        offset = b.base_offset + self._index if b.base_offset >= 0 else -1
        ts = b.timestamp_ms if b.timestamp_ms is not None else self._timestamp_ms
        return RecordMetadata(b.tp.topic, b.tp.partition, offset, ts)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._batch.wait(timeout):
            raise TimeoutError(f"record not acknowledged within {timeout} s")
        return self._batch.error

    def add_done_callback(self, fn: Callable[[RecordFuture], object]) -> None:
        self._batch.add_callback(fn, self)


def failed_future(tp: TopicPartition, error: BaseException) -> RecordFuture:
    """A future that is already failed (a record refused before it was queued)."""
    result = BatchResult(tp)
    result.set(base_offset=-1, timestamp_ms=None, error=error)
    return RecordFuture(result, 0, -1)


__all__ = ["BatchResult", "RecordFuture", "failed_future"]
