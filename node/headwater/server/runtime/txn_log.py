"""The partition leader's side of transactions: batch headers in, decisions of
:class:`~headwater.storage.transactions.PartitionTransactions` out.

On produce, :func:`inspect` reads the one 61-byte header of a client's batch (records
are never decoded) and says whether it may be appended and whether the transaction
coordinator must first confirm that the partition is in the producer's open
transaction (KIP-890: the first transactional write of a transaction to a partition).
A client may never write a control batch; only the coordinator's WriteTxnMarkers does
(:func:`marker_batch`).  On becoming leader, :func:`rebuild` replays the headers of the
whole local log -- decoding only the control batches, one record each -- into the
open transactions and the in-memory aborted-transaction index, as recovery would from
the ``.txnindex`` files: the log is the replicated copy of both.

Called only by the :class:`~headwater.server.runtime.replica_manager.ReplicaManager`,
on the broker's event loop.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from headwater import errors
from headwater.errors import ErrorCode
from headwater.records import parse_header, read_batches
from headwater.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_control_batch,
    read_marker,
)
from headwater.records.header import BatchHeader
from headwater.storage import Log
from headwater.storage.transactions import PartitionTransactions, TransactionIndex

log = logging.getLogger(__name__)


class ClientBatch(NamedTuple):
    """What :func:`inspect` found in a client's produce."""

    header: BatchHeader | None
    """None: not a batch this module can read (the log's validation will say why)."""
    error: ErrorCode = ErrorCode.NONE
    message: str = ""
    needs_verification: bool = False
    """A transactional batch opening a transaction here: ask the coordinator first."""


def inspect(txns: PartitionTransactions, records: bytes) -> ClientBatch:
    """May a client's ``records`` be appended, as far as transactions go?"""
    try:
        header = parse_header(records, 0)
    except errors.HeadwaterError:
        return ClientBatch(None)
    if header.is_control:
        return ClientBatch(
            header, ErrorCode.INVALID_RECORD, "a client may not write a control batch"
        )
    if header.producer_id < 0:
        if header.is_transactional:
            return ClientBatch(
                header, ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id"
            )
        return ClientBatch(header)
    code = txns.check_append(
        header.producer_id,
        header.producer_epoch,
        is_transactional=header.is_transactional,
        is_control=False,
    )
    if code is not ErrorCode.NONE:
        why = (
            f"epoch {header.producer_epoch} is older than producer {header.producer_id}'s "
            "latest in this partition"
            if code is ErrorCode.INVALID_PRODUCER_EPOCH
            else f"producer {header.producer_id} has a transaction open in this partition"
        )
        return ClientBatch(header, code, why)
    opens = header.is_transactional and header.producer_id not in txns.open
    return ClientBatch(header, needs_verification=opens)


def marker_batch(marker: EndTransactionMarker, *, timestamp_ms: int) -> bytes:
    """The control batch that writes ``marker`` (its base offset is set by the log)."""
    return build_control_batch(
        marker.type,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch,
        timestamp_ms=timestamp_ms,
    )


def check_marker(txns: PartitionTransactions, marker: EndTransactionMarker) -> ErrorCode:
    """May ``marker`` be appended?  Not if the producer already wrote with a newer epoch."""
    return txns.check_append(
        marker.producer_id, marker.producer_epoch, is_transactional=True, is_control=True
    )


def written_marker(txns: PartitionTransactions, marker: EndTransactionMarker) -> int | None:
    """The offset where ``marker`` already is (a WriteTxnMarkers retry), or None."""
    return txns.written_marker(
        marker.producer_id, marker.producer_epoch, marker.type is ControlRecordType.COMMIT
    )


def appended(
    txns: PartitionTransactions,
    aborted: TransactionIndex,
    header: BatchHeader,
    base_offset: int,
    marker: EndTransactionMarker | None,
) -> None:
    """Account for a batch appended at ``base_offset``; index it if it ends an abort."""
    entry = txns.append(header._replace(base_offset=base_offset), marker)
    if entry is not None:
        aborted.append(entry)


def rebuild(txns: PartitionTransactions, aborted: TransactionIndex, plog: Log) -> int:
    """Replace both with what ``plog`` holds; return the transactional batches seen.

    On a read error both are left empty (every transaction reads as committed to a
    READ_COMMITTED consumer until the next rebuild), and the error is logged.
    """
    txns.open.clear()
    txns.epochs.clear()
    txns.ended.clear()
    aborted.entries.clear()
    seen = 0
    try:
        for segment in plog.segments:
            for _position, header in segment.iter_headers(0):
                if header.producer_id < 0 or not header.is_transactional:
                    continue
                marker = None
                if header.is_control:
                    data = plog.read(header.base_offset, header.size_in_bytes).records
                    batch = next(iter(read_batches(bytes(data))), None)
                    marker = read_marker(batch) if batch is not None else None
                appended(txns, aborted, header, header.base_offset, marker)
                seen += 1
    except (OSError, errors.HeadwaterError) as exc:
        log.warning("cannot rebuild the transactions of %s: %s", plog, errors.describe(exc))
        txns.open.clear()
        txns.epochs.clear()
        txns.ended.clear()
        aborted.entries.clear()
    return seen


__all__ = [
    "ClientBatch",
    "ControlRecordType",
    "appended",
    "check_marker",
    "inspect",
    "marker_batch",
    "rebuild",
    "written_marker",
]
