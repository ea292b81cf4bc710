"""Explicit states of a partition replica and of its ISR, with their legal transitions.

Kafka's ``GroupState`` lists each state's valid previous states and refuses
anything else (docs/style.md, "Explicit states").  The same is done here for the replica's role and
for in-flight ISR changes: an ISR expansion or shrink is first *pending* (the
leader has asked ZooKeeper to change it) and only becomes *committed* once the
conditional write succeeds, like Kafka's ``PendingExpandIsr``/``PendingShrinkIsr``.
While a change is pending the leader computes the high watermark over the
*maximal* ISR (current plus pending additions), so a replica that is being
added is already waited for and a replica being removed is still waited for.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class IllegalStateTransition(Exception):
    """A state machine was asked to move along an edge its table does not have."""


class PartitionRole(enum.Enum):
    """What this broker does for one partition."""

    NONE = "none"
    """Created but no LeaderAndIsr received yet."""
    LEADER = "leader"
    FOLLOWER = "follower"
    STOPPED = "stopped"
    """StopReplica received: terminal, the runtime drops the partition."""

    def transition_to(self, target: PartitionRole) -> PartitionRole:
        """Return ``target`` if the move is legal, else raise IllegalStateTransition."""
        if target not in ROLE_TRANSITIONS[self]:
            raise IllegalStateTransition(f"partition role {self.name} -> {target.name}")
        return target


ROLE_TRANSITIONS: Mapping[PartitionRole, frozenset[PartitionRole]] = {
    PartitionRole.NONE: frozenset(
        {PartitionRole.LEADER, PartitionRole.FOLLOWER, PartitionRole.STOPPED}
    ),
    # LEADER -> LEADER and FOLLOWER -> FOLLOWER are new leader epochs.
    PartitionRole.LEADER: frozenset(
        {PartitionRole.LEADER, PartitionRole.FOLLOWER, PartitionRole.STOPPED}
    ),
    PartitionRole.FOLLOWER: frozenset(
        {PartitionRole.LEADER, PartitionRole.FOLLOWER, PartitionRole.STOPPED}
    ),
    PartitionRole.STOPPED: frozenset(),
}


class IsrState(enum.Enum):
    """Whether the leader's view of the ISR matches ZooKeeper or a write is in flight."""

    COMMITTED = "committed"
    PENDING_EXPAND = "pending_expand"
    PENDING_SHRINK = "pending_shrink"

    def transition_to(self, target: IsrState) -> IsrState:
        """Return ``target`` if the move is legal, else raise IllegalStateTransition."""
        if target not in ISR_TRANSITIONS[self]:
            raise IllegalStateTransition(f"ISR state {self.name} -> {target.name}")
        return target


ISR_TRANSITIONS: Mapping[IsrState, frozenset[IsrState]] = {
    # COMMITTED -> COMMITTED: a LeaderAndIsr from the controller replaces the ISR.
    IsrState.COMMITTED: frozenset(
        {IsrState.COMMITTED, IsrState.PENDING_EXPAND, IsrState.PENDING_SHRINK}
    ),
    # One change in flight at a time: a pending change resolves before the next.
    IsrState.PENDING_EXPAND: frozenset({IsrState.COMMITTED}),
    IsrState.PENDING_SHRINK: frozenset({IsrState.COMMITTED}),
}
