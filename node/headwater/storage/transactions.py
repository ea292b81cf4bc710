"""A partition's transactions: open ones, the last stable offset, the aborted-transaction index.

Kafka keeps this in ``ProducerStateManager`` (the open transactions per producer) and in
each segment's ``.txnindex`` (``TransactionIndex``: the transactions aborted in that
segment).  :class:`PartitionTransactions` is fed every appended batch in offset order,
and returns an :class:`AbortedTxn` for each abort marker that ends an open transaction;
the caller appends it to the :class:`TransactionIndexFile` of the segment the marker
landed in (the ``.txnindex`` beside the segment's ``.log``).  :func:`rebuild` does the
same over a whole log, which is how recovery rebuilds the indexes when a file is bad.

An abort is indexed in the segment of its *marker*, which is never older than the
transaction's data: retention deletes whole segments oldest first, so while any record
of an aborted transaction remains, so does the segment holding its index entry, and a
READ_COMMITTED fetch of the remaining records still learns that they were aborted.

Rules (Kafka's, with KIP-890's epoch bump at every transaction end):

* a producer's transaction opens at the first transactional batch it writes to the
  partition and ends at its next control batch (COMMIT or ABORT marker);
* the *last stable offset* (LSO) is the first offset of the earliest open transaction,
  raised to the log start offset and capped at the high watermark; a READ_COMMITTED
  fetch serves nothing at or past it;
* each aborted transaction is indexed as (producer id, first offset, last offset = the
  marker's offset, the LSO once it ended), so a fetch can name the aborted
  transactions its range overlaps (:meth:`TransactionIndex.collect`);
* a marker repeating the one that ended the producer's last transaction here (same
  type, same epoch, nothing opened since) is a retry of WriteTxnMarkers: it is answered
  with the first one's offset and never appended again
  (:meth:`PartitionTransactions.written_marker`);
* a batch or marker older than the producer's latest epoch in this partition is refused
  INVALID_PRODUCER_EPOCH: after a marker at epoch E + 1, a late write of the ended
  transaction (epoch E) cannot reopen it; a non-transactional batch from a producer
  with a transaction open is INVALID_TXN_STATE.

``.txnindex`` entry, big-endian, 34 bytes (Kafka's ``AbortedTxn``)::

    version            int16 = 0
    producer_id        int64
    first_offset       int64
    last_offset        int64
    last_stable_offset int64
"""

from __future__ import annotations

import bisect
import contextlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from headwater.errors import CorruptRecordError, ErrorCode
from headwater.records.batch import Batch
from headwater.records.control import ControlRecordType, EndTransactionMarker, read_marker
from headwater.records.header import BatchHeader

__all__ = [
    "TXN_INDEX_SUFFIX",
    "AbortedTxn",
    "PartitionTransactions",
    "TransactionIndex",
    "TransactionIndexFile",
    "decode_aborted",
    "encode_aborted",
    "rebuild",
]

TXN_INDEX_SUFFIX = ".txnindex"
ABORTED_TXN_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    """One aborted transaction in one partition (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    """The offset of the ABORT marker."""
    last_stable_offset: int
    """The partition's LSO right after the abort marker."""


def encode_aborted(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(ABORTED_TXN_VERSION, *e) for e in entries)


def decode_aborted(data: bytes) -> list[AbortedTxn]:
    """The entries of a ``.txnindex``; CorruptRecordError for a partial or unknown entry."""
    if len(data) % ENTRY_SIZE:
        raise CorruptRecordError(
            f".txnindex of {len(data)} bytes is not a whole number of {ENTRY_SIZE}-byte entries"
        )
    out = []
    for pos in range(0, len(data), ENTRY_SIZE):
        version, *fields = _ENTRY.unpack_from(data, pos)
        if version != ABORTED_TXN_VERSION:
            raise CorruptRecordError(f".txnindex entry {pos // ENTRY_SIZE}: version {version}")
        entry = AbortedTxn(*fields)
        if entry.last_offset < entry.first_offset:
            raise CorruptRecordError(
                f".txnindex entry {pos // ENTRY_SIZE}: last offset {entry.last_offset} "
                f"before first offset {entry.first_offset}"
            )
        out.append(entry)
    return out


class TransactionIndex:
    """The transactions aborted in one segment, in the order of their markers."""

    def __init__(self, entries: Iterable[AbortedTxn] = ()) -> None:
        self.entries: list[AbortedTxn] = []
        for e in entries:
            self.append(e)

    def append(self, entry: AbortedTxn) -> None:
        """Add an abort; markers are appended in offset order, so last offsets increase."""
        if self.entries and entry.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} does not follow the one "
                f"ending at {self.entries[-1].last_offset}"
            )
        self.entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborts overlapping ``[fetch_offset, upper_bound_offset)``, and whether the
        search may stop at this segment (an entry's LSO reached the bound, so no later
        segment can hold an abort of a transaction that started before it)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound_offset:
                found.append(e)
                if e.last_stable_offset >= upper_bound_offset:
                    return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Drop the aborts whose marker is at or after ``offset`` (the log was cut there)."""
        keep = bisect.bisect_left([e.last_offset for e in self.entries], offset)
        del self.entries[keep:]

    def to_bytes(self) -> bytes:
        return encode_aborted(self.entries)

    @classmethod
    def from_bytes(cls, data: bytes) -> TransactionIndex:
        return cls(decode_aborted(data))


class TransactionIndexFile:
    """A segment's ``.txnindex``: its :class:`TransactionIndex`, kept in step with the file.

    Each abort is appended to the file as its marker lands (34 bytes, written but not
    fsynced: the file is redone from the log whenever it cannot be trusted).  ``valid``
    is False when the file found on opening could not be read whole (a partial entry,
    an unknown version, entries out of order or outside ``[base_offset, ...)``): the
    index is then empty and the owner must rebuild it (:meth:`reset`) before using it.
    """

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.index = TransactionIndex()
        self.valid = True
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        try:
            index = TransactionIndex.from_bytes(data)
        except (CorruptRecordError, ValueError):
            self.valid = False
            return
        if index.entries and index.entries[0].last_offset < base_offset:
            self.valid = False
            return
        self.index = index

    @property
    def entries(self) -> list[AbortedTxn]:
        return self.index.entries

    def append(self, entry: AbortedTxn) -> None:
        """Index an abort whose marker is in this segment."""
        if entry.last_offset < self.base_offset:
            raise ValueError(
                f"abort marker at {entry.last_offset} is before segment {self.base_offset}"
            )
        self.index.append(entry)
        with open(self.path, "ab") as f:
            f.write(encode_aborted([entry]))

    def truncate_to(self, offset: int) -> None:
        """Drop the aborts whose marker is at or after ``offset``."""
        before = len(self.index.entries)
        self.index.truncate_to(offset)
        if len(self.index.entries) != before:
            self._rewrite()

    def reset(self, entries: Iterable[AbortedTxn] = ()) -> None:
        """Replace the index and its file (a rebuild from the log)."""
        self.index = TransactionIndex(entries)
        self.valid = True
        self._rewrite()

    def _rewrite(self) -> None:
        if not self.index.entries:
            self.delete()
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(self.index.to_bytes())
        os.replace(tmp, self.path)

    def flush(self) -> None:
        """fsync the file, if there is one."""
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as f:
            os.fsync(f.fileno())

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


def collect_aborted(
    indexes: Iterable[TransactionIndex], fetch_offset: int, upper_bound_offset: int
) -> list[AbortedTxn]:
    """The aborted transactions a READ_COMMITTED fetch of ``[fetch_offset, upper_bound)``
    must name, from the indexes of the segments from the one holding ``fetch_offset`` on."""
    out: list[AbortedTxn] = []
    for index in indexes:
        found, complete = index.collect(fetch_offset, upper_bound_offset)
        out += found
        if complete:
            break
    return out


class PartitionTransactions:
    """The open transactions of one partition and the epochs of its transactional producers."""

    def __init__(self) -> None:
        self.open: dict[int, int] = {}
        """producer id -> first offset of its open transaction, in first-offset order."""
        self.epochs: dict[int, int] = {}
        """producer id -> the latest epoch it wrote with (data or marker)."""
        self.ended: dict[int, tuple[int, bool, int]] = {}
        """producer id -> (epoch, committed, offset) of the marker that ended its last
        transaction here."""

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction (None: none is open)."""
        return min(self.open.values(), default=None)

    def last_stable_offset(self, high_watermark: int, log_start_offset: int = 0) -> int:
        """The LSO: no READ_COMMITTED reader may see this offset or anything after it.

        Never below the log start offset (Kafka's ``maybeIncrementFirstUnstableOffset``):
        when retention or DeleteRecords removed the start of an open transaction, the LSO
        is the first offset left, so READ_COMMITTED offsets stay inside the log."""
        first = self.first_unstable_offset
        if first is None:
            return high_watermark
        return min(max(first, log_start_offset), high_watermark)

    def written_marker(self, producer_id: int, producer_epoch: int, committed: bool) -> int | None:
        """The offset of this very marker if it is already in the log: the producer has
        nothing open here and its last marker had this type and epoch (else None)."""
        if producer_id in self.open:
            return None
        ended = self.ended.get(producer_id)
        if ended is None or ended[:2] != (producer_epoch, committed):
            return None
        return ended[2]

    def check_append(
        self, producer_id: int, producer_epoch: int, *, is_transactional: bool, is_control: bool
    ) -> ErrorCode:
        """Whether a batch may be appended, before it is (see the module's rules)."""
        if producer_id < 0:
            if is_transactional or is_control:
                return ErrorCode.INVALID_RECORD  # a transaction needs a producer id
            return ErrorCode.NONE
        known = self.epochs.get(producer_id)
        if known is not None and producer_epoch < known:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if not is_transactional and not is_control and producer_id in self.open:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def append(self, header: BatchHeader, marker: EndTransactionMarker | None) -> AbortedTxn | None:
        """Account for an appended batch (``marker``: what its control record says).

        Returns the index entry when it is an ABORT marker ending an open transaction.  A
        marker for a producer with nothing open (written twice, or after an abort with
        no data here) ends nothing and is not indexed.
        """
        pid = header.producer_id
        if pid < 0:
            return None
        self.epochs[pid] = max(self.epochs.get(pid, header.producer_epoch), header.producer_epoch)
        if not header.is_control:
            if header.is_transactional and pid not in self.open:
                self.open[pid] = header.base_offset
            return None
        first = self.open.pop(pid, None)
        if marker is not None:
            committed = marker.type is ControlRecordType.COMMIT
            self.ended[pid] = (header.producer_epoch, committed, header.base_offset)
        if first is None or marker is None or marker.type is not ControlRecordType.ABORT:
            return None
        marker_offset = header.base_offset
        lso = self.first_unstable_offset
        return AbortedTxn(pid, first, marker_offset, marker_offset + 1 if lso is None else lso)

    def append_batch(self, batch: Batch) -> AbortedTxn | None:
        """:meth:`append` for a batch read from the log (the marker decoded from it)."""
        return self.append(batch.header, read_marker(batch))


def rebuild(
    segments: Iterable[tuple[int, Iterable[Batch]]],
) -> tuple[PartitionTransactions, dict[int, TransactionIndex]]:
    """Replay a log's batches, segment by segment (``(base offset, batches)`` in order):
    the open transactions at its end and every segment's aborted-transaction index."""
    state = PartitionTransactions()
    indexes: dict[int, TransactionIndex] = {}
    for base_offset, batches in segments:
        index = indexes[base_offset] = TransactionIndex()
        for batch in batches:
            aborted = state.append_batch(batch)
            if aborted is not None:
                index.append(aborted)
    return state, indexes
