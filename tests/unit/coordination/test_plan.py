"""Plan: the predicted view a decision builds on (view updates applied, created states at
version 0, updated states at base version + 1), writes chained on one partition, partitions
without state or without eligible replicas, and the offline-election filter."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.model import NO_LEADER
from headwater.coordination.partitions import OfflineElection, Plan, RemoveFromIsr

from .helpers import EPOCH, ORDERS, lai, reg, view


def test_a_new_plan_has_an_empty_result_and_leaves_the_context_alone() -> None:
    ctx = view(topics=ORDERS)
    plan = Plan(ctx)
    plan.add(r.ForgetTopic("orders"))
    assert plan.view.assignments == {}
    assert "orders" in ctx.assignments
    assert plan.result().effects == (r.ForgetTopic("orders"),)
    assert not Plan(ctx).result()


def test_add_applies_view_updates_only() -> None:
    plan = Plan(view(brokers=(1,)))
    plan.add(r.SetLiveBrokers((reg(2),)), r.AddBroker(reg(2)), r.SendUpdateMetadata(()))
    assert set(plan.view.live_brokers) == {2}
    assert len(plan.result().effects) == 3


def test_initialize_creates_first_eligible_leader_with_eligible_isr() -> None:
    ctx = view(brokers=(2, 3), topics={"t": {0: (1, 2, 3)}}, states={})
    plan = Plan(ctx)
    assert plan.initialize([("t", 0)]) == [("t", 0)]
    created = lai(2, (2, 3), controller_epoch=EPOCH.epoch, zk_version=-1)
    assert plan.result().effects == (r.CreatePartitionState(("t", 0), created),)
    assert plan.view.states[("t", 0)].zk_version == 0  # what a new znode has


def test_initialize_skips_partitions_without_eligible_replicas() -> None:
    ctx = view(brokers=(1, 2), topics={"t": {0: (3,), 1: (1, 3)}}, states={}, shutting_down=(1,))
    plan = Plan(ctx)
    assert plan.initialize([("t", 0), ("t", 1)]) == []
    assert not plan.result()


def test_elect_predicts_the_version_after_the_write() -> None:
    ctx = view(
        brokers=(1, 2),
        topics={"t": {0: (1, 2, 3)}},
        states={("t", 0): lai(1, (1, 2, 3), zk_version=4)},
    )
    plan = Plan(ctx)
    how = RemoveFromIsr(3, EPOCH.epoch)
    assert plan.elect([("t", 0)], how) == [("t", 0)]
    (write,) = plan.result().effects
    assert isinstance(write, r.UpdatePartitionState)
    assert write.base == lai(1, (1, 2, 3), zk_version=4)
    assert write.state.zk_version == 4  # the condition
    assert (write.state.isr, write.state.leader_epoch) == ((1, 2), 1)
    assert write.election is how
    assert plan.view.states[("t", 0)].zk_version == 5


def test_two_writes_to_one_partition_chain_on_the_predicted_state() -> None:
    ctx = view(brokers=(1,), topics={"t": {0: (1, 2, 3)}})
    plan = Plan(ctx)
    plan.elect([("t", 0)], RemoveFromIsr(2, 3))
    plan.elect([("t", 0)], RemoveFromIsr(3, 3))
    first, second = plan.result().of(r.UpdatePartitionState)
    assert second.base.zk_version == first.state.zk_version + 1
    assert second.base.isr == first.state.isr == (1, 3)
    assert second.state.isr == (1,)
    assert plan.view.states[("t", 0)].leader_epoch == 2


def test_elect_skips_partitions_without_state_or_change() -> None:
    ctx = view(topics={"t": {0: (1, 2), 1: (1, 2)}}, states={("t", 0): lai(1, (1,))})
    plan = Plan(ctx)
    assert plan.elect([("t", 0), ("t", 1)], RemoveFromIsr(2, 3)) == []
    assert not plan.result()


def test_offline_election_captures_the_brokers_of_the_view_now() -> None:
    plan = Plan(view(brokers=(1, 2, 3), shutting_down=(3,)))
    how = plan.offline_election(unclean=True)
    assert how == OfflineElection(frozenset({1, 2}), frozenset({1, 2, 3}), EPOCH.epoch, True)
    plan.add(r.SetLiveBrokers((reg(1),)))
    assert plan.offline_election(unclean=False).live == frozenset({1})


def test_elect_offline_only_touches_partitions_whose_leader_may_not_lead() -> None:
    topics = {"t": {0: (1, 2), 1: (2, 1), 2: (3, 1)}, "gone": {0: (3, 1)}}
    ctx = view(brokers=(1, 2), topics=topics, deleting=("gone",))
    plan = Plan(ctx)
    changed = plan.elect_offline(ctx.all_partitions(), unclean=False)
    assert changed == [("t", 2)]
    assert plan.view.states[("t", 2)].leader == 1


def test_elect_offline_marks_leaderless_when_no_one_may_lead() -> None:
    ctx = view(brokers=(2,), topics={"t": {0: (1, 3)}}, states={("t", 0): lai(1, (1,))})
    plan = Plan(ctx)
    assert plan.elect_offline([("t", 0)], unclean=False) == [("t", 0)]
    assert plan.view.states[("t", 0)].leader == NO_LEADER
    # A second pass finds nothing more to write.
    assert plan.elect_offline([("t", 0)], unclean=False) == []


def test_elect_offline_ignores_partitions_without_state() -> None:
    plan = Plan(view(brokers=(2,), topics={"t": {0: (1, 2)}}, states={}))
    assert plan.elect_offline([("t", 0)], unclean=False) == []
