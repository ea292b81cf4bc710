"""What DescribeTransactions and ListTransactions answer, from the coordinator's metadata.

Kafka's fields and filters: DescribeTransactions gives an id's state name, producer id
and epoch, timeout, start time and partitions (TRANSACTIONAL_ID_NOT_FOUND for an id the
coordinator does not hold); ListTransactions filters by state names, producer ids and,
as KIP-994 adds, transactions running longer than a duration, and names the state
filters it does not know.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.transactions.metadata import TransactionMetadata
from headwater.transactions.state import TransactionState
from headwater.values import TopicPartition

_RUNNING = (
    TransactionState.ONGOING,
    TransactionState.PREPARE_COMMIT,
    TransactionState.PREPARE_ABORT,
)


class TransactionDescription(NamedTuple):
    """One id in a DescribeTransactions answer."""

    transactional_id: str
    error: ErrorCode
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    partitions: tuple[TopicPartition, ...]


class TransactionListing(NamedTuple):
    """One id in a ListTransactions answer."""

    transactional_id: str
    producer_id: int
    state: str


def describe(transactional_id: str, metadata: TransactionMetadata | None) -> TransactionDescription:
    """DescribeTransactions for one id (an id mid-expiry reads as not found)."""
    if metadata is None or metadata.state is TransactionState.DEAD:
        return TransactionDescription(
            transactional_id, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, "", -1, -1, -1, -1, ()
        )
    return TransactionDescription(
        transactional_id,
        ErrorCode.NONE,
        metadata.state.value,
        metadata.producer_id,
        metadata.producer_epoch,
        metadata.transaction_timeout_ms,
        metadata.txn_start_timestamp_ms,
        tuple(sorted(metadata.partitions)),
    )


def list_transactions(
    transactions: Iterable[TransactionMetadata],
    *,
    state_filters: Collection[str] = (),
    producer_id_filters: Collection[int] = (),
    duration_filter_ms: int = -1,
    now_ms: int,
) -> tuple[list[TransactionListing], list[str]]:
    """The ids that pass every given filter, sorted, and the unknown state filters.

    An empty filter passes everything; ``duration_filter_ms`` >= 0 keeps the
    transactions running (Ongoing, PrepareCommit, PrepareAbort) for longer than it.
    Only unknown state names given: nothing matches.
    """
    names = {s.value: s for s in TransactionState}
    unknown = sorted(f for f in state_filters if f not in names)
    wanted = {names[f] for f in state_filters if f in names}
    if state_filters and not wanted:
        return [], unknown
    out = []
    for m in transactions:
        if m.state is TransactionState.DEAD:
            continue
        if wanted and m.state not in wanted:
            continue
        if producer_id_filters and m.producer_id not in producer_id_filters:
            continue
        if duration_filter_ms >= 0 and (
            m.state not in _RUNNING or now_ms - m.txn_start_timestamp_ms <= duration_filter_ms
        ):
            continue
        out.append(TransactionListing(m.transactional_id, m.producer_id, m.state.value))
    return sorted(out), unknown
