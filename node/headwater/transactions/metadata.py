"""One transactional id's state in the transaction coordinator (Kafka's ``TransactionMetadata``).

A value, never mutated: a decision (:mod:`headwater.transactions.decisions`) returns the
metadata to hold while its ``__transaction_state`` record is appended (``pending_state``
set) and the metadata the record carries, which becomes the state once the append is
acknowledged.

Invariants:

* ``pending_state`` is set exactly while a record for this id is being appended; every
  request that would change the id meanwhile is answered CONCURRENT_TRANSACTIONS;
* ``partitions`` is non-empty only in Ongoing, PrepareCommit and PrepareAbort (the
  partitions of the open, or completing, transaction);
* the producer epoch is bumped at every transaction end (KIP-890): the markers of a
  transaction opened at epoch E carry E + 1, so a late produce, EndTxn or marker of that
  transaction, which carries E, is fenced;
* an epoch handed to a producer is at most :data:`MAX_USABLE_EPOCH` - 1, so the bump at the
  end never overflows; a bump that would reach :data:`MAX_USABLE_EPOCH` moves the id to a
  new producer id at epoch 0 instead (``next_producer_id`` holds it while the markers of
  the last transaction under the old id are written).
"""

from __future__ import annotations

import dataclasses

from headwater.transactions.state import TransactionState
from headwater.values import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_TIMESTAMP = -1

MAX_USABLE_EPOCH = 32766
"""``Short.MaxValue - 1``: an id whose next epoch would reach it moves to a new producer id."""

DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 900_000
DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS = 604_800_000


@dataclasses.dataclass(frozen=True)
class TransactionConfig:
    """The broker settings the coordinator's decisions read (Kafka's names and defaults)."""

    transaction_max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
    """``transaction.max.timeout.ms``: the largest ``transaction.timeout.ms`` a producer may ask."""
    transactional_id_expiration_ms: int = DEFAULT_TRANSACTIONAL_ID_EXPIRATION_MS
    """``transactional.id.expiration.ms``: an id idle this long, nothing open, is removed."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Whether ``epoch`` may no longer be handed out (Kafka's ``isEpochExhausted``)."""
    return epoch >= MAX_USABLE_EPOCH


@dataclasses.dataclass(frozen=True)
class TransactionMetadata:
    """The coordinator's state for one transactional id (see the module's invariants)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    previous_producer_id: int = NO_PRODUCER_ID
    """The producer id this id had before its last rotation (Kafka's ``prevProducerId``)."""
    next_producer_id: int = NO_PRODUCER_ID
    """The producer id the id moves to once the completing transaction's markers are written."""
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch before the last bump, when that bump was the producer's own request
    (InitProducerId or EndTxn): a retry of that request carries it and is answered
    idempotently.  NO_PRODUCER_EPOCH after the coordinator fenced the producer."""
    partitions: frozenset[TopicPartition] = frozenset()
    pending_state: TransactionState | None = None
    txn_start_timestamp_ms: int = NO_TIMESTAMP
    txn_last_update_timestamp_ms: int = NO_TIMESTAMP

    def replace(self, **changes: object) -> TransactionMetadata:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    def ended_by(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether ``(producer_id, producer_epoch)`` is the producer whose own EndTxn led to
        this PrepareCommit/PrepareAbort/CompleteCommit/CompleteAbort: its retry."""
        if producer_epoch == NO_PRODUCER_EPOCH or producer_epoch != self.last_producer_epoch:
            return False
        if self.state.is_completing:
            return producer_id == self.producer_id
        if self.state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            rotated = self.producer_epoch == 0 and self.previous_producer_id != NO_PRODUCER_ID
            return producer_id == (self.previous_producer_id if rotated else self.producer_id)
        return False
