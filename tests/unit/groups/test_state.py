"""The group state machine: every legal transition is allowed, every other one raises."""

from __future__ import annotations

import itertools

import pytest
from headwater.groups.classic.group import GroupMetadata
from headwater.groups.classic.state import (
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateError,
    check_transition,
)

LEGAL = {(prev, target) for target, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}
ALL_PAIRS = set(itertools.product(GroupState, GroupState))


def test_the_table_is_kafkas() -> None:
    assert {
        (GroupState.PREPARING_REBALANCE, GroupState.EMPTY),
        (GroupState.EMPTY, GroupState.PREPARING_REBALANCE),
        (GroupState.STABLE, GroupState.PREPARING_REBALANCE),
        (GroupState.COMPLETING_REBALANCE, GroupState.PREPARING_REBALANCE),
        (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE),
        (GroupState.COMPLETING_REBALANCE, GroupState.STABLE),
        *((s, GroupState.DEAD) for s in GroupState),
    } == LEGAL


@pytest.mark.parametrize(("prev", "target"), sorted(LEGAL, key=str))
def test_legal_transition(prev: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", now_ms=0)
    group.state = prev
    group.transition_to(target, now_ms=42)
    assert group.state is target
    assert group.state_timestamp_ms == 42


@pytest.mark.parametrize(("prev", "target"), sorted(ALL_PAIRS - LEGAL, key=str))
def test_illegal_transition(prev: GroupState, target: GroupState) -> None:
    group = GroupMetadata("g", now_ms=0)
    group.state = prev
    with pytest.raises(IllegalStateError):
        group.transition_to(target, now_ms=42)
    assert group.state is prev
    assert group.state_timestamp_ms == 0


def test_check_transition_returns_the_target() -> None:
    assert check_transition(GroupState.EMPTY, GroupState.DEAD) is GroupState.DEAD
    assert str(GroupState.COMPLETING_REBALANCE) == "CompletingRebalance"
