"""The partition-modification decision (CreatePartitions): added partitions are assigned,
created and announced; a vanished, unknown or deleting topic, or no addition, does nothing;
changes to existing partitions are ignored."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.topics import on_partition_modifications

from .helpers import ORDERS, view

NOW = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}


def test_added_partitions_are_started() -> None:
    result = on_partition_modifications(
        view(topics=ORDERS), "orders", {**NOW, 4: (2, 1), 3: (1, 2)}
    )
    assert result.effects[0] == r.AddPartitions("orders", {4: (2, 1), 3: (1, 2)})
    creates = result.of(r.CreatePartitionState)
    assert [c.topic_partition for c in creates] == [("orders", 3), ("orders", 4)]
    assert [c.state.leader for c in creates] == [1, 2]
    assert result.effects[-1] == r.Announce((("orders", 3), ("orders", 4)))


def test_nothing_added() -> None:
    assert on_partition_modifications(view(topics=ORDERS), "orders", NOW) == r.EMPTY


def test_reassignment_of_existing_partitions_is_ignored() -> None:
    moved = {**NOW, 0: (3, 2, 1)}
    assert on_partition_modifications(view(topics=ORDERS), "orders", moved) == r.EMPTY


def test_vanished_topic() -> None:
    assert on_partition_modifications(view(topics=ORDERS), "orders", None) == r.EMPTY


def test_unknown_topic() -> None:
    assert on_partition_modifications(view(topics=ORDERS), "other", {0: (1,)}) == r.EMPTY


def test_topic_being_deleted() -> None:
    ctx = view(topics=ORDERS, deleting=("orders",))
    assert on_partition_modifications(ctx, "orders", {**NOW, 3: (1,)}) == r.EMPTY


def test_added_partition_without_live_replica_is_assigned_but_not_announced() -> None:
    result = on_partition_modifications(view(topics=ORDERS), "orders", {**NOW, 3: (7,)})
    assert result.effects == (r.AddPartitions("orders", {3: (7,)}),)
