"""Leader election strategies: offline (clean and unclean), preferred, controlled shutdown,
initial state of a new partition."""

from __future__ import annotations

from headwater.coordination import election
from headwater.coordination.model import NO_LEADER, LeaderAndIsr

CUR = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), controller_epoch=2, zk_version=7)


def test_offline_elects_first_live_isr_replica_in_assignment_order() -> None:
    new = election.offline_partition_election((1, 3, 2), CUR, {2, 3}, controller_epoch=5)
    assert new is not None
    assert (new.leader, new.isr, new.leader_epoch, new.controller_epoch) == (3, (2, 3), 5, 5)
    assert new.zk_version == 7  # the conditional write uses the version it was read at


def test_offline_without_live_isr_needs_unclean() -> None:
    cur = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
    assert election.offline_partition_election((1, 2), cur, {2}, controller_epoch=1) is None
    new = election.offline_partition_election((1, 2), cur, {2}, controller_epoch=1, unclean=True)
    assert new is not None and (new.leader, new.isr) == (2, (2,))
    assert (
        election.offline_partition_election((1, 2), cur, set(), controller_epoch=1, unclean=True)
        is None
    )


def test_offline_no_leader_keeps_last_isr() -> None:
    cur = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1)
    new = election.offline_no_leader(cur, set(), controller_epoch=2)
    assert (new.leader, new.isr, new.leader_epoch) == (NO_LEADER, (1,), 1)


def test_preferred() -> None:
    cur = LeaderAndIsr(leader=2, leader_epoch=1, isr=(1, 2), controller_epoch=1)
    new = election.preferred_replica_election((1, 2), cur, {1, 2}, controller_epoch=3)
    assert new is not None and (new.leader, new.isr, new.leader_epoch) == (1, (1, 2), 2)
    assert election.preferred_replica_election((1, 2), cur, {2}, controller_epoch=3) is None
    not_in_isr = LeaderAndIsr(leader=2, leader_epoch=1, isr=(2,), controller_epoch=1)
    assert (
        election.preferred_replica_election((1, 2), not_in_isr, {1, 2}, controller_epoch=3) is None
    )
    assert election.preferred_replica_election((2, 1), cur, {1, 2}, controller_epoch=3) is None


def test_controlled_shutdown_excludes_and_shrinks() -> None:
    new = election.controlled_shutdown_election((1, 2, 3), CUR, {1, 2, 3}, {1}, controller_epoch=2)
    assert new is not None and (new.leader, new.isr, new.leader_epoch) == (2, (2, 3), 5)
    assert election.controlled_shutdown_election((1,), CUR, {1}, {1}, controller_epoch=2) is None


def test_initial_state() -> None:
    new = election.initial_leader_and_isr((3, 1, 2), {1, 2}, controller_epoch=4)
    assert new == LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=4)
    assert election.initial_leader_and_isr((3,), {1}, controller_epoch=4) is None
