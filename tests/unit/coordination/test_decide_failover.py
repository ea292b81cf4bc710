"""The failover decision: a new controller term opens a sender per live broker, creates
missing partition states, elects leaders where the leader may not lead, and sends every
partition's state to every broker (UpdateMetadata, then LeaderAndIsr)."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.brokers import on_failover
from headwater.coordination.model import NO_LEADER

from .helpers import EPOCH, ORDERS, lai, reg, view

ALL = (("orders", 0), ("orders", 1), ("orders", 2))


def test_a_healthy_cluster_is_only_told_its_state() -> None:
    result = on_failover(view(topics=ORDERS), unclean=False)
    assert result.effects == (
        r.AddBroker(reg(1)),
        r.AddBroker(reg(2)),
        r.AddBroker(reg(3)),
        r.SendUpdateMetadata(ALL),
        r.SendLeaderAndIsr(ALL),
    )


def test_an_empty_cluster_still_opens_senders_and_sends_empty_metadata() -> None:
    result = on_failover(view(brokers=(1,)), unclean=False)
    assert result.effects == (r.AddBroker(reg(1)), r.SendUpdateMetadata(()), r.SendLeaderAndIsr(()))


def test_partitions_without_state_are_created() -> None:
    states = {("orders", 0): lai(1, (1, 2, 3))}
    result = on_failover(view(topics=ORDERS, states=states), unclean=False)
    creates = result.of(r.CreatePartitionState)
    assert [c.topic_partition for c in creates] == [("orders", 1), ("orders", 2)]
    assert creates[0].state.leader == 2 and creates[0].state.isr == (2, 3, 1)
    assert all(c.state.controller_epoch == EPOCH.epoch for c in creates)
    # The creations are sent with every other state, not announced separately.
    assert result.of(r.Announce) == []


def test_partitions_led_by_a_dead_broker_get_a_new_leader_before_the_state_is_sent() -> None:
    result = on_failover(view(brokers=(2, 3), topics=ORDERS), unclean=False)
    (update,) = result.of(r.UpdatePartitionState)
    assert update.topic_partition == ("orders", 0)
    assert (update.state.leader, update.state.isr) == (2, (2, 3))
    kinds = [type(e) for e in result.effects]
    assert kinds.index(r.UpdatePartitionState) < kinds.index(r.SendUpdateMetadata)


def test_partition_with_no_live_replica_is_marked_leaderless() -> None:
    topics = {"t": {0: (4,)}}
    result = on_failover(
        view(brokers=(1,), topics=topics, states={("t", 0): lai(4, (4,))}), unclean=False
    )
    (update,) = result.of(r.UpdatePartitionState)
    assert update.state.leader == NO_LEADER and update.state.isr == (4,)


def test_unclean_failover_elects_an_out_of_sync_replica() -> None:
    topics = {"t": {0: (4, 1)}}
    ctx = view(brokers=(1,), topics=topics, states={("t", 0): lai(4, (4,))})
    (update,) = on_failover(ctx, unclean=True).of(r.UpdatePartitionState)
    assert (update.state.leader, update.state.isr) == (1, (1,))


def test_topics_being_deleted_are_not_elected() -> None:
    ctx = view(brokers=(2, 3), topics=ORDERS, deleting=("orders",))
    assert on_failover(ctx, unclean=False).of(r.UpdatePartitionState) == []
