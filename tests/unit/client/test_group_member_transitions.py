"""The consumer's group-member state table: every legal edge is taken, every other refused.

Like ``tests/unit/replication/test_transitions.py`` for the broker's partition states:
the table in :mod:`headwater.client.group.classic.member` is checked pair by pair, so a change to
it has to change this file too.
"""

from __future__ import annotations

import itertools

import pytest
from headwater.client.group.classic.member import (
    TRANSITIONS,
    IllegalStateTransition,
    MemberState,
)

S = MemberState
LEGAL = {
    (S.UNJOINED, S.JOINING),
    (S.UNJOINED, S.FENCED),
    (S.UNJOINED, S.CLOSED),
    (S.JOINING, S.UNJOINED),
    (S.JOINING, S.SYNCING),
    (S.JOINING, S.FENCED),
    (S.JOINING, S.CLOSED),
    (S.SYNCING, S.UNJOINED),
    (S.SYNCING, S.STABLE),
    (S.SYNCING, S.FENCED),
    (S.SYNCING, S.CLOSED),
    (S.STABLE, S.UNJOINED),
    (S.STABLE, S.JOINING),
    (S.STABLE, S.FENCED),
    (S.STABLE, S.CLOSED),
    (S.FENCED, S.CLOSED),
}
ALL = list(itertools.product(MemberState, MemberState))


def test_table_is_exactly_the_documented_edges() -> None:
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == LEGAL
    assert set(TRANSITIONS) == set(MemberState)


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL, key=str), ids=str)
def test_legal_transition(source: MemberState, target: MemberState) -> None:
    assert source.transition_to(target) is target


@pytest.mark.parametrize(("source", "target"), [p for p in ALL if p not in LEGAL], ids=str)
def test_illegal_transition_raises(source: MemberState, target: MemberState) -> None:
    with pytest.raises(IllegalStateTransition, match=f"{source.name} -> {target.name}"):
        source.transition_to(target)


def test_terminal_states() -> None:
    assert TRANSITIONS[S.CLOSED] == frozenset()
    assert TRANSITIONS[S.FENCED] == frozenset({S.CLOSED})


def test_no_state_moves_to_itself() -> None:
    for state in MemberState:
        assert state not in TRANSITIONS[state]
