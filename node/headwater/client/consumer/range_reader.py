"""Reading offsets ``[start, end)`` of one partition: the client's range reader.

A batch job (the Spark connector's executor tasks) reads a planned range of
one partition: no subscription, no group, no position shared with ``poll``.
:meth:`RangeReader.read_range` yields the range's records one fetch answer at
a time, as :class:`RangeChunk`\\ s of decoded batches, through the machinery
the consumer uses: the leader from the
:class:`~headwater.client.transport.metadata.MetadataManager`, Fetch calls on the
connection's :class:`~headwater.client.transport.connection.CallPool`, batches
CRC-checked, decompressed and decoded (by the native codec when built) by
:mod:`headwater.records`, and retries decided by the client's
:class:`~headwater.retry.RetryPolicy`.

**Pipelined.**  One Fetch is in flight per read; the next goes out as soon as
an answer's batch headers say where it ends, *before* its records are
decoded, so the broker reads the next chunk while this one is decoded and
handed on (the consumer's fetcher does the same for large answers).

**Exact.**  A fetch returns whole stored batches, so the first batch may start
before ``start`` and the last may run past ``end``: only those two are
filtered record by record.  A batch's ``next_offset`` (not its last record)
moves the position, so compacted gaps and control batches are stepped over.
Records are handed out as the codec decodes them (``ConsumedRecord``: offset,
timestamp, key, value, headers), with no per-record object built on top.

**Fenced.**  Each Fetch carries the leader epoch the metadata names (Kafka's
KIP-320), so a deposed leader answers FENCED_LEADER_EPOCH instead of serving
records its successor may have truncated.  That, UNKNOWN_LEADER_EPOCH,
NOT_LEADER_OR_FOLLOWER and lost connections are retriable: metadata is
refreshed and the fetch retried after the policy's backoff, as long as the
read moved within ``timeout_ms``.

**Isolation.**  With ``isolation_level="read_committed"`` the fetches ask for
committed data only: the leader answers up to the last stable offset and names
the aborted transactions the answer overlaps, whose batches are dropped
(:func:`~headwater.records.control.committed_batches`, as the consumer does).  The
position still moves past them, so a range ending at the last stable offset is
read to its end.  A range reaching past the last stable offset waits there, like
one past the high watermark.

**Missing offsets.**  Records the range expects may be gone: deleted by
retention (OFFSET_OUT_OF_RANGE below the log start), lost with a partition
that was reset or recreated (out of range past its end), or never there (no
record at the position for ``timeout_ms``, e.g. a range past the high
watermark).  Each is reported to ``on_missing`` as :class:`MissingOffsets`:
by default that raises ``OffsetOutOfRangeError``; a callback that returns lets
the read skip what is gone (Spark's ``failOnDataLoss=false``).

:class:`RangeProgress` holds one read's position and decisions, without I/O;
:class:`RangeReader` makes the calls.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, NamedTuple

from headwater import errors, records
from headwater.client.consumer import offsets
from headwater.client.settings import ConsumerSettings, parse_bootstrap
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.security import PLAINTEXT, ClientSecurity
from headwater.client.types import TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.records import ConsumedRecord
from headwater.records.allocator import tune_allocator
from headwater.records.control import AbortedTransaction, committed_batches
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2

log = logging.getLogger(__name__)

_POOL_SLACK_S = 5.0
"""How much longer than a call's own deadline to wait for its outcome from the pool."""


class MissingOffsets(NamedTuple):
    """Offsets ``[start, end)`` of ``tp`` that a range read expected and cannot get."""

    tp: TopicPartition
    start: int
    end: int
    reason: str

    @property
    def message(self) -> str:
        return f"offsets [{self.start}, {self.end}) of {self.tp} {self.reason}"


def raise_missing(missing: MissingOffsets) -> None:
    """The default ``on_missing``: fail the read."""
    raise errors.OffsetOutOfRangeError(missing.message)


class DecodedBatch(NamedTuple):
    """The records of one stored batch that fall inside the range (never empty)."""

    records: list[ConsumedRecord]
    timestamp_type: int
    """:class:`~headwater.records.TimestampType` value shared by the batch's records."""


class RangeBatches(NamedTuple):
    """The batches of one fetch answer that hold records of ``[start, end)``, not decoded.

    Control batches and (read_committed) aborted transactions' batches are left out;
    the first and last may also hold records outside ``[start, end)``.
    """

    tp: TopicPartition
    batches: list[records.Batch]
    start: int
    end: int
    next_offset: int
    """Where the read goes on after this answer."""


class RangeChunk(NamedTuple):
    """The in-range records of one fetch answer, batch by batch, in offset order."""

    tp: TopicPartition
    batches: list[DecodedBatch]
    next_offset: int
    """Where the read goes on after this chunk."""

    @property
    def record_count(self) -> int:
        return sum(len(b.records) for b in self.batches)

    def all_records(self) -> list[ConsumedRecord]:
        """Every record of the chunk in one list."""
        out: list[ConsumedRecord] = []
        for b in self.batches:
            out += b.records
        return out


def decode_range(batches: Sequence[records.Batch], *, start: int, end: int) -> list[DecodedBatch]:
    """The records of ``batches`` in ``[start, end)``, control batches skipped.

    Only a batch that crosses ``start`` or ``end`` is filtered record by
    record; the others are handed out as the codec decoded them.
    """
    out: list[DecodedBatch] = []
    for batch in batches:
        h = batch.header
        if h.is_control or h.next_offset <= start or h.base_offset >= end:
            continue
        recs = batch.record_list()
        if h.base_offset < start or h.last_offset >= end:
            recs = [r for r in recs if start <= r[0] < end]
        if recs:
            out.append(DecodedBatch(recs, int(h.timestamp_type)))
    return out


class _NoRecords(errors.HeadwaterError):
    """An answer had no record at the position (not written yet, or never): retried."""

    retriable = True


class _OutOfRange(Exception):
    """OFFSET_OUT_OF_RANGE at the position; ``log_start`` is -1 when the answer had none."""

    def __init__(self, log_start: int) -> None:
        super().__init__(f"out of range (log start {log_start})")
        self.log_start = log_start


class RangeProgress:
    """Where one read of ``[start, end)`` of ``tp`` stands, and what an outcome means.

    No I/O: :class:`RangeReader` feeds it answers and errors with the time and
    acts on what it returns.  Invariants: ``start <= position <= end``; the
    position only moves forward; the read is done when it reaches ``end``.
    ``attempts`` counts failures since the position last moved, at
    ``last_progress_ms`` (or the start of the read); retries stop
    ``timeout_ms`` after that.  Used by the one thread iterating the read.
    """

    def __init__(
        self,
        tp: TopicPartition,
        *,
        start: int,
        end: int,
        timeout_ms: float,
        retry: RetryPolicy,
        now_ms: float,
    ) -> None:
        if not 0 <= start <= end:
            raise ValueError(f"need 0 <= start <= end, not [{start}, {end})")
        self.tp = tp
        self.position = start
        self.end = end
        self.timeout_ms = timeout_ms
        self.attempts = 0
        self.last_progress_ms = now_ms
        self._retry = retry

    @property
    def done(self) -> bool:
        return self.position >= self.end

    def next_offset(self, batches: Sequence[records.Batch]) -> int:
        """Where the read goes after an answer at the position holding ``batches``.

        Raises ``_NoRecords`` when none of them reaches past the position.
        """
        if not batches or batches[-1].header.next_offset <= self.position:
            raise _NoRecords(f"no records of {self.tp} at offset {self.position}")
        return batches[-1].header.next_offset

    def advance(self, to: int, *, now_ms: float) -> None:
        """The position moved to ``to`` (capped at ``end``): progress, failures forgotten."""
        if to <= self.position:
            raise ValueError(
                f"{self.tp}: the position only moves forward ({self.position} -> {to})"
            )
        self.position = min(to, self.end)
        self.attempts = 0
        self.last_progress_ms = now_ms

    def retry_wait_ms(self, error: errors.HeadwaterError, *, now_ms: float) -> float | None:
        """How long to wait before retrying after ``error``; None: give up."""
        self.attempts += 1
        deadline_ms = self.last_progress_ms + self.timeout_ms
        if not self._retry.should_retry(
            error, attempt=self.attempts, now_ms=now_ms, deadline_ms=deadline_ms
        ):
            return None
        return min(self._retry.backoff_ms(self.attempts), max(0.0, deadline_ms - now_ms))

    def out_of_range(self, *, log_start: int, now_ms: float) -> MissingOffsets:
        """The broker refused the position: skip what retention deleted, or give up the rest."""
        at = self.position
        if at < log_start:
            gap = MissingOffsets(
                self.tp, at, min(log_start, self.end), "were deleted before they were read"
            )
        else:
            gap = MissingOffsets(
                self.tp,
                at,
                self.end,
                f"are not in the log: offset {at} is beyond its end "
                "(the partition was reset or recreated)",
            )
        self.advance(gap.end, now_ms=now_ms)
        return gap

    def give_up(self) -> MissingOffsets:
        """No record came at the position in ``timeout_ms``: the rest of the range is missing."""
        gap = MissingOffsets(
            self.tp,
            self.position,
            self.end,
            f"never came: no record at offset {self.position} in {self.timeout_ms:.0f} ms",
        )
        self.position = self.end
        return gap


class _InFlight:
    """One Fetch submitted to the call pool; :meth:`outcome` waits for its answer."""

    __slots__ = ("_answers", "address", "offset", "timeout_s")

    def __init__(self, *, address: str, offset: int, timeout_s: float) -> None:
        self.address = address
        self.offset = offset
        self.timeout_s = timeout_s
        self._answers: queue.SimpleQueue[tuple[Any, errors.HeadwaterError | None]] = (
            queue.SimpleQueue()
        )

    def done(self, response: Any, error: errors.HeadwaterError | None) -> None:
        self._answers.put((response, error))

    def outcome(self) -> Any:
        """The response; raises the call's error (lost answers are a timeout)."""
        try:
            response, error = self._answers.get(timeout=self.timeout_s + _POOL_SLACK_S)
        except queue.Empty:
            raise errors.RequestTimedOutError(
                f"no answer from broker {self.address} in {self.timeout_s:.0f} s"
            ) from None
        if error is not None:
            raise error
        return response


class RangeReader:
    """Reads offset ranges of partitions; one channel cache and metadata view, many reads.

    Thread-safe: any number of threads may each iterate their own
    :meth:`read_range` at once (metadata and channels are shared and
    thread-safe; a read's state belongs to the thread iterating it).  Takes
    the consumer's fetch settings, by Kafka's names.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str] | tuple[str, ...] = "127.0.0.1:9092",
        *,
        fetch_max_wait_ms: int = 500,
        max_partition_fetch_bytes: int = 1024 * 1024,
        fetch_max_bytes: int = 50 * 1024 * 1024,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        default_api_timeout_ms: int = 60000,
        clock: Clock = monotonic_ms,
        sleep: Callable[[float], None] = time.sleep,
        security: ClientSecurity = PLAINTEXT,
        isolation_level: str = "read_uncommitted",
        client_id: str = "",
    ) -> None:
        """``client_id``: Kafka's ``client.id``, sent with every call (quotas and the
        brokers' logs tell clients apart by it); "" sends none."""
        tune_allocator()  # MiB fetch responses: see headwater.records.allocator
        self.settings = ConsumerSettings(
            bootstrap_servers=parse_bootstrap(bootstrap_servers),
            fetch_max_wait_ms=fetch_max_wait_ms,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_max_bytes=fetch_max_bytes,
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            isolation_level=isolation_level,
            retry=RetryPolicy(
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=max(retry_backoff_ms, retry_backoff_max_ms),
            ),
        )
        self.default_api_timeout_ms = default_api_timeout_ms
        self._clock = clock
        self._sleep = sleep
        self._channels = connection.Channels(
            name="headwater-range-reader", security=security, client_id=client_id
        )
        self._metadata = MetadataManager(
            bootstrap=self.settings.bootstrap_servers,
            channels=self._channels,
            retry=self.settings.retry,
            request_timeout_ms=request_timeout_ms,
            max_age_ms=metadata_max_age_ms,
            clock=clock,
        )

    def close(self) -> None:
        """Close the channels; reads still iterating fail with ``NetworkError``."""
        self._channels.close()

    def __enter__(self) -> RangeReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def read_range(
        self,
        tp: TopicPartition | tuple[str, int],
        start_offset: int,
        end_offset: int,
        *,
        timeout_ms: float | None = None,
        on_missing: Callable[[MissingOffsets], None] = raise_missing,
    ) -> Iterator[RangeChunk]:
        """Records ``[start_offset, end_offset)`` of ``tp``, a fetch answer per chunk.

        ``timeout_ms`` (default ``default_api_timeout_ms``) is how long the read
        may go without moving before it fails with the last retriable error or,
        when no record came, reports the rest of the range to ``on_missing``.
        Chunks without in-range records are not yielded.  Drop each chunk before
        asking for the next (``for chunk in ...: use(chunk); del chunk``, or keep
        only what was made of it): the next one is decoded during ``next()``, and
        decoding with the previous chunk's records still alive costs CPU.
        """
        return self._decoded(
            self.read_range_batches(
                tp, start_offset, end_offset, timeout_ms=timeout_ms, on_missing=on_missing
            )
        )

    def read_range_batches(
        self,
        tp: TopicPartition | tuple[str, int],
        start_offset: int,
        end_offset: int,
        *,
        timeout_ms: float | None = None,
        on_missing: Callable[[MissingOffsets], None] = raise_missing,
    ) -> Iterator[RangeBatches]:
        """:meth:`read_range` without the decoding: each answer's CRC-checked batches that
        hold records of the range, for a caller that decodes them its own way (into
        columns, :mod:`headwater.records.columns`).  Answers without such batches are not
        yielded; drop each before asking for the next, as with :meth:`read_range`.
        """
        if not 0 <= start_offset <= end_offset:
            raise ValueError(f"need 0 <= start <= end, not [{start_offset}, {end_offset})")
        return self._read(
            TopicPartition(*tp),
            start_offset,
            end_offset,
            timeout_ms=self.default_api_timeout_ms if timeout_ms is None else timeout_ms,
            on_missing=on_missing,
        )

    @staticmethod
    def _decoded(answers: Iterator[RangeBatches]) -> Iterator[RangeChunk]:
        for answer in answers:
            tp, next_offset = answer.tp, answer.next_offset
            decoded = decode_range(answer.batches, start=answer.start, end=answer.end)
            # Not kept while the next answer is awaited and decoded: holding one
            # answer's records while decoding the next cost about 8% more CPU per
            # record (a larger heap to allocate from; measured against Spark's
            # former reader).  Callers should drop each chunk as early, too.
            del answer
            if decoded:
                yield RangeChunk(tp, decoded, next_offset)
            del decoded

    def _read(
        self,
        tp: TopicPartition,
        start: int,
        end: int,
        *,
        timeout_ms: float,
        on_missing: Callable[[MissingOffsets], None],
    ) -> Iterator[RangeBatches]:
        # Created on the first next(), so the timeout counts from when the read begins.
        progress = RangeProgress(
            tp,
            start=start,
            end=end,
            timeout_ms=timeout_ms,
            retry=self.settings.retry,
            now_ms=self._clock(),
        )
        if progress.done:
            return
        self._metadata.add_topics([tp.topic])
        pending = self._send(tp, progress.position)
        while not progress.done:
            try:
                batches, aborted = self._batches(tp, pending)
                next_offset = progress.next_offset(batches)  # aborted batches move it too
            except _OutOfRange as exc:
                log_start = exc.log_start if exc.log_start >= 0 else self._log_start(progress)
                on_missing(progress.out_of_range(log_start=log_start, now_ms=self._clock()))
            except errors.HeadwaterError as exc:
                wait_ms = progress.retry_wait_ms(exc, now_ms=self._clock())
                if wait_ms is None:
                    if not isinstance(exc, _NoRecords):
                        raise
                    on_missing(progress.give_up())
                    continue
                log.debug("reading %s at %d: %s; retrying", tp, progress.position, exc)
                self._metadata.request_update()
                self._sleep(wait_ms / 1000.0)
            else:
                start = progress.position
                progress.advance(next_offset, now_ms=self._clock())
                if not progress.done:  # the next fetch goes out before this one is decoded
                    pending = self._send(tp, progress.position)
                if aborted:
                    batches = list(committed_batches(batches, aborted))
                batches = [
                    b
                    for b in batches
                    if not b.header.is_control
                    and b.header.next_offset > start
                    and b.header.base_offset < progress.end
                ]
                if batches:
                    yield RangeBatches(tp, batches, start, progress.end, progress.position)
                del batches  # the answer's buffer goes before the next one is awaited
                continue
            if not progress.done:
                pending = self._send(tp, progress.position)

    # -- I/O --------------------------------------------------------------------------

    def _send(self, tp: TopicPartition, offset: int) -> _InFlight | errors.HeadwaterError:
        """Submit a Fetch of ``tp`` at ``offset`` to its leader (or the error that stops it)."""
        meta = self._metadata
        meta.maybe_refresh()
        pm = meta.current.partition(tp)
        leader = meta.current.leader(tp)
        if pm is None or leader is None:
            try:
                meta.fetch(sorted({tp.topic}))
            except errors.HeadwaterError as exc:
                return exc
            pm = meta.current.partition(tp)
            leader = meta.current.leader(tp)
            if pm is None:
                code = meta.current.topic_errors.get(
                    tp.topic, errors.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
                return errors.for_code(code, f"partition {tp}")
            if leader is None:
                return errors.LeaderNotAvailableError(f"no leader for {tp}")
        s = self.settings
        request = broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=s.fetch_max_wait_ms,
            min_bytes=1,
            max_bytes=s.fetch_max_bytes,
            isolation_level=(
                broker_pb2.READ_COMMITTED if s.read_committed else broker_pb2.READ_UNCOMMITTED
            ),
            partitions=[
                broker_pb2.FetchPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    fetch_offset=offset,
                    current_leader_epoch=pm.leader_epoch,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=s.max_partition_fetch_bytes,
                )
            ],
        )
        address = leader.address
        call = _InFlight(
            address=address,
            offset=offset,
            timeout_s=(s.fetch_max_wait_ms + s.request_timeout_ms) / 1000.0,
        )
        try:
            self._channels.pool.submit(
                self._channels.broker(address).Fetch,
                request,
                address=address,
                timeout_s=call.timeout_s,
                done=call.done,
            )
        except errors.HeadwaterError as exc:
            return exc
        return call

    def _batches(
        self, tp: TopicPartition, pending: _InFlight | errors.HeadwaterError
    ) -> tuple[list[records.Batch], list[AbortedTransaction]]:
        """The CRC-checked batches of an answer and the aborted transactions it names
        (read_committed), or the error it amounts to."""
        if isinstance(pending, errors.HeadwaterError):
            raise pending
        response = pending.outcome()
        for p in response.partitions:
            if p.topic != tp.topic or p.partition != tp.partition:
                continue
            if p.error:
                err = errors.for_code(
                    p.error, p.error_message or f"fetching {tp} at {pending.offset}"
                )
                if isinstance(err, errors.OffsetOutOfRangeError):
                    raise _OutOfRange(p.log_start_offset)
                raise err
            fetch_offset = pending.offset
            batches = [b for b in records.read_batches(p.records) if b.next_offset > fetch_offset]
            aborted = [
                AbortedTransaction(a.producer_id, a.first_offset) for a in p.aborted_transactions
            ]
            return batches, aborted
        raise errors.UnknownServerError(f"the fetch answer did not mention {tp}")

    def _log_start(self, progress: RangeProgress) -> int:
        """The partition's log start offset, asked with ListOffsets (an answer had none)."""
        tp = progress.tp
        found = offsets.list_offsets(
            {tp: offsets.EARLIEST_TIMESTAMP},
            metadata=self._metadata,
            channels=self._channels,
            retry=self.settings.retry,
            request_timeout_ms=self.settings.request_timeout_ms,
            timeout_ms=progress.timeout_ms,
        )
        earliest = found.get(tp)
        return earliest.offset if earliest is not None else 0
