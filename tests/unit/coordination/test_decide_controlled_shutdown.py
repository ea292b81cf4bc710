"""The controlled-shutdown decision: the broker is validated (registered, current epoch),
marked shutting down, its leaderships move to in-sync replicas, it leaves the ISRs it
follows and is told to stop following them; the answer lists what it still leads."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.coordination import results as r
from headwater.coordination.decisions.leaders import on_controlled_shutdown, remaining_leaderships

from .helpers import ORDERS, lai, view


def test_unregistered_broker_is_refused() -> None:
    with pytest.raises(errors.BrokerNotAvailableError):
        on_controlled_shutdown(view(topics=ORDERS), 9, 109)


def test_stale_broker_epoch_is_refused() -> None:
    with pytest.raises(errors.StaleBrokerEpochError):
        on_controlled_shutdown(view(topics=ORDERS), 1, 5)


def test_negative_epoch_skips_the_check() -> None:
    assert on_controlled_shutdown(view(topics=ORDERS), 1, -1)


def test_leaderships_move_and_followers_shrink() -> None:
    result = on_controlled_shutdown(view(topics=ORDERS), 1, 101)
    assert result.effects[0] == r.SetShuttingDown(frozenset({1}))
    new = {u.topic_partition: u.state for u in result.of(r.UpdatePartitionState)}
    assert (new[("orders", 0)].leader, new[("orders", 0)].isr) == (2, (2, 3))
    assert (new[("orders", 1)].leader, new[("orders", 1)].isr) == (2, (2, 3))
    assert (new[("orders", 2)].leader, new[("orders", 2)].isr) == (3, (3, 2))
    assert result.effects[-2:] == (
        r.Announce((("orders", 0), ("orders", 1), ("orders", 2))),
        r.SendStopReplica(1, (("orders", 1), ("orders", 2)), delete=False),
    )


def test_single_replica_partitions_stay_and_are_not_stopped() -> None:
    result = on_controlled_shutdown(view(topics={"t": {0: (1,)}}), 1, 101)
    assert result.effects == (r.SetShuttingDown(frozenset({1})),)


def test_no_in_sync_successor_leaves_the_leadership_in_place() -> None:
    ctx = view(topics={"t": {0: (1, 2)}}, states={("t", 0): lai(1, (1,))})
    result = on_controlled_shutdown(ctx, 1, 101)
    assert result.of(r.UpdatePartitionState) == []
    assert remaining_leaderships(ctx, 1) == [("t", 0)]


def test_followed_partition_already_without_it_in_isr_is_only_stopped() -> None:
    ctx = view(topics={"t": {0: (2, 1)}}, states={("t", 0): lai(2, (2,))})
    result = on_controlled_shutdown(ctx, 1, 101)
    assert result.effects == (
        r.SetShuttingDown(frozenset({1})),
        r.SendStopReplica(1, (("t", 0),), delete=False),
    )


def test_other_brokers_already_shutting_down_are_kept_and_avoided() -> None:
    ctx = view(topics={"t": {0: (1, 2, 3)}}, shutting_down=(2,))
    result = on_controlled_shutdown(ctx, 1, 101)
    assert result.effects[0] == r.SetShuttingDown(frozenset({1, 2}))
    (update,) = result.of(r.UpdatePartitionState)
    assert (update.state.leader, update.state.isr) == (3, (3,))


def test_repeated_request_is_harmless() -> None:
    ctx = view(topics={"t": {0: (2, 1)}}, states={("t", 0): lai(2, (2,))}, shutting_down=(1,))
    result = on_controlled_shutdown(ctx, 1, 101)
    assert result.effects[0] == r.SetShuttingDown(frozenset({1}))


def test_remaining_leaderships() -> None:
    topics = {"t": {0: (1, 2), 1: (1,), 2: (2, 1)}}
    ctx = view(topics=topics)
    assert remaining_leaderships(ctx, 1) == [("t", 0)]
    assert remaining_leaderships(ctx, 2) == [("t", 2)]
    assert remaining_leaderships(ctx, 3) == []
