"""Leader election strategies (Kafka's ``PartitionLeaderElectionAlgorithms``).

Pure functions: given a partition's replica assignment (preferred leader
first), its current :class:`LeaderAndIsr` and the live brokers, each returns
the new :class:`LeaderAndIsr` (leader epoch bumped, stamped with the
controller epoch) or ``None`` when no eligible leader exists.  The controller
writes the result with a conditional, epoch-fenced ZooKeeper write.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence

from headwater.coordination.model import NO_LEADER, LeaderAndIsr


def _stamp(current: LeaderAndIsr, leader: int, isr: Sequence[int], ctrl_epoch: int) -> LeaderAndIsr:
    return dataclasses.replace(current.new_leader(leader, isr), controller_epoch=ctrl_epoch)


def offline_partition_election(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    *,
    controller_epoch: int,
    unclean: bool = False,
) -> LeaderAndIsr | None:
    """Elect the first live replica (in assignment order) that is in the ISR.

    With ``unclean`` (``unclean.leader.election.enable``) and no live ISR
    member, any live replica may lead; the ISR then becomes just that leader
    (messages it never had are lost, which is why it is off by default).
    """
    leader = next((b for b in assignment if b in live and b in current.isr), None)
    if leader is not None:
        isr = [b for b in current.isr if b in live]
        return _stamp(current, leader, isr, controller_epoch)
    if unclean:
        leader = next((b for b in assignment if b in live), None)
        if leader is not None:
            return _stamp(current, leader, [leader], controller_epoch)
    return None


def offline_no_leader(
    current: LeaderAndIsr, live: Collection[int], *, controller_epoch: int
) -> LeaderAndIsr:
    """The state of a partition left without an eligible leader (Kafka keeps the last ISR)."""
    isr = [b for b in current.isr if b in live] or list(current.isr)
    return _stamp(current, NO_LEADER, isr, controller_epoch)


def preferred_replica_election(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    *,
    controller_epoch: int,
) -> LeaderAndIsr | None:
    """Move leadership to the preferred replica (the first in the assignment) if it can lead.

    Returns ``None`` when the preferred replica is dead or out of the ISR, or
    already leads (no election needed).
    """
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred == current.leader:
        return None
    if preferred in live and preferred in current.isr:
        return _stamp(current, preferred, current.isr, controller_epoch)
    return None


def controlled_shutdown_election(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live: Collection[int],
    shutting_down: Collection[int],
    *,
    controller_epoch: int,
) -> LeaderAndIsr | None:
    """Move leadership off brokers that are shutting down and shrink them out of the ISR."""
    leader = next(
        (b for b in assignment if b in live and b in current.isr and b not in shutting_down),
        None,
    )
    if leader is None:
        return None
    isr = [b for b in current.isr if b not in shutting_down]
    return _stamp(current, leader, isr, controller_epoch)


def initial_leader_and_isr(
    assignment: Sequence[int], live: Collection[int], *, controller_epoch: int
) -> LeaderAndIsr | None:
    """A new partition: leader = first live replica, ISR = the live replicas, epoch 0."""
    isr = [b for b in assignment if b in live]
    if not isr:
        return None
    return LeaderAndIsr(
        leader=isr[0], leader_epoch=0, isr=tuple(isr), controller_epoch=controller_epoch
    )
