from __future__ import annotations

import pytest
from headwater.groups import placement as group_placement
from headwater.hashing import coordinator_partition, java_string_hash
from headwater.transactions import placement


def test_transactional_id_placed_like_kafka() -> None:
    # Kafka: Utils.abs("my-txn".hashCode) % 50; hashCode computed by Java's rule.
    h = java_string_hash("my-txn")
    assert placement.partition_for("my-txn", 50) == abs(h) % 50
    assert placement.partition_for("polygenelubricants", 7) == 0  # Integer.MIN_VALUE -> 0


def test_groups_and_transactions_share_the_placement() -> None:
    for key in ("a", "group-1", "txn-ü", ""):
        assert placement.partition_for(key, 13) == group_placement.partition_for(key, 13)
        assert coordinator_partition(key, 13) == placement.partition_for(key, 13)


def test_zero_partitions_is_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        placement.partition_for("t", 0)


def test_topic_configs_cap_min_isr_at_the_replication_factor() -> None:
    assert placement.topic_configs(min_isr=2, replication_factor=1)["min.insync.replicas"] == "1"
    configs = placement.topic_configs(min_isr=2, replication_factor=3)
    assert configs["min.insync.replicas"] == "2"
    assert configs["cleanup.policy"] == "compact"
    assert placement.replication_factor(3, 1) == 1
    assert placement.replication_factor(3, 5) == 3
