"""The automatic preferred leader election (auto.leader.rebalance.enable): which partitions
are imbalanced, and the result that moves them back."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.leaders import imbalanced_partitions, on_auto_rebalance

from .helpers import ORDERS, lai, view


def test_a_balanced_cluster_is_left_alone() -> None:
    assert imbalanced_partitions(view(topics=ORDERS)) == []
    assert on_auto_rebalance(view(topics=ORDERS)) == r.EMPTY


def test_a_partition_led_by_a_non_preferred_replica_moves_back() -> None:
    ctx = view(
        topics=ORDERS, states={**view(topics=ORDERS).states, ("orders", 0): lai(2, (1, 2, 3))}
    )
    assert imbalanced_partitions(ctx) == [("orders", 0)]
    result = on_auto_rebalance(ctx)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 1 and update.state.leader_epoch == 1
    assert result.effects[-1] == r.Announce((("orders", 0),))


def test_preferred_replica_must_be_eligible_and_in_sync() -> None:
    base = view(topics=ORDERS).states
    out_of_sync = view(topics=ORDERS, states={**base, ("orders", 0): lai(2, (2, 3))})
    assert imbalanced_partitions(out_of_sync) == []
    dead = view(brokers=(2, 3), topics=ORDERS, states={**base, ("orders", 0): lai(2, (1, 2, 3))})
    assert imbalanced_partitions(dead) == []
    stopping = view(
        topics=ORDERS, shutting_down=(1,), states={**base, ("orders", 0): lai(2, (1, 2, 3))}
    )
    assert imbalanced_partitions(stopping) == []


def test_partitions_of_deleting_topics_or_without_state_are_skipped() -> None:
    states = {("orders", 0): lai(2, (1, 2, 3))}
    assert imbalanced_partitions(view(topics=ORDERS, states=states, deleting=("orders",))) == []
    assert imbalanced_partitions(view(topics=ORDERS, states={})) == []
