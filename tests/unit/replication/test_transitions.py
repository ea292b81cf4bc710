"""Every legal and illegal transition of PartitionRole and IsrState (docs/style.md)."""

from __future__ import annotations

import itertools

import pytest
from headwater.replication import (
    ISR_TRANSITIONS,
    ROLE_TRANSITIONS,
    IllegalStateTransition,
    IsrState,
    PartitionRole,
)

LEGAL_ROLE = {
    (PartitionRole.NONE, PartitionRole.LEADER),
    (PartitionRole.NONE, PartitionRole.FOLLOWER),
    (PartitionRole.NONE, PartitionRole.STOPPED),
    (PartitionRole.LEADER, PartitionRole.LEADER),
    (PartitionRole.LEADER, PartitionRole.FOLLOWER),
    (PartitionRole.LEADER, PartitionRole.STOPPED),
    (PartitionRole.FOLLOWER, PartitionRole.LEADER),
    (PartitionRole.FOLLOWER, PartitionRole.FOLLOWER),
    (PartitionRole.FOLLOWER, PartitionRole.STOPPED),
}
ALL_ROLE = set(itertools.product(PartitionRole, PartitionRole))

LEGAL_ISR = {
    (IsrState.COMMITTED, IsrState.COMMITTED),
    (IsrState.COMMITTED, IsrState.PENDING_EXPAND),
    (IsrState.COMMITTED, IsrState.PENDING_SHRINK),
    (IsrState.PENDING_EXPAND, IsrState.COMMITTED),
    (IsrState.PENDING_SHRINK, IsrState.COMMITTED),
}
ALL_ISR = set(itertools.product(IsrState, IsrState))


def test_tables_match_the_documented_edges() -> None:
    assert {(a, b) for a, bs in ROLE_TRANSITIONS.items() for b in bs} == LEGAL_ROLE
    assert {(a, b) for a, bs in ISR_TRANSITIONS.items() for b in bs} == LEGAL_ISR


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL_ROLE, key=str))
def test_legal_role_transition(source: PartitionRole, target: PartitionRole) -> None:
    assert source.transition_to(target) is target


@pytest.mark.parametrize(("source", "target"), sorted(ALL_ROLE - LEGAL_ROLE, key=str))
def test_illegal_role_transition(source: PartitionRole, target: PartitionRole) -> None:
    with pytest.raises(IllegalStateTransition, match=f"{source.name} -> {target.name}"):
        source.transition_to(target)


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL_ISR, key=str))
def test_legal_isr_transition(source: IsrState, target: IsrState) -> None:
    assert source.transition_to(target) is target


@pytest.mark.parametrize(("source", "target"), sorted(ALL_ISR - LEGAL_ISR, key=str))
def test_illegal_isr_transition(source: IsrState, target: IsrState) -> None:
    with pytest.raises(IllegalStateTransition, match=f"{source.name} -> {target.name}"):
        source.transition_to(target)
