"""The broker-change decision: senders opened and closed, the shutting-down set cleaned,
leaders elected where dead brokers led, dead followers shrunk out of ISRs, bounced brokers
handled as a death then a startup, and new brokers told their state."""

from __future__ import annotations

from headwater.coordination import results as r
from headwater.coordination.decisions.brokers import on_broker_change
from headwater.coordination.model import NO_LEADER
from headwater.coordination.partitions import Plan

from .helpers import ORDERS, lai, reg, view

ALL = (("orders", 0), ("orders", 1), ("orders", 2))


def live(*ids: int, bounced: tuple[int, ...] = ()) -> dict:
    return {b: reg(b, epoch=500 + b if b in bounced else None) for b in ids}


def updates(result: r.ControllerResult) -> dict:
    return {u.topic_partition: u.state for u in result.of(r.UpdatePartitionState)}


def test_nothing_changed_nothing_decided() -> None:
    assert on_broker_change(view(topics=ORDERS), live(1, 2, 3), unclean=False) == r.EMPTY


def test_a_dead_leader_is_replaced_from_the_isr() -> None:
    result = on_broker_change(view(topics=ORDERS), live(2, 3), unclean=False)
    new = updates(result)
    assert (new[("orders", 0)].leader, new[("orders", 0)].isr) == (2, (2, 3))
    # Partitions it followed: shrunk out of the ISR, same leader.
    assert (new[("orders", 1)].leader, new[("orders", 1)].isr) == (2, (2, 3))
    assert (new[("orders", 2)].leader, new[("orders", 2)].isr) == (3, (3, 2))
    assert result.of(r.Announce) == [r.Announce((("orders", 0), ("orders", 1), ("orders", 2)))]


def test_effect_order_for_a_death() -> None:
    result = on_broker_change(view(topics=ORDERS), live(2, 3), unclean=False)
    head = result.effects[:4]
    assert head == (
        r.RemoveBroker(1),
        r.SetShuttingDown(frozenset()),
        r.SetLiveBrokers((reg(2), reg(3))),
        head[3],
    )
    assert isinstance(head[3], r.UpdatePartitionState)
    assert result.effects[-2:] == (
        r.Announce(ALL),
        r.SetLiveBrokers((reg(2), reg(3))),
    )


def test_the_last_isr_member_dying_leaves_the_partition_leaderless() -> None:
    ctx = view(topics={"t": {0: (1, 2)}}, states={("t", 0): lai(1, (1,))})
    new = updates(on_broker_change(ctx, live(2, 3), unclean=False))
    assert (new[("t", 0)].leader, new[("t", 0)].isr) == (NO_LEADER, (1,))


def test_unclean_election_on_death() -> None:
    ctx = view(topics={"t": {0: (1, 2)}}, states={("t", 0): lai(1, (1,))})
    new = updates(on_broker_change(ctx, live(2, 3), unclean=True))
    assert (new[("t", 0)].leader, new[("t", 0)].isr) == (2, (2,))


def test_two_dead_followers_of_one_partition_are_two_chained_writes() -> None:
    ctx = view(brokers=(1, 2, 3), topics={"t": {0: (1, 2, 3)}})
    result = on_broker_change(ctx, live(1), unclean=False)
    first, second = result.of(r.UpdatePartitionState)
    assert first.state.isr == (1, 3) and second.state.isr == (1,)
    assert second.base.zk_version == first.base.zk_version + 1
    assert result.of(r.Announce) == [r.Announce((("t", 0), ("t", 0)))]


def test_a_dead_broker_leaves_the_shutting_down_set() -> None:
    ctx = view(topics=ORDERS, shutting_down=(1, 2))
    result = on_broker_change(ctx, live(2, 3), unclean=False)
    assert r.SetShuttingDown(frozenset({2})) in result.effects


def test_a_new_broker_gets_a_sender_metadata_and_its_partitions() -> None:
    topics = {"t": {0: (1, 4), 1: (2, 3)}}
    ctx = view(topics=topics)
    result = on_broker_change(ctx, live(1, 2, 3, 4), unclean=False)
    assert result.effects == (
        r.SetShuttingDown(frozenset()),
        r.SetLiveBrokers(tuple(live(1, 2, 3, 4).values())),
        r.SetLiveBrokers(tuple(live(1, 2, 3, 4).values())),
        r.AddBroker(reg(4)),
        r.SendUpdateMetadata((("t", 0), ("t", 1))),
        r.SendLeaderAndIsr((("t", 0),), to=frozenset({4})),
    )


def test_a_new_broker_without_partitions_gets_no_leader_and_isr() -> None:
    result = on_broker_change(view(topics=ORDERS), live(1, 2, 3, 4), unclean=False)
    assert result.of(r.SendLeaderAndIsr) == []


def test_a_returning_broker_makes_waiting_partitions_possible() -> None:
    # t-0 was created while no replica was live; t-1 went leaderless when 3 died.
    topics = {"t": {0: (3,), 1: (3, 1)}}
    states = {("t", 1): lai(NO_LEADER, (3,), leader_epoch=2)}
    ctx = view(brokers=(1, 2), topics=topics, states=states)
    result = on_broker_change(ctx, live(1, 2, 3), unclean=False)
    (create,) = result.of(r.CreatePartitionState)
    assert create.topic_partition == ("t", 0) and create.state.leader == 3
    (update,) = result.of(r.UpdatePartitionState)
    assert (update.state.leader, update.state.isr, update.state.leader_epoch) == (3, (3,), 3)
    assert result.effects[-1] == r.Announce((("t", 0), ("t", 1)))


def test_a_bounce_is_a_death_then_a_startup() -> None:
    ctx = view(topics=ORDERS)
    current = live(1, 2, 3, bounced=(1,))
    result = on_broker_change(ctx, current, unclean=False)
    effects = result.effects
    # During the failure half the bounced broker is not live.
    assert effects[1] == r.SetLiveBrokers((reg(2), reg(3)))
    # orders-0 moves to 2, then nothing moves back (1 left the ISR when it died).
    new = updates(result)
    assert new[("orders", 0)].leader == 2 and 1 not in new[("orders", 0)].isr
    assert r.AddBroker(current[1]) in effects
    assert r.RemoveBroker(1) not in effects
    assert r.SendLeaderAndIsr(ALL, to=frozenset({1})) in effects
    assert effects.index(r.SetLiveBrokers(tuple(current.values()))) > effects.index(r.Announce(ALL))


def test_a_bounced_broker_that_was_shutting_down_may_lead_again() -> None:
    ctx = view(topics=ORDERS, shutting_down=(1,))
    result = on_broker_change(ctx, live(1, 2, 3, bounced=(1,)), unclean=False)
    assert result.effects[0] == r.SetShuttingDown(frozenset())


def test_the_decision_predicts_the_view_the_executor_will_reach() -> None:
    ctx = view(topics=ORDERS)
    result = on_broker_change(ctx, live(2, 3), unclean=False)
    plan = Plan(ctx)
    for effect in result.effects:
        if isinstance(effect, r.UpdatePartitionState):
            plan.elect([effect.topic_partition], effect.election)
        else:
            plan.add(effect)
    assert plan.result() == result
    assert set(plan.view.live_brokers) == {2, 3}
    assert all(s.leader in (2, 3) for s in plan.view.states.values())
