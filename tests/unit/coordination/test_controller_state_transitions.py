"""ControllerState: every legal transition of the table is allowed and every other one
raises IllegalControllerTransition; STOPPED is terminal."""

from __future__ import annotations

import itertools

import pytest
from headwater.coordination.controller_state import (
    TRANSITIONS,
    ControllerState,
    IllegalControllerTransition,
)

S = ControllerState
LEGAL = {
    (S.INACTIVE, S.ACTIVE),
    (S.INACTIVE, S.STOPPED),
    (S.ACTIVE, S.ACTIVE),
    (S.ACTIVE, S.INACTIVE),
    (S.ACTIVE, S.STOPPED),
}


def test_the_table_covers_every_state() -> None:
    assert set(TRANSITIONS) == set(S)


def test_the_table_is_exactly_the_documented_one() -> None:
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == LEGAL


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL, key=str))
def test_legal_transitions(source: ControllerState, target: ControllerState) -> None:
    assert source.transition_to(target) is target


ILLEGAL = sorted(set(itertools.product(S, S)) - LEGAL, key=str)


@pytest.mark.parametrize(("source", "target"), ILLEGAL)
def test_illegal_transitions(source: ControllerState, target: ControllerState) -> None:
    with pytest.raises(IllegalControllerTransition, match=f"{source.name} -> {target.name}"):
        source.transition_to(target)


def test_stopped_is_terminal() -> None:
    assert TRANSITIONS[S.STOPPED] == frozenset()


def test_inactive_cannot_stay_inactive_by_transition() -> None:
    # Losing an election is not a transition: the state is simply left as it is.
    with pytest.raises(IllegalControllerTransition):
        S.INACTIVE.transition_to(S.INACTIVE)
