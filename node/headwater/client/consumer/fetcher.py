"""The consumer's background fetcher: one long-poll Fetch in flight per broker, pipelined.

A thread per consumer sends, to each leader that has fetchable partitions, one
Fetch for all of them (``max_partition_fetch_bytes`` each), held by the broker
until ``fetch_min_bytes`` exist or ``fetch_max_wait_ms`` pass.

**Pipelining.**  A partition may have up to :data:`MAX_BUFFERED_ANSWERS`
answers waiting (buffered for ``poll``, or received and not yet decoded).  When
an answer arrives its batches are CRC-checked and the offset after its last
complete batch becomes that partition's *fetch offset*; the next fetch goes
out at once, **before** the answer's records are decoded, so the broker reads
and sends answer *k+1* while this process decodes answer *k* and ``poll``
hands it out.  Without it each answer cost a full round trip of idle time
(about 10% of a 1 MiB answer's decode in pure Python, most of it with a native
codec).  Two answers per partition bound the memory at twice
``max_partition_fetch_bytes`` (decoded) per partition, like Kafka's one
completed fetch plus one in flight.  Only large answers are pipelined
(:data:`PIPELINE_MIN_BYTES`): a small one goes to ``poll`` first, since for a
trickle of records latency, not the round trip, is what counts.  With several
brokers, a broker whose large answer was checked gets its next fetch before the
other answers waiting are checked, and decoding pauses between partitions when
another answer has arrived, so that broker gets its next fetch at once; and each
fetch asks a broker for at most
:data:`FETCH_REQUEST_MAX_BYTES` (:func:`request_max_bytes`).

**Positions.**  Records are decoded into :class:`PartitionRecords` (records
before the requested offset, which a fetch returns because it sends whole
batches, and control batches are dropped).  ``poll`` takes records from the
head answer of each partition, advancing the position past them; when an
answer is exhausted the position moves to the offset after its last batch
(Kafka's ``nextFetchOffset``: it steps over compacted gaps and control
batches).  An answer is kept only if it starts where the previous one ended
(or at the position), and only for the position *epoch* it was fetched for:
a seek, reset or reassignment bumps the epoch and drops both buffered and
in-flight answers, and a late duplicate (a fetch to an old leader answered
after one to the new leader) is dropped rather than handed out twice.

``OFFSET_OUT_OF_RANGE`` becomes a reset request (or an error for ``poll`` with
``auto_offset_reset="none"``); leader changes trigger a metadata refresh and a
retry after backoff.

**Inline fetches.**  A fetch normally goes to a pool worker, which queues the
answer back to this thread.  When every fetchable partition is led by one
broker and nothing else is in flight or waiting to be decoded
(:func:`inline_calls.may_fetch_inline`), this thread makes the long poll itself
and handles the answer at once: one thread hand-off less between the broker's
answer and ``poll``.  That long poll is a message on a long-lived
``FetchStream`` to the broker (:mod:`headwater.client.transport.streams`).

Threads: :meth:`Fetcher.run` owns the request state (in flight, backoff,
answers being decoded).  The buffered answers are shared with the user's
thread (``take``, ``clear``) under one condition, which ``poll`` waits on.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

from headwater import errors, records
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.transport import connection, inline_calls, rpc_errors
from headwater.client.transport.metadata import MetadataManager
from headwater.client.types import BrokerMetadata, ConsumerRecord, TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.records.control import AbortedTransaction, committed_batches
from headwater.v1 import broker_pb2

log = logging.getLogger(__name__)

_IDLE_WAIT_S = 0.5

MAX_BUFFERED_ANSWERS = 2
"""Answers per partition buffered or being decoded; a partition at this count is not fetched."""

PIPELINE_MIN_BYTES = 64 * 1024
"""Only answers at least this large are pipelined: the next fetch of their partition goes
out before they are decoded and while they wait for ``poll``.  A smaller answer (the
latency case: a few records) is decoded and handed to ``poll`` first, and its partition
fetched again once ``poll`` took it, as without pipelining: sending a fetch costs this
process about 0.2 ms of GIL that ``poll``'s thread would otherwise wait for, and the
fetch would only wait at the broker for new records anyway."""


FETCH_REQUEST_MAX_BYTES = 8 * 1024 * 1024
"""The most one Fetch asks a broker for when ``fetch_max_bytes`` allows more (see
:func:`request_max_bytes`)."""


def request_max_bytes(settings: ConsumerSettings) -> int:
    """A Fetch request's ``max_bytes``: ``fetch_max_bytes``, at most
    :data:`FETCH_REQUEST_MAX_BYTES` but never less than ``max_partition_fetch_bytes``.

    ``fetch_max_bytes`` (Kafka's default, 50 MiB) bounds an answer; asking each
    broker for less changes no record a caller gets, only how many round trips
    bring them (a broker always returns at least the first batch, however large).
    An answer above glibc's largest mmap threshold (32 MiB, see
    :mod:`headwater.records.allocator`) is a fresh ``mmap`` in the broker and in
    this process, page-faulted in anew each time: reading 300 partitions from 3
    brokers, whose answers reached 37 MB at 50 MiB, the consumer's system CPU fell
    from 0.28 to 0.17 us per record at 8 MiB (docs/performance.md).
    """
    return min(
        settings.fetch_max_bytes,
        max(FETCH_REQUEST_MAX_BYTES, settings.max_partition_fetch_bytes),
    )


def fetch_request(
    settings: ConsumerSettings, parts: dict[TopicPartition, tuple[int, int]]
) -> broker_pb2.FetchRequest:
    """The Fetch for ``parts`` (``{tp: (fetch offset, epoch)}``) that this consumer sends.

    Each partition is added to the request in place (``partitions.add``): building a
    ``FetchPartition`` and copying it in costs about three times as much, a
    millisecond for a broker leading 100 of the partitions read.
    """
    s = settings
    request = broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=s.fetch_max_wait_ms,
        min_bytes=s.fetch_min_bytes,
        max_bytes=request_max_bytes(s),
        isolation_level=(
            broker_pb2.READ_COMMITTED if s.read_committed else broker_pb2.READ_UNCOMMITTED
        ),
    )
    add = request.partitions.add
    max_bytes = s.max_partition_fetch_bytes
    for tp, (position, _epoch) in parts.items():
        add(
            topic=tp.topic,
            partition=tp.partition,
            fetch_offset=position,
            current_leader_epoch=-1,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=max_bytes,
        )
    return request


def next_offset_after(batches: Sequence[records.Batch], fetch_offset: int) -> int:
    """The offset after the last of ``batches`` (``fetch_offset`` when there are none)."""
    return max(batches[-1].next_offset, fetch_offset) if batches else fetch_offset


def decode_batches(
    batches: Iterable[records.Batch], tp: TopicPartition, *, fetch_offset: int
) -> list[ConsumerRecord]:
    """The records of ``batches`` at or after ``fetch_offset``, control batches skipped.

    Only a batch that starts before ``fetch_offset`` (the first of an answer)
    is filtered record by record.  The codec makes each ``ConsumerRecord``
    itself, ``tp``'s topic and partition followed by the record's fields
    (:meth:`~headwater.records.Batch.record_list_as`): one object per record.
    Building them here from the codec's records (``tp + record``, re-typed)
    costs more than the native decoding.
    """
    out: list[ConsumerRecord] = []
    cls = ConsumerRecord
    for batch in batches:
        header = batch.header
        if header.is_control or header.next_offset <= fetch_offset:
            continue
        decoded = batch.record_list_as(cls, tp)
        if header.base_offset >= fetch_offset:
            out += decoded
        else:
            out += [r for r in decoded if r.offset >= fetch_offset]
    return out


def records_from(data: bytes, tp: TopicPartition, *, fetch_offset: int) -> list[ConsumerRecord]:
    """Decode the batches of a fetch answer, keeping records at or after ``fetch_offset``."""
    return decode_batches(records.read_batches(data), tp, fetch_offset=fetch_offset)


class PartitionRecords:
    """One fetch answer of one partition, handed out by ``poll`` a slice at a time.

    ``next_offset`` is where the partition's position goes once every record
    was handed out (the offset after the answer's last batch).
    """

    __slots__ = (
        "epoch",
        "error",
        "fetch_offset",
        "next_index",
        "next_offset",
        "records",
        "size_bytes",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        *,
        fetch_offset: int,
        epoch: int,
        records: list[ConsumerRecord],
        next_offset: int | None = None,
        size_bytes: int = 0,
        error: errors.HeadwaterError | None = None,
    ) -> None:
        self.tp = tp
        self.size_bytes = size_bytes
        self.fetch_offset = fetch_offset
        self.epoch = epoch
        self.records = records
        self.next_index = 0
        if next_offset is None:
            next_offset = records[-1].offset + 1 if records else fetch_offset
        self.next_offset = next_offset
        self.error = error

    @property
    def exhausted(self) -> bool:
        return self.next_index >= len(self.records)

    def take(self, n: int) -> list[ConsumerRecord]:
        start = self.next_index
        recs = self.records
        if start == 0 and n >= len(recs):
            self.next_index = len(recs)
            return recs  # the whole answer: no copy
        chunk = recs[start : start + n]
        self.next_index += len(chunk)
        return chunk


class _Answer(NamedTuple):
    address: str
    sent: dict[TopicPartition, tuple[int, int]]
    response: Any
    error: errors.HeadwaterError | None


class _Undecoded(NamedTuple):
    """A partition's answer whose batches are checked but whose records are not decoded yet."""

    tp: TopicPartition
    fetch_offset: int
    epoch: int
    batches: list[records.Batch]
    next_offset: int
    size_bytes: int


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
        allow_inline: bool = True,
    ) -> None:
        """``allow_inline=False``: every fetch through the pool."""
        self._settings = settings
        self._subs = subscriptions
        self._metadata = metadata
        self._channels = channels
        self._clock = clock
        self._answers: queue.SimpleQueue[_Answer] = queue.SimpleQueue()
        self._in_flight: set[str] = set()
        self._allow_inline = allow_inline
        self._inline = channels.inline_caller("Fetch")
        self._answered: set[str] = set()
        """Addresses whose last Fetch got an answer (not a transport error)."""
        self._backoff_until: dict[TopicPartition, float] = {}
        self._attempts: dict[TopicPartition, int] = collections.defaultdict(int)
        self._undecoded: dict[TopicPartition, _Undecoded] = {}
        self._undecoded_bytes = 0
        self._wakeup = threading.Event()
        self._running = True
        # Buffered answers per partition, oldest first, shared with poll's thread under
        # the condition.  Dict order is the order partitions are served in.
        self._ready = threading.Condition()
        self._buffered: dict[TopicPartition, collections.deque[PartitionRecords]] = {}
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

        Raises the first buffered partition error (out of range with no reset,
        a corrupt batch, ...) once the records before it have been returned.
        """
        out: list[ConsumerRecord] = []
        freed = False
        subs = self._subs
        with self._ready:
            for tp in list(self._buffered):
                if len(out) >= max_records:
                    break
                answers = self._buffered[tp]
                epoch = subs.epoch(tp)
                while answers and answers[0].epoch != epoch:
                    answers.popleft()  # sought elsewhere, reset or unassigned
                    freed = True
                if answers and not paused(tp):
                    error, served = self._take_from(tp, answers, out, max_records)
                    freed = freed or served
                    if served:  # round robin: a partition that was served goes last
                        del self._buffered[tp]
                        if answers:
                            self._buffered[tp] = answers
                    if error is not None:
                        self._wakeup.set()
                        raise error
                if not answers:
                    self._buffered.pop(tp, None)
        if freed:
            self._wakeup.set()  # partitions may be fetchable again
        return out

    def _take_from(
        self,
        tp: TopicPartition,
        answers: collections.deque[PartitionRecords],
        out: list[ConsumerRecord],
        max_records: int,
    ) -> tuple[errors.HeadwaterError | None, bool]:
        """Move records of ``tp``'s answers into ``out``: (an error to raise, served).

        An error answer is raised only when nothing was collected yet, so that
        positions never move past records ``poll`` then fails to return.
        """
        subs = self._subs
        served = False
        while answers and len(out) < max_records:
            pr = answers[0]
            if pr.error is not None:
                if out:
                    return None, served
                answers.popleft()
                return pr.error, True
            position = subs.position(tp)
            if position is None or (pr.next_index == 0 and pr.fetch_offset != position):
                answers.popleft()  # not where this partition is: a stale or duplicate answer
                served = True
                continue
            chunk = pr.take(max_records - len(out))
            if pr.exhausted:
                answers.popleft()
                served = True
                to = pr.next_offset
            else:
                to = chunk[-1].offset + 1
            if to != position:
                subs.advance(tp, expected=position, to=to)
            if chunk:
                out += chunk
                served = True
        return None, served

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
        try:
            while self._running:
                try:
                    self.run_once()
                except Exception:
                    if not self._running:
                        return  # closing: the channels are closed under the loop
                    log.exception("consumer fetcher loop failed; continuing")
                    self._undecoded.clear()
                    self._undecoded_bytes = 0
                    self._wakeup.wait(_IDLE_WAIT_S)
        finally:
            self._inline.close()

    def run_once(self) -> None:
        self._metadata.maybe_refresh()
        while True:
            try:
                answer = self._answers.get_nowait()
            except queue.Empty:
                break
            self._in_flight.discard(answer.address)
            self._handle(answer)
            if self._undecoded_bytes >= PIPELINE_MIN_BYTES and not self._answers.empty():
                # Its broker's next fetch goes out now, not after the other answers
                # waiting here are checked too (milliseconds each at MiBs).
                self._send_fetches()
        if self._undecoded and self._undecoded_bytes < PIPELINE_MIN_BYTES:
            self._decode_pending()
        # Large answers are decoded after the next fetches go out (pipelining).
        wait_s = self._send_fetches()
        if self._undecoded_bytes >= PIPELINE_MIN_BYTES:
            # A large answer of an inline fetch: its partition's next fetch goes out
            # (through the pool: an answer waits undecoded) before it is decoded.
            wait_s = min(wait_s, self._send_fetches())
        if self._undecoded:
            self._decode_pending()
            self._wakeup.set()  # decoded answers may leave room for another fetch
        if self._wakeup.wait(wait_s):
            self._wakeup.clear()

    def _decode_pending(self) -> None:
        """Decode the answers waiting, oldest first, each buffered for ``poll`` at once.

        Stops early, between partitions, when another answer has arrived: the loop
        then checks it and sends its broker the next fetch before decoding on, so that
        with several brokers none waits for this thread to decode the others' answers.
        """
        while self._undecoded:
            self._decode(next(iter(self._undecoded)))
            if not self._answers.empty():
                return

    def _decode(self, tp: TopicPartition) -> None:
        """Decode ``tp``'s waiting answer and buffer it (its records, or its error)."""
        u = self._undecoded.pop(tp)
        self._undecoded_bytes -= u.size_bytes
        try:
            recs = decode_batches(u.batches, u.tp, fetch_offset=u.fetch_offset)
        except errors.HeadwaterError as exc:
            self._buffer(
                PartitionRecords(
                    u.tp, fetch_offset=u.fetch_offset, epoch=u.epoch, records=[], error=exc
                )
            )
            return
        self._buffer(
            PartitionRecords(
                u.tp,
                fetch_offset=u.fetch_offset,
                epoch=u.epoch,
                records=recs,
                next_offset=u.next_offset,
                size_bytes=u.size_bytes,
            )
        )

    def _pipeline(self) -> dict[TopicPartition, tuple[int, int, int, bool]]:
        """``{tp: (answers waiting, epoch, next offset, large)}``, the last three of the newest."""
        out: dict[TopicPartition, tuple[int, int, int, bool]] = {}
        with self._ready:
            for tp, answers in self._buffered.items():
                if answers:
                    last = answers[-1]
                    large = last.size_bytes >= PIPELINE_MIN_BYTES
                    out[tp] = (len(answers), last.epoch, last.next_offset, large)
        for tp, u in self._undecoded.items():
            count = out[tp][0] if tp in out else 0
            out[tp] = (count + 1, u.epoch, u.next_offset, u.size_bytes >= PIPELINE_MIN_BYTES)
        return out

    def _send_fetches(self) -> float:
        now = self._clock()
        wait_s = _IDLE_WAIT_S
        waiting = self._pipeline()
        meta = self._metadata.current
        # Keyed by the leader's BrokerMetadata: its address is formatted once per broker.
        by_leader: dict[BrokerMetadata, dict[TopicPartition, tuple[int, int]]] = {}
        leaders: set[BrokerMetadata] = set()  # of every fetchable partition, fetched now or not
        held_back = pipelined = False
        for tp, (position, epoch) in self._subs.fetchable().items():
            leader = meta.leader(tp)
            if leader is not None:
                leaders.add(leader)
            queued = waiting.get(tp)
            if queued is not None:
                count, queued_epoch, next_offset, large = queued
                if count >= MAX_BUFFERED_ANSWERS or not large:
                    continue
                pipelined = True
                if queued_epoch == epoch:
                    position = next_offset
            until = self._backoff_until.get(tp, 0.0)
            if until > now:
                wait_s = min(wait_s, (until - now) / 1000.0)
                held_back = True
                continue
            if leader is None:
                self._metadata.add_topics([tp.topic])
                self._metadata.request_update()
                self._backoff(tp, now)
                held_back = True
                continue
            by_leader.setdefault(leader, {})[tp] = (position, epoch)
        s = self._settings
        for broker, parts in by_leader.items():
            address = broker.address
            if address in self._in_flight:
                continue
            request = fetch_request(s, parts)
            inline = self._allow_inline and inline_calls.may_fetch_inline(
                requests_in_flight=len(self._in_flight),
                leaders=len(leaders),
                held_back=held_back,
                undecoded=bool(self._undecoded),
                pipelined=pipelined,
                answered_before=address in self._answered,
            )
            self._in_flight.add(address)
            self._start_fetch(address, request, parts, inline=inline)
        return wait_s

    def _start_fetch(
        self,
        address: str,
        request: Any,
        parts: dict[TopicPartition, tuple[int, int]],
        *,
        inline: bool = False,
    ) -> None:
        timeout_s = (self._settings.fetch_max_wait_ms + self._settings.request_timeout_ms) / 1000
        if inline:
            # Made and handled here; run_once decodes the answer right after.
            try:
                response, error = self._inline.call(address, request, timeout_s=timeout_s), None
            except Exception as exc:
                response, error = None, rpc_errors.as_error(exc, address)
            self._in_flight.discard(address)
            self._handle(_Answer(address, parts, response, error))
            return

        def done(response: Any, error: errors.HeadwaterError | None) -> None:
            self._answers.put(_Answer(address, parts, response, error))
            self._wakeup.set()

        try:
            self._channels.pool.submit(
                self._channels.broker(address).Fetch,
                request,
                address=address,
                timeout_s=timeout_s,
                done=done,
            )
        except errors.HeadwaterError as exc:
            self._answers.put(_Answer(address, parts, None, exc))

    def _handle(self, answer: _Answer) -> None:
        now = self._clock()
        if isinstance(answer.error, errors.NetworkError | errors.RequestTimedOutError):
            self._answered.discard(answer.address)
        else:
            self._answered.add(answer.address)
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
                data = p.records
                try:
                    batches = list(records.read_batches(data))  # CRCs, not records yet
                except errors.HeadwaterError as exc:
                    self._buffer(
                        PartitionRecords(
                            tp, fetch_offset=fetch_offset, epoch=epoch, records=[], error=exc
                        )
                    )
                    continue
                next_offset = next_offset_after(batches, fetch_offset)
                if p.aborted_transactions:  # read_committed: drop the aborted batches
                    batches = list(
                        committed_batches(
                            batches,
                            [
                                AbortedTransaction(a.producer_id, a.first_offset)
                                for a in p.aborted_transactions
                            ],
                        )
                    )
                if next_offset > fetch_offset:
                    if tp in self._undecoded:  # the answer before it first, in order
                        self._decode(tp)
                    self._undecoded[tp] = _Undecoded(
                        tp, fetch_offset, epoch, batches, next_offset, len(data)
                    )
                    self._undecoded_bytes += len(data)
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
        """Queue ``pr`` behind ``tp``'s answers if it continues them, else drop it.

        An answer continues a partition when it was fetched for the current
        epoch at the offset where the newest buffered answer ends (or, with
        none buffered, at the position); anything else is stale.
        """
        tp = pr.tp
        with self._ready:
            answers = self._buffered.get(tp)
            if answers and answers[-1].epoch != pr.epoch:
                answers.clear()
            if self._subs.epoch(tp) != pr.epoch:
                return
            expected = answers[-1].next_offset if answers else self._subs.position(tp)
            if pr.error is None and pr.fetch_offset != expected:
                log.debug(
                    "dropping an answer for %s at %d, expected %s", tp, pr.fetch_offset, expected
                )
                return
            if answers is None:
                answers = self._buffered[tp] = collections.deque()
            answers.append(pr)
            self._ready.notify_all()

    def _backoff(self, tp: TopicPartition, now: float) -> None:
        self._attempts[tp] += 1
        self._backoff_until[tp] = now + self._settings.retry.backoff_ms(self._attempts[tp])
