"""The other election values: preferred replica, controlled shutdown, and removing a broker
from the ISR (dead or stopping follower, removed leader, last ISR member kept)."""

from __future__ import annotations

from headwater.coordination.model import NO_LEADER
from headwater.coordination.partitions import (
    ControlledShutdownElection,
    PreferredElection,
    RemoveFromIsr,
)

from .helpers import lai


def test_preferred_moves_leadership_to_the_first_replica() -> None:
    new = PreferredElection(frozenset({1, 2}), 4).decide((1, 2), lai(2, (1, 2), leader_epoch=1))
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (1, (1, 2), 2, 4)


def test_preferred_is_not_needed_when_it_already_leads() -> None:
    assert PreferredElection(frozenset({1, 2}), 4).decide((1, 2), lai(1, (1, 2))) is None


def test_preferred_needs_the_replica_eligible_and_in_sync() -> None:
    assert PreferredElection(frozenset({2}), 4).decide((1, 2), lai(2, (1, 2))) is None
    assert PreferredElection(frozenset({1, 2}), 4).decide((1, 2), lai(2, (2,))) is None


def test_preferred_with_no_replicas_does_nothing() -> None:
    assert PreferredElection(frozenset({1}), 4).decide((), lai(1, (1,))) is None


def shutdown(live: set[int], stopping: set[int]) -> ControlledShutdownElection:
    return ControlledShutdownElection(frozenset(live), frozenset(stopping), 6)


def test_controlled_shutdown_moves_leadership_and_shrinks_the_isr() -> None:
    new = shutdown({1, 2, 3}, {1}).decide((1, 2, 3), lai(1, (1, 2, 3), leader_epoch=2))
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (2, (2, 3), 3, 6)


def test_controlled_shutdown_skips_candidates_also_stopping_or_out_of_sync() -> None:
    new = shutdown({1, 2, 3}, {1, 2}).decide((1, 2, 3), lai(1, (1, 2, 3)))
    assert new is not None and (new.leader, new.isr) == (3, (3,))
    assert shutdown({1, 2, 3}, {1}).decide((1, 2, 3), lai(1, (1,))) is None


def test_controlled_shutdown_with_a_single_replica_cannot_move() -> None:
    assert shutdown({1}, {1}).decide((1,), lai(1, (1,))) is None


def test_remove_from_isr_shrinks_a_follower_out() -> None:
    new = RemoveFromIsr(3, 5).decide((1, 2, 3), lai(1, (1, 2, 3), leader_epoch=2, zk_version=4))
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (1, (1, 2), 3, 5)
    assert new.zk_version == 4


def test_remove_from_isr_of_the_leader_leaves_no_leader() -> None:
    new = RemoveFromIsr(1, 5).decide((1, 2), lai(1, (1, 2)))
    assert new is not None and (new.leader, new.isr) == (NO_LEADER, (2,))


def test_remove_from_isr_keeps_the_last_member() -> None:
    new = RemoveFromIsr(1, 5).decide((1, 2), lai(1, (1,), leader_epoch=7))
    assert new is not None and (new.leader, new.isr, new.leader_epoch) == (NO_LEADER, (1,), 8)


def test_remove_from_isr_of_a_non_member_does_nothing() -> None:
    assert RemoveFromIsr(3, 5).decide((1, 2, 3), lai(1, (1, 2))) is None
