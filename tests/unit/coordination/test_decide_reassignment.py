"""The reassignment decisions (KIP-455): starting a move, completing it once the target
replicas are in sync (leader moved off a leaving broker, ISR shrunk, removed replicas
stopped and deleted), replacing a target mid-move, and the replica-set arithmetic."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.reassignment import (
    ReassignmentElection,
    is_complete,
    on_alter_reassignments,
    on_failover_resume,
    on_reassignment_progress,
    reassign_to,
)
from headwater.coordination.model import NO_LEADER, ReplicaReassignment
from headwater.values import TopicPartition

from .helpers import lai, view

TP = TopicPartition("orders", 0)
ONE = {"orders": {0: (1, 2, 3)}}


def moving_view(isr: tuple[int, ...], *, leader: int = 1) -> object:
    """orders-0 moving from (1, 2, 3) to (4, 2, 3): RS (4, 2, 3, 1), adding 4, removing 1."""
    ctx = view(
        brokers=(1, 2, 3, 4),
        topics={"orders": {0: (4, 2, 3, 1)}},
        states={TP: lai(leader, isr, leader_epoch=1, zk_version=1)},
    )
    ctx.reassignments[TP] = ReplicaReassignment(adding=(4,), removing=(1,))
    return ctx


def test_reassign_to_puts_target_first_and_records_adding_and_removing() -> None:
    full, move = reassign_to((1, 2, 3), None, (4, 2, 3))
    assert full == (4, 2, 3, 1)
    assert move == ReplicaReassignment(adding=(4,), removing=(1,))


def test_reassign_to_a_new_target_mid_move_starts_from_the_origin() -> None:
    full, move = reassign_to((4, 2, 3, 1), ReplicaReassignment((4,), (1,)), (5, 2, 3))
    assert full == (5, 2, 3, 1)
    assert move == ReplicaReassignment(adding=(5,), removing=(1,))


def test_reassign_to_the_origin_is_no_move() -> None:
    full, move = reassign_to((4, 2, 3, 1), ReplicaReassignment((4,), (1,)), (1, 2, 3))
    assert full == (1, 2, 3)
    assert move == ReplicaReassignment()


def test_start_writes_union_bumps_epoch_and_tells_every_replica() -> None:
    ctx = view(brokers=(1, 2, 3, 4), topics=ONE)
    result, answers = on_alter_reassignments(ctx, {TP: (4, 2, 3)})
    assert answers == {TP: None}
    move = ReplicaReassignment(adding=(4,), removing=(1,))
    assert result.effects[:2] == (
        r.SetReassignment(TP, (4, 2, 3, 1), move),
        r.WriteReassignment(TP, (4, 2, 3, 1), move),
    )
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 1
    assert update.state.leader_epoch == update.base.leader_epoch + 1
    assert update.state.isr == (1, 2, 3)
    assert result.of(r.Announce) == [r.Announce((TP,))]
    assert not result.of(r.SendStopReplica)


def test_move_completes_at_once_when_the_target_is_already_in_sync() -> None:
    ctx = view(topics=ONE)
    result, answers = on_alter_reassignments(ctx, {TP: (2, 3)})
    assert answers == {TP: None}
    assert r.SetReassignment(TP, (2, 3), None) in result.effects
    assert result.effects[-1] == r.WriteReassignment(TP, (2, 3), None)
    assert result.of(r.SendStopReplica) == [r.SendStopReplica(1, (TP,), delete=True)]
    last = result.of(r.UpdatePartitionState)[-1]
    assert last.state.leader == 2  # the leader was leaving
    assert last.state.isr == (2, 3)


def test_progress_waits_while_a_target_replica_is_out_of_sync() -> None:
    ctx = moving_view((1, 2, 3))
    assert not is_complete(ctx, TP)  # type: ignore[arg-type]
    assert on_reassignment_progress(ctx, [TP]) == r.EMPTY  # type: ignore[arg-type]


def test_progress_completes_once_the_new_replica_joins_the_isr() -> None:
    ctx = moving_view((1, 2, 3, 4))
    result = on_reassignment_progress(ctx, None)  # type: ignore[arg-type]
    assert result.effects[0] == r.SetReassignment(TP, (4, 2, 3), None)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 4  # the first target replica in sync
    assert update.state.isr == (2, 3, 4)
    assert update.state.leader_epoch == 2
    assert result.of(r.SendStopReplica) == [r.SendStopReplica(1, (TP,), delete=True)]
    assert result.effects[-1] == r.WriteReassignment(TP, (4, 2, 3), None)
    order = [type(e) for e in result.effects]
    assert order.index(r.UpdatePartitionState) < order.index(r.SendStopReplica)
    assert order.index(r.SendStopReplica) < order.index(r.WriteReassignment)


def test_completion_keeps_a_leader_that_stays() -> None:
    ctx = moving_view((1, 2, 3, 4), leader=2)
    result = on_reassignment_progress(ctx, [TP])  # type: ignore[arg-type]
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 2


def test_completion_does_not_stop_a_dead_removed_replica() -> None:
    ctx = moving_view((2, 3, 4), leader=2)
    del ctx.live_brokers[1]  # type: ignore[attr-defined]
    result = on_reassignment_progress(ctx, [TP])  # type: ignore[arg-type]
    assert result.of(r.SendStopReplica) == []
    assert result.effects[-1] == r.WriteReassignment(TP, (4, 2, 3), None)


def test_progress_ignores_partitions_not_moving() -> None:
    ctx = view(topics=ONE)
    assert on_reassignment_progress(ctx, [TP]) == r.EMPTY


def test_a_new_target_mid_move_stops_the_replica_no_longer_wanted() -> None:
    ctx = view(
        brokers=(1, 2, 3, 4, 5),
        topics={"orders": {0: (4, 2, 3, 1)}},
        states={TP: lai(1, (1, 2, 3), zk_version=1)},
    )
    ctx.reassignments[TP] = ReplicaReassignment(adding=(4,), removing=(1,))
    result, answers = on_alter_reassignments(ctx, {TP: (5, 2, 3)})
    assert answers == {TP: None}
    move = ReplicaReassignment(adding=(5,), removing=(1,))
    assert result.effects[0] == r.SetReassignment(TP, (5, 2, 3, 1), move)
    assert result.of(r.SendStopReplica) == [r.SendStopReplica(4, (TP,), delete=True)]


def test_election_moves_leadership_to_first_live_in_sync_target() -> None:
    how = ReassignmentElection((4, 2), frozenset({2, 4}), controller_epoch=3)
    new = how.decide((4, 2, 1), lai(1, (1, 2, 4), leader_epoch=5))
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (4, (2, 4), 6, 3)


def test_election_skips_a_dead_target_replica() -> None:
    how = ReassignmentElection((4, 2), frozenset({2}), controller_epoch=3)
    new = how.decide((4, 2, 1), lai(1, (1, 2, 4)))
    assert new.leader == 2


def test_election_with_nobody_to_lead_leaves_the_partition_leaderless() -> None:
    how = ReassignmentElection((4,), frozenset({1, 2}), controller_epoch=3)
    new = how.decide((4, 1), lai(1, (1, 2)))
    assert new.leader == NO_LEADER
    assert new.isr == (1, 2)  # none of the ISR kept: the old one stays known


def test_moving_to_the_current_replicas_is_no_move_and_stops_nobody() -> None:
    ctx = view(topics=ONE)
    result, answers = on_alter_reassignments(ctx, {TP: (1, 2, 3)})
    assert answers == {TP: None}
    assert result.effects[:2] == (
        r.SetReassignment(TP, (1, 2, 3), None),
        r.WriteReassignment(TP, (1, 2, 3), None),
    )
    assert not result.of(r.SendStopReplica)


def test_reordering_moves_no_data_and_keeps_the_leader() -> None:
    ctx = view(topics=ONE)
    result, _ = on_alter_reassignments(ctx, {TP: (2, 1, 3)})
    assert result.effects[0] == r.SetReassignment(TP, (2, 1, 3), None)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 1  # a preferred election moves it later, as in Kafka


def test_failover_restarts_a_move_not_in_sync_with_a_new_epoch() -> None:
    ctx = moving_view((1, 2, 3))
    result = on_failover_resume(ctx)  # type: ignore[arg-type]
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 1
    assert update.state.isr == (1, 2, 3)
    assert update.state.leader_epoch == 2
    assert result.of(r.Announce) == [r.Announce((TP,))]
    assert not result.of(r.WriteReassignment)


def test_failover_completes_a_move_in_sync() -> None:
    ctx = moving_view((1, 2, 3, 4))
    result = on_failover_resume(ctx)  # type: ignore[arg-type]
    assert result.effects[-1] == r.WriteReassignment(TP, (4, 2, 3), None)
    assert len(result.of(r.UpdatePartitionState)) == 1
