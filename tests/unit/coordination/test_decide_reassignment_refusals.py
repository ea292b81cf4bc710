"""Reassignment requests the controller refuses with Kafka's errors, changing nothing, and
cancellation (a None target) going back to the original replicas."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.coordination import results as r
from headwater.coordination.decisions.reassignment import on_alter_reassignments
from headwater.coordination.model import ReplicaReassignment
from headwater.errors import ErrorCode
from headwater.values import TopicPartition

from .helpers import lai, view

TP = TopicPartition("orders", 0)
ONE = {"orders": {0: (1, 2, 3)}}


@pytest.mark.parametrize(
    ("tp", "target", "code"),
    [
        (TopicPartition("nope", 0), (1, 2), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicPartition("orders", 7), (1, 2), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TP, (), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TP, (1, 2, 2), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TP, (1, 2, 9), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (TP, None, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS),
    ],
)
def test_refused_with_kafkas_error_and_no_effect(
    tp: TopicPartition, target: tuple[int, ...] | None, code: ErrorCode
) -> None:
    ctx = view(topics=ONE)
    result, answers = on_alter_reassignments(ctx, {tp: target})
    error = answers[tp]
    assert isinstance(error, errors.HeadwaterError)
    assert error.code is code
    assert result == r.EMPTY


def test_partition_of_a_topic_being_deleted_is_unknown() -> None:
    ctx = view(topics=ONE, deleting=("orders",))
    result, answers = on_alter_reassignments(ctx, {TP: (2, 3)})
    assert isinstance(answers[TP], errors.UnknownTopicOrPartitionError)
    assert result == r.EMPTY


def test_one_refusal_does_not_stop_the_others() -> None:
    ctx = view(topics={"orders": {0: (1, 2, 3), 1: (2, 3, 1)}})
    tp1 = TopicPartition("orders", 1)
    result, answers = on_alter_reassignments(ctx, {TP: (1, 9), tp1: (2, 3)})
    assert isinstance(answers[TP], errors.InvalidReplicaAssignmentError)
    assert answers[tp1] is None
    assert {e.topic_partition for e in result.of(r.WriteReassignment)} == {tp1}


def test_cancel_goes_back_to_the_origin_and_deletes_the_added_replica() -> None:
    ctx = view(
        brokers=(1, 2, 3, 4),
        topics={"orders": {0: (4, 2, 3, 1)}},
        states={TP: lai(1, (1, 2, 3), zk_version=1)},
    )
    ctx.reassignments[TP] = ReplicaReassignment(adding=(4,), removing=(1,))
    result, answers = on_alter_reassignments(ctx, {TP: None})
    assert answers == {TP: None}
    # Kafka's originReplicas: RS minus the added ones, in RS order (the set is the original)
    assert result.effects[:2] == (
        r.SetReassignment(TP, (2, 3, 1), None),
        r.WriteReassignment(TP, (2, 3, 1), None),
    )
    (update,) = result.of(r.UpdatePartitionState)
    assert (update.state.leader, update.state.isr) == (1, (1, 2, 3))
    assert result.of(r.SendStopReplica) == [r.SendStopReplica(4, (TP,), delete=True)]


def test_cancel_moves_leadership_off_an_added_replica() -> None:
    ctx = view(
        brokers=(1, 2, 3, 4),
        topics={"orders": {0: (4, 2, 3, 1)}},
        states={TP: lai(4, (1, 2, 3, 4), zk_version=1)},
    )
    ctx.reassignments[TP] = ReplicaReassignment(adding=(4,), removing=(1,))
    result, _ = on_alter_reassignments(ctx, {TP: None})
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == 2  # the first origin replica in sync, in RS order
    assert update.state.isr == (1, 2, 3)
    order = [type(e) for e in result.effects]
    assert order.index(r.UpdatePartitionState) < order.index(r.SendStopReplica)
