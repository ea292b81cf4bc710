"""The transaction state table: Kafka's valid previous states, every edge walked."""

from __future__ import annotations

import itertools

import pytest
from headwater.transactions.state import (
    VALID_PREVIOUS_STATES,
    IllegalStateError,
    TransactionResult,
    TransactionState,
    check_transition,
)

S = TransactionState

KAFKAS_TABLE = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {
        S.ONGOING,
        S.PREPARE_EPOCH_FENCE,
        S.EMPTY,
        S.COMPLETE_COMMIT,
        S.COMPLETE_ABORT,
    },
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}

ALL_EDGES = list(itertools.product(S, S))


def test_the_table_is_kafkas() -> None:
    assert {k: set(v) for k, v in VALID_PREVIOUS_STATES.items()} == KAFKAS_TABLE


@pytest.mark.parametrize(("current", "target"), ALL_EDGES, ids=lambda s: s.value)
def test_every_edge_of_the_table_is_allowed_and_every_other_refused(
    current: TransactionState, target: TransactionState
) -> None:
    if current in KAFKAS_TABLE[target]:
        assert check_transition(current, target) is target
    else:
        with pytest.raises(IllegalStateError, match=f"from {current} to {target}"):
            check_transition(current, target)


def test_dead_is_terminal_and_complete_states_are_entered_only_from_their_prepare() -> None:
    assert not any(S.DEAD in previous for previous in VALID_PREVIOUS_STATES.values())
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_ABORT] == {S.PREPARE_ABORT}


def test_state_ids_are_kafkas_transaction_status_bytes() -> None:
    assert [s.id for s in S] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert [s.value for s in S] == [
        "Empty",
        "Ongoing",
        "PrepareCommit",
        "PrepareAbort",
        "CompleteCommit",
        "CompleteAbort",
        "Dead",
        "PrepareEpochFence",
    ]
    assert all(S.from_id(s.id) is s for s in S)
    with pytest.raises(ValueError, match="unknown transaction state id 8"):
        S.from_id(8)


def test_expiration_is_allowed_only_with_nothing_open() -> None:
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_transaction_results_are_kafkas_control_record_types() -> None:
    assert (TransactionResult.ABORT.value, TransactionResult.COMMIT.value) == (0, 1)
