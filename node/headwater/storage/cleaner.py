"""Log compaction: keep the latest value of every key, drop tombstones once they are old.

Kafka's ``LogCleaner`` for topics with ``cleanup.policy`` containing ``compact``
(``__consumer_offsets`` above all: its keys are a group's offsets and metadata, and a
new coordinator replays the partition, so compaction bounds both disk and load time).

One pass of :func:`clean_log`:

1. Takes the *cleanable* segments: every segment but the active one, wholly below the
   high watermark (so nothing a follower could still truncate is rewritten).  The active
   segment is never touched.
2. Builds the offset map: key -> offset of its latest record in those segments.
3. Rewrites each segment keeping a record when it is the latest for its key (keyless
   records are kept: Kafka refuses them on compacted topics, but old data may have them).
   A tombstone (null value) that is the latest for its key is kept until
   ``delete.retention.ms`` after its timestamp, so that consumers that read the topic
   from the start in that window see the delete; then it goes too.  (Kafka >= 2.8 counts
   the horizon from the first cleaning instead of the record's timestamp; counting from
   the record is simpler, needs no extra state and is never earlier for records stamped
   at write time.)
4. Offsets are preserved: a batch whose records all survive is copied byte for byte; a
   batch that loses some is re-encoded as one single-record batch per survivor, at the
   survivor's original offset, with its original leader epoch, codec and producer id.
   Readers already cope with gaps in offsets.
5. Swaps the files through :meth:`headwater.storage.log.Log.compact_with`, which is
   crash-safe (see there).

Transactions (Kafka's rules; ``__consumer_offsets`` holds TxnOffsetCommit batches): the
records of a transaction whose ABORT marker is in the cleanable segments are dropped and
never shadow an older value; those of a transaction with no marker there yet
(undecided) are kept as they are and shadow nothing, so an abort decided later cannot
have removed the value it leaves in force; a committed transaction's records are
compacted like any other, and a re-encoded survivor keeps the transactional bit.
Control batches (the markers) are always kept.

Cost: the pass holds the log's lock while it rewrites, so appends to that partition wait;
keep compacted topics' segments modest (``segment.bytes``).  :class:`LogCleaner` runs the
pass over a :class:`~headwater.storage.manager.LogManager`'s compacted logs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from headwater.records import (
    Record,
    TimestampType,
    build_batch,
    read_batches,
    set_log_append_time,
    set_partition_leader_epoch,
)
from headwater.records.control import ControlRecordType, read_marker, set_batch_flags
from headwater.storage.log import Log
from headwater.storage.segment import LogSegment, segment_file_name

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".log.cleaned"
"""Rewritten segments are written as ``<base>.log.cleaned``; a crash leaves them behind,
and opening the log deletes them (any unknown suffix is removed)."""


class CleanerStats(NamedTuple):
    segments_rewritten: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0

    def __add__(self, other: object) -> CleanerStats:
        assert isinstance(other, CleanerStats)
        return CleanerStats(*(a + b for a, b in zip(self, other, strict=True)))


def _batches(segment: LogSegment) -> Iterable[bytes]:
    for position, header in segment.iter_headers():
        yield segment.read_batch(position, header)


class _Transactions(NamedTuple):
    aborted: frozenset[int]
    """Base offsets of the transactional batches whose transaction was aborted."""
    undecided: frozenset[int]
    """Base offsets of the transactional batches with no marker in the segments."""


def _transactions(segments: Sequence[LogSegment]) -> _Transactions:
    open_: dict[int, list[int]] = {}
    aborted: set[int] = set()
    for segment in segments:
        for raw in _batches(segment):
            for batch in read_batches(raw):
                if not batch.is_transactional:
                    continue
                if not batch.is_control:
                    open_.setdefault(batch.producer_id, []).append(batch.base_offset)
                    continue
                marker = read_marker(batch)
                if marker is None:
                    continue  # an unknown control type ends nothing (Kafka ignores it)
                ended = open_.pop(batch.producer_id, [])
                if marker.type is ControlRecordType.ABORT:
                    aborted.update(ended)
    undecided = frozenset(b for bases in open_.values() for b in bases)
    return _Transactions(frozenset(aborted), undecided)


def _latest_offsets(segments: Sequence[LogSegment], skip: frozenset[int]) -> dict[bytes, int]:
    latest: dict[bytes, int] = {}
    for segment in segments:
        for raw in _batches(segment):
            for batch in read_batches(raw):
                if batch.is_control or batch.base_offset in skip:
                    continue
                for rec in batch.record_list():
                    if rec.key is not None:
                        latest[rec.key] = rec.offset
    return latest


def clean_log(log_: Log, *, now_ms: int) -> CleanerStats:
    """Compact ``log_`` once (see the module docstring); a no-op unless it compacts."""
    if not log_.config.compacts:
        return CleanerStats()
    horizon = now_ms - log_.config.delete_retention_ms
    totals = [CleanerStats()]

    def rewrite(segments: Sequence[LogSegment]) -> Mapping[int, Path]:
        txns = _transactions(segments)
        latest = _latest_offsets(segments, txns.aborted | txns.undecided)
        out: dict[int, Path] = {}
        read = removed = tombstones = before = after = 0
        for segment in segments:
            pieces: list[bytes] = []
            changed = False
            for raw in _batches(segment):
                for batch in read_batches(raw):
                    if batch.is_control or batch.base_offset in txns.undecided:
                        pieces.append(batch.raw())
                        continue
                    recs = batch.record_list()
                    read += len(recs)
                    if batch.base_offset in txns.aborted:
                        removed += len(recs)
                        changed = True
                        continue
                    keep = []
                    for r in recs:
                        if r.key is None:
                            keep.append(r)
                        elif latest.get(r.key) != r.offset:
                            removed += 1
                        elif r.value is None and r.timestamp_ms <= horizon:
                            removed += 1
                            tombstones += 1
                        else:
                            keep.append(r)
                    if len(keep) == len(recs):
                        pieces.append(batch.raw())
                        continue
                    changed = True
                    for r in keep:
                        buf = bytearray(
                            build_batch(
                                [Record(r.key, r.value, r.headers, r.timestamp_ms)],
                                base_offset=r.offset,
                                compression=batch.compression,
                                timestamp_ms=r.timestamp_ms,
                                producer_id=batch.producer_id,
                                producer_epoch=batch.producer_epoch,
                            )
                        )
                        if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
                            set_log_append_time(buf, 0, r.timestamp_ms)
                        set_partition_leader_epoch(buf, 0, batch.partition_leader_epoch)
                        if batch.is_transactional:
                            buf = bytearray(set_batch_flags(bytes(buf), transactional=True))
                        pieces.append(bytes(buf))
            if not changed:
                continue
            base = segment.base_offset
            path = log_.dir / (segment_file_name(base, "") + CLEANED_SUFFIX)
            data = b"".join(pieces)
            path.write_bytes(data)
            before += segment.size
            after += len(data)
            out[base] = path
        totals[0] = CleanerStats(len(out), read, removed, tombstones, before, after)
        return out

    log_.compact_with(rewrite, now_ms=now_ms)
    return totals[0]


class LogCleaner:
    """Runs :func:`clean_log` over every compacted log it is given, now and then.

    Kafka's ``log.cleaner.min.cleanable.ratio`` is approximated by a byte threshold:
    a log is cleaned when it has grown by ``min_dirty_bytes`` since its last pass.
    """

    def __init__(self, *, min_dirty_bytes: int = 1 << 20) -> None:
        self.min_dirty_bytes = min_dirty_bytes
        self._size_after_last: dict[Path, int] = {}

    def maybe_clean(self, logs: Iterable[Log], *, now_ms: int) -> CleanerStats:
        total = CleanerStats()
        for lg in logs:
            if not lg.config.compacts:
                continue
            size = lg.size_in_bytes
            if size - self._size_after_last.get(lg.dir, 0) < self.min_dirty_bytes:
                continue
            try:
                total = total + clean_log(lg, now_ms=now_ms)
            except Exception:  # a cleaning failure must not take the broker down
                log.exception("compaction of %s failed; will retry", lg.dir.name)
                continue
            self._size_after_last[lg.dir] = lg.size_in_bytes
        return total
