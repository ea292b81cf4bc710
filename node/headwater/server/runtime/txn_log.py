"""The partition leader's side of transactions: batch headers in, decisions of
:class:`~headwater.storage.transactions.PartitionTransactions` out.

On produce, :func:`inspect` reads the one 61-byte header of a client's batch (records
are never decoded) and says whether it may be appended and whether the transaction
coordinator must first confirm that the partition is in the producer's open
transaction (KIP-890: the first transactional write of a transaction to a partition).
A client may never write a control batch; only the coordinator's WriteTxnMarkers does
(:func:`marker_batch`).  Each abort is indexed in the ``.txnindex`` of the segment
holding its marker.  The leader writes the producer state (idempotence and
transactions) as a snapshot when the log rolls (taken on the event loop by
:func:`snapshot_now`, written by a worker thread) and at a clean shutdown
(:func:`take_snapshot`); on becoming leader, :func:`load_producer_state` starts from the
newest whole snapshot and ``.txnindex`` files and replays the headers after it --
decoding only the control batches, one record each -- or, when a file is damaged,
replays the whole log and rewrites the indexes: the log is the replicated copy of all
of them.

Called only by the :class:`~headwater.server.runtime.replica_manager.ReplicaManager`, on
the broker's event loop, except :meth:`SnapshotWrite.write` and, for a partition that is
not hosted yet (no one else reaches its state), :func:`load_producer_state`: worker threads.
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
from headwater.replication import producer_snapshot
from headwater.replication.producer_state import ProducerBatch, ProducerStateManager
from headwater.storage import Log
from headwater.storage.transactions import PartitionTransactions

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
    return ClientBatch(header, needs_verification=_opens_transaction(txns, header))


def _opens_transaction(txns: PartitionTransactions, header: BatchHeader) -> bool:
    """Whether a transactional batch starts a transaction here: none is open for its
    producer, or the open one is of an older epoch (a producer whose epoch EndTxn bumped
    writes its next transaction before the last one's marker reached this partition;
    only the coordinator may say whether that transaction is open yet)."""
    if not header.is_transactional:
        return False
    pid = header.producer_id
    return pid not in txns.open or header.producer_epoch > txns.epochs.get(pid, -1)


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
    plog: Log,
    header: BatchHeader,
    base_offset: int,
    marker: EndTransactionMarker | None,
) -> None:
    """Account for a batch appended at ``base_offset``; index it if it ends an abort."""
    entry = txns.append(header._replace(base_offset=base_offset), marker)
    if entry is not None:
        plog.append_aborted(entry)


class LoadedState(NamedTuple):
    """How :func:`load_producer_state` found the state."""

    snapshot_offset: int | None
    """The snapshot it started from (None: the whole log was replayed)."""
    replayed: int
    """Batches of producers read from the log after the snapshot."""


class SnapshotWrite(NamedTuple):
    """A producer snapshot taken on the event loop, for a worker thread to write
    (:meth:`headwater.storage.Log.write_producer_snapshot` says why that stays safe)."""

    plog: Log
    offset: int
    """The log end when taken: the state covers every batch below it."""
    data: bytes
    truncations: int
    """The log's :attr:`~headwater.storage.Log.truncations` when taken."""

    def write(self) -> bool:
        """Store it (blocking: an fsync); False if the log was truncated since it was taken."""
        return self.plog.write_producer_snapshot(
            self.offset, self.data, truncations=self.truncations
        )


def snapshot_now(
    producers: ProducerStateManager, txns: PartitionTransactions, plog: Log
) -> SnapshotWrite:
    """Both states as a producer snapshot at the log's end, not written yet (no I/O)."""
    return SnapshotWrite(
        plog, plog.log_end_offset, producer_snapshot.encode(producers, txns), plog.truncations
    )


def take_snapshot(producers: ProducerStateManager, txns: PartitionTransactions, plog: Log) -> int:
    """Write both states as the log's producer snapshot at its end, now; return that offset."""
    snapshot = snapshot_now(producers, txns, plog)
    snapshot.write()
    return snapshot.offset


def load_producer_state(
    producers: ProducerStateManager, txns: PartitionTransactions, plog: Log
) -> LoadedState:
    """Replace both states and the log's aborted-transaction indexes with what the log
    holds: from the newest readable snapshot and the ``.txnindex`` files when they are
    whole, replaying only the batches after the snapshot; from the whole log otherwise.

    On a read error of the log itself both states are left empty (every producer is
    unknown, every transaction reads as committed until the next load), and it is logged.
    """
    start = _restore_snapshot(producers, txns, plog)
    if start is None:
        producers.clear()
        txns.open.clear()
        txns.epochs.clear()
        txns.ended.clear()
    plog.reset_aborted_from(start or 0)
    seen = 0
    try:
        seen = _replay(producers, txns, plog, start or 0)
    except (OSError, errors.HeadwaterError) as exc:
        log.warning("cannot rebuild the producer state of %s: %s", plog, errors.describe(exc))
        producers.clear()
        txns.open.clear()
        txns.epochs.clear()
        txns.ended.clear()
    return LoadedState(start, seen)


def _restore_snapshot(
    producers: ProducerStateManager, txns: PartitionTransactions, plog: Log
) -> int | None:
    """Restore the newest whole snapshot; its offset, or None (replay everything)."""
    if not plog.aborted_indexes_valid():
        log.warning("%s: a .txnindex is damaged; rebuilding from the whole log", plog)
        return None
    for offset in reversed(plog.producer_snapshots()):
        data = plog.read_producer_snapshot(offset)
        try:
            if data is None:
                raise errors.CorruptRecordError("unreadable")
            snapshot = producer_snapshot.decode(data)
        except errors.CorruptRecordError as exc:
            log.warning("%s: producer snapshot at %d is damaged (%s)", plog, offset, exc)
            plog.delete_producer_snapshot(offset)
            continue
        snapshot.restore(producers, txns)
        return offset
    return None


def _replay(
    producers: ProducerStateManager, txns: PartitionTransactions, plog: Log, start: int
) -> int:
    seen = 0
    for segment in plog.segments:
        if segment.next_offset <= start:
            continue
        for _position, header in segment.iter_headers(0):
            if header.producer_id < 0 or header.last_offset < start:
                continue
            if not header.is_control:
                producers.update(
                    ProducerBatch(
                        header.producer_id,
                        header.producer_epoch,
                        header.base_sequence,
                        header.last_offset_delta,
                    ),
                    base_offset=header.base_offset,
                )
            if header.is_transactional:
                marker = None
                if header.is_control:
                    data = plog.read(header.base_offset, header.size_in_bytes).records
                    batch = next(iter(read_batches(bytes(data))), None)
                    marker = read_marker(batch) if batch is not None else None
                appended(txns, plog, header, header.base_offset, marker)
            seen += 1
    return seen


__all__ = [
    "ClientBatch",
    "ControlRecordType",
    "LoadedState",
    "SnapshotWrite",
    "appended",
    "check_marker",
    "inspect",
    "load_producer_state",
    "marker_batch",
    "snapshot_now",
    "take_snapshot",
    "written_marker",
]
