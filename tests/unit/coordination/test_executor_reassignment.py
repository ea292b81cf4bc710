"""The executor carrying out reassignments over in-memory ZooKeeper: the assignment znode
holds adding/removing while a move runs, a new controller resumes a move it finds there,
and a topic marked for deletion waits until its move is over (as in Kafka)."""

from __future__ import annotations

from headwater.coordination import model
from headwater.coordination.model import LeaderAndIsr, ReplicaReassignment
from headwater.coordination.requests import LeaderAndIsrRequest, StopReplicaRequest
from headwater.values import TopicPartition

from .executor_harness import harness

TP = TopicPartition("orders", 0)


def test_alter_writes_adding_and_removing_to_zookeeper() -> None:
    h = harness(brokers=(1, 2, 3, 4), topics={"orders": {0: (1, 2, 3)}})
    h.executor.on_failover()
    answers = h.executor.alter_reassignments({TP: (4, 2, 3)})
    assert answers == {TP: None}
    assert h.zk.topics["orders"][0] == (4, 2, 3, 1)
    assert h.zk.reassignments[TP] == ReplicaReassignment((4,), (1,))
    assert h.zk.states[TP].leader_epoch == 1


def test_a_new_controller_resumes_and_completes_a_move_found_in_zookeeper() -> None:
    h = harness(
        brokers=(1, 2, 3, 4),
        topics={"orders": {0: (4, 2, 3, 1)}},
        states={TP: LeaderAndIsr(1, 3, (1, 2, 3, 4), 0)},
    )
    h.zk.reassignments[TP] = ReplicaReassignment((4,), (1,))
    h.executor.on_failover()
    assert h.zk.topics["orders"][0] == (4, 2, 3)
    assert TP not in h.zk.reassignments
    assert h.zk.states[TP].leader == 4
    assert h.zk.states[TP].isr == (2, 3, 4)
    stops = h.sender.sent(StopReplicaRequest)
    assert [(b, req.partitions, req.delete) for b, req in stops] == [(1, (TP,), True)]
    assert not h.ctx.reassignments


def test_deletion_waits_for_the_move_then_runs() -> None:
    h = harness(brokers=(1, 2, 3, 4), topics={"orders": {0: (1, 2, 3)}})
    h.executor.on_failover()
    h.executor.alter_reassignments({TP: (4, 2, 3)})
    h.zk.deletions.append("orders")
    h.executor.on_topic_deletion()
    assert "orders" in h.zk.topics  # waiting for the move
    state = h.zk.states[TP]
    h.zk.put_state(TP, state.with_isr((1, 2, 3, 4)))
    h.zk.isr_notes["isr_change_0000000001"] = [TP]
    h.executor.on_isr_change()
    assert "orders" not in h.zk.topics


def test_assignment_codec_keeps_adding_and_removing_per_partition() -> None:
    data = model.encode_assignment(
        {0: (4, 2, 3, 1), 1: (2, 3)}, {0: ReplicaReassignment((4,), (1,))}
    )
    decoded = model.decode_assignment("orders", data)
    assert decoded.partitions == {0: (4, 2, 3, 1), 1: (2, 3)}
    assert decoded.reassignments == {0: ReplicaReassignment((4,), (1,))}
    assert b'"adding_replicas":{"0":[4]}' in data
    assert b'"removing_replicas":{"0":[1]}' in data


def test_start_sends_leader_and_isr_to_the_arriving_replica() -> None:
    h = harness(brokers=(1, 2, 3, 4), topics={"orders": {0: (1, 2, 3)}})
    h.executor.on_failover()
    before = len(h.sender.sent(LeaderAndIsrRequest))
    h.executor.alter_reassignments({TP: (4, 2, 3)})
    sent = h.sender.sent(LeaderAndIsrRequest)[before:]
    assert {b for b, _ in sent} == {1, 2, 3, 4}
    for _, request in sent:
        (state,) = request.states
        assert state.replicas == (4, 2, 3, 1)
        assert state.leader_and_isr.leader_epoch == 1
