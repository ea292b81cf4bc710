"""ListOffsets by timestamp over a log's segments (Kafka's ``fetchOffsetByTimestamp``).

The time index and batch headers narrow the search to one batch: the first
whose max timestamp reaches the target.  Kafka answers at batch granularity
for the max timestamp but returns the exact first record offset with a
timestamp >= target, which needs that one batch decoded: the only place in
storage where records are decoded, and only for this request.
"""

from __future__ import annotations

from collections.abc import Sequence

from headwater.records import BatchHeader, read_batches
from headwater.storage.segment import LogSegment
from headwater.storage.values import TimestampAndOffset

__all__ = ["find_offset_by_timestamp", "max_timestamp_offset"]


def find_offset_by_timestamp(
    segments: Sequence[LogSegment], timestamp: int, log_start_offset: int
) -> TimestampAndOffset | None:
    """The first record at or after ``log_start_offset`` with timestamp >= ``timestamp``."""
    for segment in segments:
        found = segment.find_batch_by_timestamp(timestamp, log_start_offset)
        if found is not None:
            return _first_record_at_or_after(segment, *found, timestamp, log_start_offset)
    return None


def max_timestamp_offset(
    segments: Sequence[LogSegment], log_start_offset: int
) -> TimestampAndOffset | None:
    """The first record carrying the log's largest timestamp (KIP-734), None if no batch."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.max_timestamp >= 0 and (
            best is None or segment.max_timestamp > best.max_timestamp
        ):
            best = segment
    if best is None:
        return None
    found = best.translate_offset(best.offset_of_max_timestamp)
    if found is None:
        return None
    return _first_record_at_or_after(best, *found, best.max_timestamp, log_start_offset)


def _first_record_at_or_after(
    segment: LogSegment,
    position: int,
    header: BatchHeader,
    timestamp: int,
    log_start_offset: int,
) -> TimestampAndOffset:
    batch = next(read_batches(segment.read_batch(position, header)))
    for record in batch.records():
        if record.timestamp_ms >= timestamp and record.offset >= log_start_offset:
            return TimestampAndOffset(
                record.timestamp_ms, record.offset, header.partition_leader_epoch
            )
    return TimestampAndOffset(
        header.max_timestamp, header.base_offset, header.partition_leader_epoch
    )
