"""Where a group lives: its ``__consumer_offsets`` partition, and that topic's settings.

The coordinator of a group is the leader of partition
``abs(java_string_hash(group_id)) % offsets.topic.num.partitions``, exactly Kafka's
``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``: Java's
``String.hashCode`` (``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in 32-bit
two's complement) and Kafka's ``Utils.abs`` (which maps ``Integer.MIN_VALUE`` to 0).
The hash is shared with the transaction coordinator (:mod:`headwater.hashing`).
"""

from __future__ import annotations

from headwater.hashing import java_string_hash, kafka_abs

__all__ = [
    "OFFSETS_TOPIC",
    "java_string_hash",
    "kafka_abs",
    "offsets_topic_configs",
    "offsets_topic_replication_factor",
    "partition_for",
]

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_NUM_PARTITIONS = 50
DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR = 3
OFFSETS_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024
"""Kafka's ``offsets.topic.segment.bytes``: small segments so compaction keeps up."""


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    if num_partitions <= 0:
        raise ValueError(f"offsets.topic.num.partitions must be > 0, not {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions


def offsets_topic_configs(*, segment_bytes: int = OFFSETS_TOPIC_SEGMENT_BYTES) -> dict[str, str]:
    """Topic configs ``__consumer_offsets`` is created with (compacted, as in Kafka)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(segment_bytes),
    }


def offsets_topic_replication_factor(configured: int, live_brokers: int) -> int:
    """``offsets.topic.replication.factor``, or the live broker count if that is smaller."""
    return max(1, min(configured, live_brokers))
