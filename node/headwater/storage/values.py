"""The values a :class:`~headwater.storage.log.Log` returns (Kafka's names).

Kept apart from ``log.py`` so that callers (replication, the fetch and
ListOffsets handlers) can import the small typed results without the engine.
"""

from __future__ import annotations

from typing import NamedTuple

from headwater.values import TopicPartition

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "FetchDataInfo",
    "LogAppendInfo",
    "TimestampAndOffset",
    "parse_topic_partition",
]

LATEST_TIMESTAMP = -1
"""ListOffsets target for the log end offset."""
EARLIEST_TIMESTAMP = -2
"""ListOffsets target for the log start offset."""
MAX_TIMESTAMP = -3
"""ListOffsets target for the record with the largest timestamp (KIP-734)."""


class LogAppendInfo(NamedTuple):
    """The outcome of an append (Kafka's ``LogAppendInfo``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time_ms: int
    """The broker's timestamp for LogAppendTime topics, else -1."""
    log_start_offset: int
    num_batches: int
    num_records: int
    valid_bytes: int


class FetchDataInfo(NamedTuple):
    """The result of :meth:`Log.read`: stored batch bytes plus the log's bounds."""

    fetch_offset: int
    records: bytes
    """Whole batches as stored; the first holds ``fetch_offset`` (may start before it)."""
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: the record's timestamp (-1 for earliest/latest), offset, epoch."""

    timestamp: int
    offset: int
    leader_epoch: int


def parse_topic_partition(name: str) -> TopicPartition:
    """``("orders", 3)`` for the directory name ``orders-3``; ValueError if it is not one."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return TopicPartition(topic, int(part))
