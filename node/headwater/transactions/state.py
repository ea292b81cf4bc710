"""The transaction state machine: Kafka's ``TransactionState`` and its valid previous states.

One transactional id moves ::

    Empty ──AddPartitions/AddOffsets──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──▶ CompleteCommit
                                         │  │                      (markers written)
                                         │  └─EndTxn(abort), timeout─▶ PrepareAbort ─▶ CompleteAbort
                                         └─InitProducerId──▶ PrepareEpochFence ──▶ PrepareAbort
    CompleteCommit, CompleteAbort ──InitProducerId──▶ Empty (and ──AddPartitions──▶ Ongoing)
    Empty, CompleteCommit, CompleteAbort ──transactional.id.expiration.ms──▶ Dead

Each state lists the states it may be entered *from* (Kafka keeps the table that way
round); :func:`check_transition` refuses anything else with :class:`IllegalStateError`, a
coordinator bug rather than a client error (a client's bad request is answered with an
error code before any transition is attempted).  The table is Kafka's with transaction
version 2 (KIP-890): PrepareAbort may also be entered from Empty, CompleteCommit and
CompleteAbort, because a client that is unsure whether its transaction is open may
always abort.  PrepareEpochFence is only ever a *pending* state: the coordinator passes
through it on its way to PrepareAbort when it fences a producer, and never writes it.
"""

from __future__ import annotations

import enum


class TransactionState(enum.Enum):
    """The states of a transactional id; values are the names DescribeTransactions prints."""

    EMPTY = "Empty"
    """A producer id and epoch are assigned; no transaction is open."""
    ONGOING = "Ongoing"
    """A transaction is open: partitions (and offsets) were added to it."""
    PREPARE_COMMIT = "PrepareCommit"
    """The commit decision is in the log; COMMIT markers are being written."""
    PREPARE_ABORT = "PrepareAbort"
    """The abort decision is in the log; ABORT markers are being written."""
    COMPLETE_COMMIT = "CompleteCommit"
    """Every partition has its COMMIT marker."""
    COMPLETE_ABORT = "CompleteAbort"
    """Every partition has its ABORT marker."""
    DEAD = "Dead"
    """Expired after ``transactional.id.expiration.ms`` idle; about to be removed."""
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    """Pending only: the epoch is being bumped to fence a producer before an abort."""

    @property
    def id(self) -> int:
        """Kafka's state id, the ``TransactionStatus`` byte of ``__transaction_state``."""
        return _IDS[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """The state for a ``TransactionStatus`` byte; ``ValueError`` for an unknown one."""
        for state, known in _IDS.items():
            if known == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle id in this state may expire (Kafka's ``isExpirationAllowed``)."""
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )

    @property
    def is_completing(self) -> bool:
        """PrepareCommit or PrepareAbort: decided, markers not yet all written."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)

    def __str__(self) -> str:
        return self.value


_IDS: dict[TransactionState, int] = {
    TransactionState.EMPTY: 0,
    TransactionState.ONGOING: 1,
    TransactionState.PREPARE_COMMIT: 2,
    TransactionState.PREPARE_ABORT: 3,
    TransactionState.COMPLETE_COMMIT: 4,
    TransactionState.COMPLETE_ABORT: 5,
    TransactionState.DEAD: 6,
    TransactionState.PREPARE_EPOCH_FENCE: 7,
}

_S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset(
        {_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}
    ),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
"""``target -> states it may be entered from`` (Kafka's ``validPreviousStates``)."""


class IllegalStateError(RuntimeError):
    """A transition the table does not allow: a coordinator bug, never a client error."""


def check_transition(current: TransactionState, target: TransactionState) -> TransactionState:
    """Return ``target`` if ``current -> target`` is legal; raise IllegalStateError if not."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateError(f"transaction cannot go from {current} to {target}")
    return target


class TransactionResult(enum.Enum):
    """How a transaction ends (Kafka's ``TransactionResult``); the control record's type."""

    ABORT = 0
    COMMIT = 1

    def __str__(self) -> str:
        return self.name
