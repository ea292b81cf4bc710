"""The group state machine: Kafka's ``GroupState`` with its table of valid previous states.

A classic consumer group moves ::

    Empty ──join──▶ PreparingRebalance ──all joined──▶ CompletingRebalance ──leader sync──▶ Stable
      ▲                 ▲   │                                  │                              │
      │                 │   └──no member left──▶ Empty         └──member change──▶ Preparing  │
      └── Dead ◀── (offsets expired / group deleted)     Stable ──member change──▶ Preparing ─┘

Each state lists the states it may be entered *from* (Kafka keeps the table the same
way round); :func:`check_transition` refuses anything else with an ``IllegalStateError``,
so a coordinator bug shows up as an exception in a unit test rather than as a group stuck
in an impossible state.  Dead is terminal: a dead group is dropped from memory and a new
group with the same id starts again at Empty.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """The states of a classic group; values are the names Kafka's tools print."""

    EMPTY = "Empty"
    """No members; offsets may still be held (and expire after offsets.retention.minutes)."""
    PREPARING_REBALANCE = "PreparingRebalance"
    """Members are (re)joining; JoinGroup answers wait until all have joined or time is up."""
    COMPLETING_REBALANCE = "CompletingRebalance"
    """Everyone joined; waiting for the leader's SyncGroup with the assignment."""
    STABLE = "Stable"
    """Assignment distributed; members heartbeat and commit."""
    DEAD = "Dead"
    """No members and no offsets (or deleted); about to be removed."""

    def __str__(self) -> str:
        return self.value


VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
            GroupState.DEAD,
        }
    ),
}
"""``target -> states it may be entered from`` (Kafka's ``validPreviousStates``)."""


class IllegalStateError(RuntimeError):
    """A transition the table does not allow: a coordinator bug, never a client error."""


def check_transition(current: GroupState, target: GroupState) -> GroupState:
    """Return ``target`` if ``current -> target`` is legal; raise IllegalStateError if not."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateError(f"group cannot go from {current} to {target}")
    return target
