"""OfflineElection: a partition whose leader may no longer lead elects from the live ISR in
assignment order, falls back to an unclean election only when allowed, and is otherwise
marked leaderless exactly once."""

from __future__ import annotations

from headwater.coordination.model import NO_LEADER
from headwater.coordination.partitions import OfflineElection

from .helpers import lai


def offline(
    eligible: set[int], live: set[int] | None = None, *, unclean: bool = False
) -> OfflineElection:
    return OfflineElection(
        eligible=frozenset(eligible),
        live=frozenset(eligible if live is None else live),
        controller_epoch=9,
        unclean=unclean,
    )


def test_an_eligible_leader_is_left_alone() -> None:
    assert offline({1, 2}).decide((1, 2), lai(1, (1, 2))) is None


def test_elects_first_live_isr_member_in_assignment_order() -> None:
    new = offline({2, 3}).decide((1, 3, 2), lai(1, (1, 2, 3), leader_epoch=4, zk_version=6))
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (3, (2, 3), 5, 9)
    assert new.zk_version == 6


def test_a_live_replica_outside_the_isr_is_not_elected_cleanly() -> None:
    new = offline({2, 3}).decide((2, 3), lai(1, (1, 3)))
    assert new is not None and new.leader == 3 and new.isr == (3,)


def test_no_live_isr_member_marks_leaderless_keeping_the_last_isr() -> None:
    new = offline({2}).decide((1, 2), lai(1, (1,), leader_epoch=2))
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (NO_LEADER, (1,), 3, 9)


def test_leaderless_isr_keeps_live_members_only_when_some_are_live() -> None:
    # Broker 2 is live (in ISR) but shutting down: not eligible, still kept in the ISR.
    new = offline(eligible={3}, live={2, 3}).decide((1, 2), lai(1, (1, 2)))
    assert new is not None and (new.leader, new.isr) == (NO_LEADER, (2,))


def test_an_already_leaderless_partition_is_not_written_again() -> None:
    assert offline({2}).decide((1, 2), lai(NO_LEADER, (1,))) is None


def test_unclean_elects_any_live_replica_with_itself_as_isr() -> None:
    new = offline({2}, unclean=True).decide((1, 2), lai(1, (1,)))
    assert new is not None and (new.leader, new.isr) == (2, (2,))


def test_unclean_prefers_a_clean_candidate() -> None:
    new = offline({2, 3}, unclean=True).decide((2, 3), lai(1, (1, 3)))
    assert new is not None and new.leader == 3


def test_unclean_without_any_live_replica_marks_leaderless() -> None:
    new = offline(set(), unclean=True).decide((1, 2), lai(1, (1, 2)))
    assert new is not None and new.leader == NO_LEADER


def test_leaderless_partition_gets_a_leader_when_an_isr_member_returns() -> None:
    new = offline({1}).decide((1, 2), lai(NO_LEADER, (1,), leader_epoch=3))
    assert new is not None and (new.leader, new.isr, new.leader_epoch) == (1, (1,), 4)
