"""One partition's log: append, read, look up by time, truncate, retain.

The :class:`Log` is Kafka's ``UnifiedLog`` reduced to what Headwater needs:
a list of :class:`~headwater.storage.segment.LogSegment` objects, the offsets
that bound them (log start, log end, high watermark, recovery point) and the
leader-epoch cache.  Produce requests arrive as RecordBatch bytes; the leader
validates headers and CRCs, patches ``baseOffset`` and ``partitionLeaderEpoch``
(outside the CRC) in copies of the 61-byte headers only, and appends headers
and untouched bodies with one ``writev`` (what to write is planned, without
I/O, by :mod:`headwater.storage.appends`).  Fetches return file bytes from
``os.pread``: nothing is decoded or re-encoded on either path.  Only
:meth:`Log.fetch_offset_by_timestamp` decodes records, and only the one batch
it lands on.

A refused append (corrupt batch, bad follower offsets, oversize batch) raises
before any byte is written, so the files are left exactly as they were.
"""

from __future__ import annotations

import bisect
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from headwater.errors import (
    InvalidRequestError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from headwater.records import validate_batches
from headwater.storage import appends, retention, timestamps
from headwater.storage.config import LogConfig
from headwater.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from headwater.storage.recovery import LoadInfo, load_segments, new_segment
from headwater.storage.segment import INT32_MAX, LogSegment, segment_file_name
from headwater.storage.transactions import AbortedTxn, collect_aborted
from headwater.storage.values import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchDataInfo,
    LogAppendInfo,
    TimestampAndOffset,
    parse_topic_partition,
)

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchDataInfo",
    "Log",
    "LogAppendInfo",
    "TimestampAndOffset",
    "parse_topic_partition",
]


PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOTS_KEPT = 2


class Log:
    """The log of one partition replica, in the directory ``<topic>-<partition>``.

    Invariants: segments are sorted by base offset and contiguous in offsets;
    the last one is the active segment; ``log_start_offset <= high_watermark
    <= log_end_offset`` and ``recovery_point <= log_end_offset``; everything
    below the recovery point has been fsynced.

    Threads: every public method takes the log's lock, so any thread may call
    any method; writers (appends, truncation, retention, roll) are serialised.
    Readers take the same lock for the duration of one ``read`` (a few
    ``pread`` calls, which release the GIL); they therefore always see whole
    batches below the log end offset and never a segment being deleted.
    The returned ``bytes`` are a copy and remain valid after the lock is released.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        now_ms: int,
        load_info: LoadInfo,
    ) -> None:
        self.dir = directory
        self.topic, self.partition = parse_topic_partition(directory.name)
        self.config = config
        self.load_info = load_info
        self._lock = threading.RLock()
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._next_offset = segments[-1].next_offset
        self._log_start_offset = min(
            max(log_start_offset, segments[0].base_offset), self._next_offset
        )
        self._recovery_point = min(recovery_point, self._next_offset)
        self._high_watermark = min(max(high_watermark, self._log_start_offset), self._next_offset)
        self._last_flush_ms = now_ms
        self._closed = False
        self._truncations = 0
        self.epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.epoch_cache.truncate_from_end(self._next_offset)
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        self._delete_snapshots_from(self._next_offset + 1)

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
    ) -> Log:
        """Open or create the log in ``directory``, recovering it unless shut down cleanly.

        The offsets come from the log manager's checkpoints; without them
        (``recovery_point=0``) a crash recovery rescans the whole log.
        """
        parse_topic_partition(directory.name)
        directory.mkdir(parents=True, exist_ok=True)
        segments, info = load_segments(
            directory,
            config,
            now_ms=now_ms,
            recovery_point=recovery_point,
            clean_shutdown=had_clean_shutdown,
        )
        if not segments:
            segments = [new_segment(directory, max(log_start_offset, 0), config, now_ms)]
        if not had_clean_shutdown:
            recovery_point = segments[-1].next_offset  # just verified
        return cls(
            directory,
            config,
            segments,
            log_start_offset=log_start_offset,
            recovery_point=recovery_point,
            high_watermark=high_watermark,
            now_ms=now_ms,
            load_info=info,
        )

    # -- offsets ---------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._next_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by replication; clamped to ``[log_start_offset, log_end_offset]``."""
        with self._lock:
            self._high_watermark = min(max(offset, self._log_start_offset), self._next_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def truncations(self) -> int:
        """How many times the log end moved back (:meth:`truncate_to`,
        :meth:`truncate_fully_and_start_at`): a producer snapshot taken before one of
        them describes batches the log may no longer hold (:meth:`write_producer_snapshot`)."""
        return self._truncations

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def segments(self) -> list[LogSegment]:
        """A snapshot of the segments, oldest first (for inspection and tests)."""
        with self._lock:
            return list(self._segments)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(epoch, end_offset)`` from the leader-epoch cache."""
        with self._lock:
            return self.epoch_cache.end_offset_for(epoch, self._next_offset)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config

    # -- appending -------------------------------------------------------------------------

    def append_as_leader(self, records: bytes, *, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Validate ``records``, assign offsets from the log end offset, stamp the epoch, append.

        Raises CorruptRecordError (bad CRC, magic, length, counts),
        MessageTooLargeError (a batch above ``max.message.bytes``) or
        RecordListTooLargeError (more than ``segment.bytes``); the log is then unchanged.
        See :func:`headwater.storage.appends.plan_leader_append` for the stamping.
        """
        headers = validate_batches(records, max_batch_bytes=self.config.max_message_bytes)
        if len(records) > self.config.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(records)} bytes of batches exceed segment.bytes={self.config.segment_bytes}"
            )
        log_append_time = self.config.message_timestamp_type == "LogAppendTime"
        with self._lock:
            self._check_open()
            plan = appends.plan_leader_append(
                records,
                headers,
                base_offset=self._next_offset,
                leader_epoch=leader_epoch,
                now_ms=now_ms,
                log_append_time=log_append_time,
            )
            return self._append(plan, now_ms)

    def append_as_follower(self, records: bytes, *, now_ms: int | None = None) -> LogAppendInfo:
        """Append batches fetched from the leader, keeping the leader's offsets and epochs.

        The first batch must start at the log end offset and offsets must
        increase (InvalidRecordError otherwise); CRCs are checked
        (CorruptRecordError).  ``max.message.bytes`` is not applied: the leader
        accepted these batches and the replica must hold the same bytes.
        ``now_ms`` only matters for ``segment.ms`` of a segment without timestamps.
        """
        headers = validate_batches(records, require_contiguous=False)
        with self._lock:
            self._check_open()
            plan = appends.plan_follower_append(
                records,
                headers,
                log_end_offset=self._next_offset,
                where=f"{self.topic}-{self.partition}",
            )
            if len(records) > self.config.segment_bytes:
                raise RecordListTooLargeError(
                    f"{len(records)} bytes exceed segment.bytes={self.config.segment_bytes}"
                )
            max_ts = max(h.max_timestamp for h in headers)
            now = now_ms if now_ms is not None else max_ts
            return self._append(plan, now)

    def _append(self, plan: appends.PlannedAppend, now_ms: int) -> LogAppendInfo:
        last = plan.placed[-1][1]
        max_ts, _ = plan.max_timestamp()
        segment = self._maybe_roll(plan.size, max_ts, last.last_offset, now_ms)
        segment.append(plan.pieces, plan.size, plan.placed)
        self._next_offset = last.next_offset
        for _, header in plan.placed:
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch > self.epoch_cache.latest_epoch:
                self.epoch_cache.assign(epoch, header.base_offset)
        if self._next_offset - self._recovery_point >= self.config.flush_messages:
            self._flush(now_ms)
        return appends.append_info(plan, log_start_offset=self._log_start_offset)

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, now_ms: int) -> LogSegment:
        segment = self._segments[-1]
        config = self.config
        if (
            segment.size > 0
            and (
                segment.size + size > config.segment_bytes
                or segment.time_waited_for_roll(now_ms, max_ts) > config.segment_ms
                or segment.indexes_full
            )
        ) or last_offset - segment.base_offset > INT32_MAX:
            return self._roll(now_ms)
        return segment

    def _roll(self, now_ms: int) -> LogSegment:
        old = self._segments[-1]
        if old.size == 0:
            return old
        old.on_become_inactive()
        new = new_segment(self.dir, self._next_offset, self.config, now_ms)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        # Kafka flushes the rolled segment so the recovery point moves with each roll.
        self._flush_segments(upto=new.base_offset)
        return new

    def roll(self, *, now_ms: int) -> None:
        """Close the active segment and start a new one at the log end (no-op if empty)."""
        with self._lock:
            self._check_open()
            self._roll(now_ms)

    # -- reading ---------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """Whole stored batches from the one holding ``start_offset``, up to ``max_bytes``.

        Never returns a batch with an offset >= ``max_offset`` (pass the high
        watermark for consumers).  With ``min_one_batch`` the first batch is
        returned even if it is larger than ``max_bytes``.  Raises
        OffsetOutOfRangeError unless ``log_start_offset <= start_offset <= log_end_offset``.
        """
        with self._lock:
            self._check_open()
            if not self._log_start_offset <= start_offset <= self._next_offset:
                raise OffsetOutOfRangeError(
                    f"{self.topic}-{self.partition}: offset {start_offset} is outside "
                    f"[{self._log_start_offset}, {self._next_offset}]"
                )
            chunks: list[bytes] = []
            total = 0
            if start_offset < self._next_offset and (
                max_offset is None or start_offset < max_offset
            ):
                first = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
                for segment in self._segments[first:]:
                    data, reached_end = segment.read(
                        start_offset,
                        max_bytes - total,
                        max_offset=max_offset,
                        min_one_batch=min_one_batch and total == 0,
                    )
                    if data:
                        chunks.append(data)
                        total += len(data)
                    if not reached_end or total >= max_bytes:
                        break
            records = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            return FetchDataInfo(
                fetch_offset=start_offset,
                records=records,
                log_start_offset=self._log_start_offset,
                log_end_offset=self._next_offset,
                high_watermark=self._high_watermark,
            )

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp >= ``timestamp``.

        Also answers EARLIEST_TIMESTAMP (-2), LATEST_TIMESTAMP (-1, the log end
        offset: the caller bounds it by the high watermark for consumers) and
        MAX_TIMESTAMP (-3).  None when no record qualifies.  Uses the time
        index and batch headers, then decodes the one batch it lands on.
        """
        with self._lock:
            self._check_open()
            if timestamp == EARLIEST_TIMESTAMP:
                lso = self._log_start_offset
                return TimestampAndOffset(-1, lso, self.epoch_cache.epoch_for_offset(lso))
            if timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(-1, self._next_offset, self.epoch_cache.latest_epoch)
            if timestamp == MAX_TIMESTAMP:
                return timestamps.max_timestamp_offset(self._segments, self._log_start_offset)
            if timestamp < 0:
                raise InvalidRequestError(f"unsupported ListOffsets timestamp {timestamp}")
            return timestamps.find_offset_by_timestamp(
                self._segments, timestamp, self._log_start_offset
            )

    # -- truncation and log start offset ---------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or after ``offset`` (follower divergence); True if any was.

        A batch that straddles ``offset`` is removed whole.  Also trims the
        leader-epoch cache and lowers the high watermark and recovery point.
        """
        with self._lock:
            self._check_open()
            if offset < 0:
                raise OffsetOutOfRangeError(f"cannot truncate to negative offset {offset}")
            if offset >= self._next_offset:
                return False
            if offset <= self._segments[0].base_offset:
                self._truncate_fully(offset)
                return True
            self._truncations += 1
            keep = bisect.bisect_left(self._bases, offset)
            for segment in self._segments[keep:]:
                segment.delete()
            del self._segments[keep:]
            del self._bases[keep:]
            active = self._segments[-1]
            active.truncate_to(offset)
            self._next_offset = active.next_offset
            self._log_start_offset = min(self._log_start_offset, self._next_offset)
            self._recovery_point = min(self._recovery_point, self._next_offset)
            self._high_watermark = min(self._high_watermark, self._next_offset)
            self.epoch_cache.truncate_from_end(self._next_offset)
            self._delete_snapshots_from(self._next_offset + 1)
            return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the (empty) log at ``offset``."""
        with self._lock:
            self._check_open()
            self._truncate_fully(offset)

    def _truncate_fully(self, offset: int) -> None:
        self._truncations += 1
        for segment in self._segments:
            segment.delete()
        self._segments = [new_segment(self.dir, offset, self.config, self._last_flush_ms)]
        self._bases = [offset]
        self._next_offset = self._log_start_offset = offset
        self._recovery_point = self._high_watermark = offset
        self.epoch_cache.clear()
        self._delete_snapshots_from(0)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset to ``offset``; True if it moved.

        Raises OffsetOutOfRangeError beyond the log end offset.  Segments
        wholly below it are removed by the next retention pass.
        """
        with self._lock:
            self._check_open()
            if offset > self._next_offset:
                raise OffsetOutOfRangeError(
                    f"{self.topic}-{self.partition}: cannot move the log start offset to "
                    f"{offset}, beyond the log end offset {self._next_offset}"
                )
            if offset <= self._log_start_offset:
                return False
            self._log_start_offset = offset
            self._high_watermark = max(self._high_watermark, offset)
            self._recovery_point = max(self._recovery_point, offset)
            self.epoch_cache.truncate_from_start(offset)
            return True

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset and drop whole segments below it.

        Returns the new log start offset (Kafka's low watermark).
        """
        with self._lock:
            self.maybe_increment_log_start_offset(offset)
            self._delete_prefix(retention.below_log_start(self._log_start_offset))
            return self._log_start_offset

    # -- retention ---------------------------------------------------------------------------

    def delete_retention_segments(self, now_ms: int) -> int:
        """Delete old closed segments by ``retention.ms`` and ``retention.bytes``.

        Whole segments only, oldest first, never the active segment; advances
        the log start offset.  Segments wholly below the log start offset go
        whatever the cleanup policy (see :mod:`headwater.storage.retention`).
        Returns the number of segments deleted.
        """
        with self._lock:
            self._check_open()
            deleted = self._delete_prefix(retention.below_log_start(self._log_start_offset))
            if not self.config.deletes:
                return deleted
            if self.config.retention_ms >= 0:
                deleted += self._delete_prefix(
                    retention.older_than(self.config.retention_ms, now_ms=now_ms)
                )
            if self.config.retention_bytes >= 0:
                size = sum(s.size for s in self._segments)
                deleted += self._delete_prefix(
                    retention.beyond_size(size - self.config.retention_bytes)
                )
            return deleted

    def _delete_prefix(self, predicate: retention.SegmentPredicate) -> int:
        count = 0
        while len(self._segments) > 1 and predicate(self._segments[0], self._bases[1]):
            self._segments.pop(0).delete()
            self._bases.pop(0)
            count += 1
        if count:
            new_start = self._segments[0].base_offset
            if new_start > self._log_start_offset:
                self._log_start_offset = new_start
                self._high_watermark = max(self._high_watermark, new_start)
                self._recovery_point = max(self._recovery_point, new_start)
                self.epoch_cache.truncate_from_start(new_start)
        return count

    # -- aborted transactions and producer snapshots ------------------------------------------

    @property
    def active_base_offset(self) -> int:
        """The base offset of the active segment (it changes when the log rolls)."""
        with self._lock:
            return self._bases[-1]

    def append_aborted(self, entry: AbortedTxn) -> None:
        """Index an abort in the ``.txnindex`` of the segment holding its marker."""
        with self._lock:
            self._check_open()
            i = bisect.bisect_right(self._bases, entry.last_offset) - 1
            if i < 0 or entry.last_offset >= self._next_offset:
                raise ValueError(f"abort marker at {entry.last_offset} is not in {self!r}")
            self._segments[i].txn_index.append(entry)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions a READ_COMMITTED fetch of
        ``[fetch_offset, upper_bound_offset)`` must name (Kafka's
        ``collectAbortedTransactions``: the indexes from the segment holding
        ``fetch_offset`` on)."""
        with self._lock:
            first = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
            return collect_aborted(
                (s.txn_index.index for s in self._segments[first:]),
                fetch_offset,
                upper_bound_offset,
            )

    def aborted_indexes_valid(self) -> bool:
        """Whether every ``.txnindex`` was read whole and lies inside its segment."""
        with self._lock:
            for segment in self._segments:
                index = segment.txn_index
                if not index.valid:
                    return False
                if index.entries and index.entries[-1].last_offset >= segment.next_offset:
                    return False
            return True

    def reset_aborted_from(self, offset: int) -> None:
        """Drop every indexed abort whose marker is at or after ``offset`` (all of them
        for 0), ready to index them again from the log."""
        with self._lock:
            self._check_open()
            for segment in self._segments:
                if offset <= segment.base_offset or not segment.txn_index.valid:
                    segment.txn_index.reset()
                else:
                    segment.txn_index.truncate_to(offset)

    def _snapshot_offsets(self) -> list[int]:
        offsets = []
        for path in self.dir.glob("*" + PRODUCER_SNAPSHOT_SUFFIX):
            stem = path.name[: -len(PRODUCER_SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def _snapshot_path(self, offset: int) -> Path:
        return self.dir / segment_file_name(offset, PRODUCER_SNAPSHOT_SUFFIX)

    def write_producer_snapshot(
        self, offset: int, data: bytes, *, truncations: int | None = None
    ) -> bool:
        """Store ``data`` (the producer state of every batch below ``offset``) as the
        ``<offset>.snapshot`` file and keep only the newest few; True if stored.

        A new leader trusts the newest whole snapshot and replays only the batches after
        it (:func:`headwater.server.runtime.txn_log.load_producer_state`), so a snapshot
        must be whole and of the batches the log holds:

        * whole or absent: the bytes go to a temporary file that is fsynced before the
          rename makes it the snapshot, so a crash leaves the older snapshots or the new
          one, never a torn one (a file damaged anyway fails its CRC and is skipped);
        * older snapshots are deleted only once the new one is in place;
        * not stale: ``truncations`` is :attr:`truncations` when ``data`` was taken;
          if the log was truncated since, nothing is stored (False), even when the log
          has grown past ``offset`` again: the truncation deleted the snapshots past its
          new end, and one still being written must not bring such a one back.  None:
          the caller knows the log was not truncated (it holds the log still);
        * it need not wait for the log's own flush: a snapshot past the log end that a
          crash left behind is deleted when the log is opened.

        Any thread may call it; the fsync runs outside the log's lock, so appends and
        reads never wait for it.  Raises ValueError for an offset outside the log.
        """
        with self._lock:
            self._check_open()
            self._check_snapshot_offset(offset)
        path = self._snapshot_path(offset)
        fd, name = tempfile.mkstemp(dir=self.dir, prefix=path.name + ".", suffix=".tmp")
        tmp = Path(name)
        try:
            with open(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            with self._lock:
                self._check_open()
                stale = truncations is not None and truncations != self._truncations
                if not stale:
                    self._check_snapshot_offset(offset)
                    os.replace(tmp, path)
                    for old in self._snapshot_offsets()[:-PRODUCER_SNAPSHOTS_KEPT]:
                        self._snapshot_path(old).unlink(missing_ok=True)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if stale:
            tmp.unlink(missing_ok=True)
        return not stale

    def _check_snapshot_offset(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self._next_offset:
            raise ValueError(f"snapshot offset {offset} is outside {self!r}")

    def producer_snapshots(self) -> list[int]:
        """The offsets of the stored producer snapshots, oldest first."""
        with self._lock:
            return [o for o in self._snapshot_offsets() if o <= self._next_offset]

    def read_producer_snapshot(self, offset: int) -> bytes | None:
        """The bytes of the snapshot at ``offset`` (None: gone or unreadable)."""
        with self._lock:
            try:
                return self._snapshot_path(offset).read_bytes()
            except OSError:
                return None

    def delete_producer_snapshot(self, offset: int) -> None:
        with self._lock:
            self._snapshot_path(offset).unlink(missing_ok=True)

    def _delete_snapshots_from(self, offset: int) -> None:
        """A snapshot past the log's end describes batches the log no longer has."""
        for o in self._snapshot_offsets():
            if o >= offset:
                self._snapshot_path(o).unlink(missing_ok=True)

    # -- durability and lifecycle ------------------------------------------------------------

    def compact_with(
        self,
        rewrite: Callable[[Sequence[LogSegment]], Mapping[int, Path]],
        *,
        now_ms: int,
    ) -> int:
        """Log compaction's hook (see :mod:`headwater.storage.cleaner`).

        Under the log's lock, ``rewrite`` gets the *cleanable* segments -- every
        segment but the active one whose records all lie below the high
        watermark -- and returns ``{base_offset: path}`` of rewritten ``.log``
        files (same base offset, surviving batches with their original offsets).
        Each is swapped in crash-safely: the old indexes are removed first, then
        the new file atomically replaces the old ``.log`` (``os.replace``), then
        the indexes are rebuilt.  A crash at any point leaves either the old or
        the new ``.log``, and missing indexes are rebuilt on open.  Returns the
        number of segments replaced.
        """
        with self._lock:
            self._check_open()
            cleanable = [s for s in self._segments[:-1] if s.next_offset <= self._high_watermark]
            if not cleanable:
                return 0
            replaced = rewrite(cleanable)
            for i, segment in enumerate(self._segments[:-1]):
                path = replaced.get(segment.base_offset)
                if path is None or segment not in cleanable:
                    continue
                with open(path, "rb+") as f:
                    os.fsync(f.fileno())
                segment.close()
                for suffix in (".index", ".timeindex"):
                    (self.dir / segment_file_name(segment.base_offset, suffix)).unlink(
                        missing_ok=True
                    )
                os.replace(path, segment.log_path)
                dir_fd = os.open(self.dir, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
                fresh = new_segment(self.dir, segment.base_offset, self.config, now_ms)
                fresh.recover()
                fresh.on_become_inactive()
                self._segments[i] = fresh
            return len(replaced)

    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync everything past the recovery point; the recovery point becomes the log end."""
        with self._lock:
            self._check_open()
            self._flush(now_ms)

    def flush_if_due(self, now_ms: int) -> bool:
        """Apply ``flush.ms``: flush if the last flush is that old and data is unflushed."""
        with self._lock:
            if self._closed or self._recovery_point >= self._next_offset:
                return False
            if now_ms - self._last_flush_ms < self.config.flush_ms:
                return False
            self._flush(now_ms)
            return True

    def _flush(self, now_ms: int | None) -> None:
        self._flush_segments(upto=self._next_offset + 1)
        self._recovery_point = self._next_offset
        if now_ms is not None:
            self._last_flush_ms = now_ms

    def _flush_segments(self, *, upto: int) -> None:
        """fsync segments holding offsets in ``[recovery_point, upto)``."""
        first = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        for segment in self._segments[first:]:
            if segment.base_offset >= upto:
                break
            segment.flush()
        self._recovery_point = max(self._recovery_point, min(upto, self._next_offset))

    def close(self) -> None:
        """Flush and close every file; later calls raise KafkaStorageError."""
        with self._lock:
            if self._closed:
                return
            self._flush(None)
            for segment in self._segments:
                segment.close()
            self._closed = True

    def delete(self) -> None:
        """Close and remove the partition directory."""
        with self._lock:
            if not self._closed:
                for segment in self._segments:
                    segment.close()
                self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self._next_offset}, hw={self._high_watermark}, segments={len(self._segments)})"
        )
