"""The consumer's background fetcher: one long-poll Fetch in flight per broker.

A thread per consumer sends, to each leader that has fetchable partitions, one
Fetch for all of them (position, ``max_partition_fetch_bytes``), held by the
broker until ``fetch_min_bytes`` exist or ``fetch_max_wait_ms`` pass.  As soon
as an answer arrives the next fetch to that broker goes out, for the
partitions whose records have been handed to ``poll`` meanwhile; a partition
with undelivered records is not fetched again (one buffered answer per
partition bounds memory).

Answers are decoded on the fetcher thread into :class:`PartitionRecords`,
dropping records before the requested offset (a fetch returns whole batches,
so the first batch may start earlier) and control batches.  An answer whose
partition was sought elsewhere meanwhile (the position *epoch* changed) is
dropped.  ``OFFSET_OUT_OF_RANGE`` becomes a reset request (or an error for
``poll`` with ``auto_offset_reset="none"``); leader changes trigger a metadata
refresh and a retry after backoff.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from headwater import errors, records
from headwater.client import connection
from headwater.client.metadata import MetadataManager
from headwater.client.retry import Clock, monotonic_ms
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.types import ConsumerRecord, TopicPartition
from headwater.v1 import broker_pb2

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.5


def records_from(data: bytes, tp: TopicPartition, *, fetch_offset: int) -> list[ConsumerRecord]:
    """Decode the batches of a fetch answer, keeping records at or after ``fetch_offset``."""
    out: list[ConsumerRecord] = []
    topic, partition = tp
    for batch in records.read_batches(data):
        if batch.is_control or batch.last_offset < fetch_offset:
            continue
        for r in batch.record_list():
            if r.offset >= fetch_offset:
                out.append(
                    ConsumerRecord(
                        topic, partition, r.offset, r.timestamp_ms, r.key, r.value, r.headers
                    )
                )
    return out


class PartitionRecords:
    """Decoded records of one fetch answer, handed out by ``poll`` a slice at a time."""

    __slots__ = ("epoch", "error", "fetch_offset", "next_index", "records", "tp")

    def __init__(
        self,
        tp: TopicPartition,
        *,
        fetch_offset: int,
        epoch: int,
        records: list[ConsumerRecord],
        error: errors.HeadwaterError | None = None,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.epoch = epoch
        self.records = records
        self.next_index = 0
        self.error = error

    @property
    def exhausted(self) -> bool:
        return self.next_index >= len(self.records)

    def take(self, n: int) -> list[ConsumerRecord]:
        chunk = self.records[self.next_index : self.next_index + n]
        self.next_index += len(chunk)
        return chunk


class _Answer(NamedTuple):
    address: str
    sent: dict[TopicPartition, tuple[int, int]]
    response: Any
    error: errors.HeadwaterError | None


class Fetcher:
    """Runs :meth:`run` on its own thread; ``poll`` calls :meth:`take` on the user's."""

    def __init__(
        self,
        *,
        settings: ConsumerSettings,
        subscriptions: SubscriptionState,
        metadata: MetadataManager,
        channels: connection.Channels,
        clock: Clock = monotonic_ms,
    ) -> None:
        self._settings = settings
        self._subs = subscriptions
        self._metadata = metadata
        self._channels = channels
        self._clock = clock
        self._answers: queue.SimpleQueue[_Answer] = queue.SimpleQueue()
        self._in_flight: set[str] = set()
        self._backoff_until: dict[TopicPartition, float] = {}
        self._attempts: dict[TopicPartition, int] = collections.defaultdict(int)
        self._wakeup = threading.Event()
        self._running = True
        # Buffered answers, shared with poll's thread under the condition.
        self._ready = threading.Condition()
        self._buffered: collections.OrderedDict[TopicPartition, PartitionRecords] = (
            collections.OrderedDict()
        )
        self._reset_waiting = False

    # -- called by the consumer's thread --------------------------------------------

    def wakeup(self) -> None:
        self._wakeup.set()

    def close(self) -> None:
        self._running = False
        self._wakeup.set()
        with self._ready:
            self._ready.notify_all()

    def wait_for_data(self, timeout_s: float) -> None:
        """Block until an answer is buffered, a reset is needed, or ``timeout_s``."""
        with self._ready:
            if not self._buffered and not self._reset_waiting:
                self._ready.wait(timeout_s)
            self._reset_waiting = False

    def take(
        self, max_records: int, *, paused: Callable[[TopicPartition], bool]
    ) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records, advancing positions past them.

        Raises the first buffered partition error (out of range with no reset, ...).
        """
        out: list[ConsumerRecord] = []
        woke = False
        with self._ready:
            for tp in list(self._buffered):
                if len(out) >= max_records:
                    break
                pr = self._buffered[tp]
                if self._subs.epoch(tp) != pr.epoch:
                    del self._buffered[tp]  # sought elsewhere, or unassigned
                    woke = True
                    continue
                if paused(tp):
                    continue
                if pr.error is not None:
                    del self._buffered[tp]
                    woke = True
                    raise pr.error
                position = self._subs.position(tp)
                chunk = pr.take(max_records - len(out))
                if chunk and position is not None:
                    self._subs.advance(tp, expected=position, to=chunk[-1].offset + 1)
                    out.extend(chunk)
                if pr.exhausted:
                    del self._buffered[tp]
                    woke = True
        if woke:
            self._wakeup.set()
        return out

    def clear(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Drop buffered records (of ``tps``, or all)."""
        with self._ready:
            if tps is None:
                self._buffered.clear()
            else:
                for tp in tps:
                    self._buffered.pop(tp, None)
        self._wakeup.set()

    def buffered_partitions(self) -> set[TopicPartition]:
        with self._ready:
            return set(self._buffered)

    # -- the fetcher thread ---------------------------------------------------------

    def run(self) -> None:
        while self._running:
            try:
                self.run_once()
            except Exception:
                log.exception("consumer fetcher loop failed; continuing")
                self._wakeup.wait(_IDLE_WAIT_S)

    def run_once(self) -> None:
        self._metadata.maybe_refresh()
        while True:
            try:
                answer = self._answers.get_nowait()
            except queue.Empty:
                break
            self._in_flight.discard(answer.address)
            self._handle(answer)
        wait_s = self._send_fetches()
        if self._wakeup.wait(wait_s):
            self._wakeup.clear()

    def _send_fetches(self) -> float:
        now = self._clock()
        wait_s = _IDLE_WAIT_S
        buffered = self.buffered_partitions()
        meta = self._metadata.current
        by_leader: dict[str, dict[TopicPartition, tuple[int, int]]] = {}
        for tp, (position, epoch) in self._subs.fetchable().items():
            if tp in buffered:
                continue
            until = self._backoff_until.get(tp, 0.0)
            if until > now:
                wait_s = min(wait_s, (until - now) / 1000.0)
                continue
            leader = meta.leader(tp)
            if leader is None:
                self._metadata.add_topics([tp.topic])
                self._metadata.request_update()
                self._backoff(tp, now)
                continue
            by_leader.setdefault(leader.address, {})[tp] = (position, epoch)
        s = self._settings
        for address, parts in by_leader.items():
            if address in self._in_flight:
                continue
            request = broker_pb2.FetchRequest(
                replica_id=-1,
                max_wait_ms=s.fetch_max_wait_ms,
                min_bytes=s.fetch_min_bytes,
                max_bytes=s.fetch_max_bytes,
                isolation_level=broker_pb2.READ_UNCOMMITTED,
                partitions=[
                    broker_pb2.FetchPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        fetch_offset=position,
                        current_leader_epoch=-1,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=s.max_partition_fetch_bytes,
                    )
                    for tp, (position, _epoch) in parts.items()
                ],
            )
            self._in_flight.add(address)
            self._start_fetch(address, request, parts)
        return wait_s

    def _start_fetch(
        self, address: str, request: Any, parts: dict[TopicPartition, tuple[int, int]]
    ) -> None:
        timeout_s = (self._settings.fetch_max_wait_ms + self._settings.request_timeout_ms) / 1000
        try:
            call = self._channels.broker(address).Fetch.future(request, timeout=timeout_s)
        except errors.HeadwaterError as exc:
            self._answers.put(_Answer(address, parts, None, exc))
            return

        def done(fut: Any) -> None:
            try:
                resp, err = fut.result(), None
            except Exception as exc:
                import grpc

                err = (
                    connection.translate_rpc_error(exc, address)
                    if isinstance(exc, grpc.RpcError)
                    else errors.UnknownServerError(f"{type(exc).__name__}: {exc}")
                )
                resp = None
            self._answers.put(_Answer(address, parts, resp, err))
            self._wakeup.set()

        call.add_done_callback(done)

    def _handle(self, answer: _Answer) -> None:
        now = self._clock()
        if answer.error is not None:
            log.debug("fetch from %s failed: %s", answer.address, answer.error)
            self._metadata.request_update()
            for tp in answer.sent:
                self._backoff(tp, now)
            return
        for p in answer.response.partitions:
            tp = TopicPartition(p.topic, p.partition)
            sent = answer.sent.get(tp)
            if sent is None:
                continue
            fetch_offset, epoch = sent
            if self._subs.epoch(tp) != epoch:
                continue  # sought elsewhere while the fetch was in flight
            if p.error == 0:
                self._attempts.pop(tp, None)
                self._subs.update_watermarks(
                    tp, high_watermark=p.high_watermark, log_start_offset=p.log_start_offset
                )
                try:
                    recs = records_from(p.records, tp, fetch_offset=fetch_offset)
                except errors.HeadwaterError as exc:
                    self._buffer(
                        PartitionRecords(
                            tp, fetch_offset=fetch_offset, epoch=epoch, records=[], error=exc
                        )
                    )
                    continue
                if recs:
                    self._buffer(
                        PartitionRecords(tp, fetch_offset=fetch_offset, epoch=epoch, records=recs)
                    )
                continue
            error = errors.for_code(p.error, p.error_message or f"fetching {tp}")
            if isinstance(error, errors.OffsetOutOfRangeError):
                strategy = self._subs.default_reset
                if strategy == "none":
                    self._buffer(
                        PartitionRecords(
                            tp,
                            fetch_offset=fetch_offset,
                            epoch=epoch,
                            records=[],
                            error=errors.OffsetOutOfRangeError(
                                f"offset {fetch_offset} is out of range for {tp} and "
                                "auto_offset_reset='none'"
                            ),
                        )
                    )
                else:
                    self._subs.request_reset([tp], strategy)
                    with self._ready:
                        self._reset_waiting = True
                        self._ready.notify_all()
            elif error.retriable:
                self._metadata.request_update()
                self._backoff(tp, now)
            else:
                self._buffer(
                    PartitionRecords(
                        tp, fetch_offset=fetch_offset, epoch=epoch, records=[], error=error
                    )
                )

    def _buffer(self, pr: PartitionRecords) -> None:
        with self._ready:
            self._buffered[pr.tp] = pr
            self._ready.notify_all()

    def _backoff(self, tp: TopicPartition, now: float) -> None:
        self._attempts[tp] += 1
        self._backoff_until[tp] = now + self._settings.retry.backoff_ms(self._attempts[tp])
