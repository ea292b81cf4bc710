"""Which segments a retention pass deletes: predicates over a log's oldest segments.

:meth:`~headwater.storage.log.Log.delete_retention_segments` and
:meth:`~headwater.storage.log.Log.delete_records_before` delete a *prefix* of the
segments, oldest first and never the active one, while a predicate holds for the
oldest remaining segment.  The predicates are built here, without I/O:

- :func:`below_log_start`: wholly below the log start offset (after DeleteRecords,
  or a log start moved by a follower), whatever the cleanup policy;
- :func:`older_than`: ``retention.ms``, by the segment's largest timestamp;
- :func:`beyond_size`: ``retention.bytes``, while the log is still too large
  without the segment.
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.storage.segment import LogSegment

__all__ = ["SegmentPredicate", "below_log_start", "beyond_size", "older_than"]

SegmentPredicate = Callable[[LogSegment, int], bool]
"""A retention test: ``(segment, base offset of the segment after it) -> delete?``."""


def below_log_start(log_start_offset: int) -> SegmentPredicate:
    """Every offset of the segment lies below ``log_start_offset``."""
    return lambda _segment, next_base: next_base <= log_start_offset


def older_than(retention_ms: int, *, now_ms: int) -> SegmentPredicate:
    """The segment's newest record is more than ``retention_ms`` old."""
    return lambda segment, _next_base: now_ms - segment.largest_timestamp > retention_ms


def beyond_size(excess_bytes: int) -> SegmentPredicate:
    """Deleting the segment still leaves the log at or above its size limit.

    ``excess_bytes`` is the log's size minus ``retention.bytes``; the predicate
    counts down as segments go, so it must be used for one pass only.
    """
    excess = excess_bytes

    def over(segment: LogSegment, _next_base: int) -> bool:
        nonlocal excess
        if excess - segment.size < 0:
            return False
        excess -= segment.size
        return True

    return over
