"""Preferred leader elections while partitions are being reassigned, as Kafka's ZooKeeper-mode
controller does them: the automatic election (auto.leader.rebalance.enable) does nothing while
any move is in progress; an ElectLeaders request still elects the first replica of a moving
partition's full replica set (the target's preferred leader) where it can lead, and answers
PREFERRED_LEADER_NOT_AVAILABLE where it cannot."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.decisions.leaders import (
    imbalanced_partitions,
    on_auto_rebalance,
    on_preferred_election,
    preferred_election_errors,
)
from headwater.coordination.decisions.reassignment import reassign_to
from headwater.coordination.model import ReplicaReassignment
from headwater.errors import ErrorCode
from headwater.values import TopicPartition

from .helpers import lai, view

# t-0 is led by its non-preferred replica 2 (imbalanced); t-1 moves from (1, 2) to (3, 2).
TOPICS = {"t": {0: (1, 2), 1: (3, 2, 1)}}
MOVE = ReplicaReassignment(adding=(3,), removing=(1,))
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
STATES = {T0: lai(2, (1, 2)), T1: lai(1, (1, 2))}


def moving() -> ControllerContext:
    ctx = view(topics=TOPICS, states=STATES)
    ctx.reassignments[T1] = MOVE
    return ctx


def test_the_fixture_is_kafkas_full_replica_set() -> None:
    full, move = reassign_to((1, 2), None, (3, 2))
    assert full == TOPICS["t"][1] and move == MOVE


def test_without_a_move_the_imbalanced_partition_is_moved_back() -> None:
    ctx = view(topics={"t": {0: (1, 2)}}, states={T0: lai(2, (1, 2))})
    assert imbalanced_partitions(ctx) == [T0]
    assert on_auto_rebalance(ctx).of(r.UpdatePartitionState)


def test_auto_rebalance_does_nothing_while_any_partition_is_moving() -> None:
    ctx = moving()
    assert imbalanced_partitions(ctx) == []  # t-0 is imbalanced, but t-1 is moving
    assert on_auto_rebalance(ctx) == r.EMPTY


def test_auto_rebalance_resumes_once_the_move_is_done() -> None:
    ctx = moving()
    ctx.reassignments.clear()
    assert imbalanced_partitions(ctx) == [T0]


def test_elect_leaders_is_not_held_back_by_a_move() -> None:
    ctx = moving()
    result = on_preferred_election(ctx, [T0], fresh={}, from_zk=False)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.topic_partition == T0 and update.state.leader == 1


def test_elect_leaders_on_a_moving_partition_whose_new_replica_is_not_in_sync() -> None:
    ctx = moving()
    result = on_preferred_election(ctx, [T1], fresh={}, from_zk=False)
    assert result.of(r.UpdatePartitionState) == []
    errors = preferred_election_errors(ctx, [T1], [], written=set())
    assert errors == {T1: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}


def test_elect_leaders_on_a_moving_partition_whose_new_replica_caught_up() -> None:
    ctx = moving()
    fresh = {T1: lai(1, (1, 2, 3), zk_version=1)}
    result = on_preferred_election(ctx, [T1], fresh=fresh, from_zk=False)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 3  # the target's preferred leader, first of the full set
    assert ctx.reassignments  # the election does not touch the move itself
