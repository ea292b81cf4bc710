"""Where a transactional id lives: its ``__transaction_state`` partition, and that topic's settings.

The coordinator of a transactional id is the leader of partition
``abs(java_string_hash(transactional_id)) % transaction.state.log.num.partitions``,
Kafka's placement (:mod:`headwater.hashing`, shared with the group coordinator).  The
topic is created on the first FindCoordinator for a transaction, compacted, with
``min.insync.replicas`` = ``transaction.state.log.min.isr`` capped at its replication
factor, so a coordinator's state changes are acknowledged by that many replicas.
"""

from __future__ import annotations

from headwater.hashing import coordinator_partition

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_STATE_SEGMENT_BYTES = 100 * 1024 * 1024
"""Kafka's ``transaction.state.log.segment.bytes``."""


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The ``__transaction_state`` partition whose leader coordinates ``transactional_id``."""
    return coordinator_partition(transactional_id, num_partitions)


def replication_factor(configured: int, live_brokers: int) -> int:
    """``transaction.state.log.replication.factor``, or the live broker count if smaller."""
    return max(1, min(configured, live_brokers))


def topic_configs(*, min_isr: int, replication_factor: int) -> dict[str, str]:
    """Topic configs ``__transaction_state`` is created with (compacted, as in Kafka)."""
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(TRANSACTION_STATE_SEGMENT_BYTES),
        "min.insync.replicas": str(max(1, min(min_isr, replication_factor))),
        "unclean.leader.election.enable": "false",
    }
