"""One log segment: a ``.log`` file of whole RecordBatches plus its indexes.

A partition's log is a sequence of segments named by their base offset
(``00000000000000001500.log``), as in Kafka.  Only the last one (the active
segment) grows; older ones are read, truncated by recovery or deleted whole by
retention.  The segment only ever looks at batch *headers* (61 bytes each): it
writes the bytes it is given and hands back file bytes on read, so appending
and fetching cost system calls and memory copies, never per-record Python.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from headwater.errors import CorruptRecordError, KafkaStorageError
from headwater.records import HEADER_SIZE, BatchHeader, parse_header, verify_crc
from headwater.storage.index import OffsetIndex, TimeIndex
from headwater.storage.transactions import TXN_INDEX_SUFFIX, TransactionIndexFile

__all__ = ["INT32_MAX", "LogSegment", "segment_file_name"]

INT32_MAX = 2**31 - 1
_SCAN_CHUNK = 8192  # header scans after an index lookup cover ~index.interval.bytes
_RECOVER_CHUNK = 1 << 20


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000001500.log`` for base offset 1500 and suffix ``.log``."""
    return f"{base_offset:020d}{suffix}"


Buffer = bytes | bytearray | memoryview
_IOV_MAX = 1024


def _write_all(fd: int, pieces: Sequence[Buffer]) -> None:
    """``writev`` every piece, in order, resuming after short writes."""
    pending = [memoryview(p) for p in pieces]
    first = 0
    while first < len(pending):
        written = os.writev(fd, pending[first : first + _IOV_MAX])
        while written and first < len(pending):
            head = pending[first]
            if written >= len(head):
                written -= len(head)
                first += 1
            else:
                pending[first] = head[written:]
                written = 0
        while first < len(pending) and not len(pending[first]):
            first += 1


class LogSegment:
    """The ``.log``, ``.index``, ``.timeindex`` and ``.txnindex`` of one segment.

    Invariants: the ``.log`` holds whole, CRC-valid batches with strictly
    increasing offsets, all >= ``base_offset`` and < ``base_offset + 2**31``;
    ``size`` is the file size; ``next_offset`` is one past the last offset in
    the file (``base_offset`` when empty); the indexes only point into the file.

    Threads: a segment is owned by one :class:`~headwater.storage.log.Log`
    and every method is called under that log's lock; it has no lock of its own.
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_bytes: int,
        created_ms: int,
    ) -> None:
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, ".log")
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        index_path = directory / segment_file_name(base_offset, ".index")
        time_index_path = directory / segment_file_name(base_offset, ".timeindex")
        self._indexes_existed = index_path.exists() and time_index_path.exists()
        self.offset_index = OffsetIndex(
            index_path,
            base_offset,
            max_index_bytes=max_index_bytes,
        )
        self.time_index = TimeIndex(
            time_index_path,
            base_offset,
            max_index_bytes=max_index_bytes,
        )
        self.txn_index = TransactionIndexFile(
            directory / segment_file_name(base_offset, TXN_INDEX_SUFFIX), base_offset
        )
        """The transactions aborted by a marker in this segment (kept by the partition
        leader; see :mod:`headwater.storage.transactions`)."""
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.next_offset = base_offset
        self.max_timestamp = -1
        """Largest batch max timestamp in the segment (-1 if none)."""
        self.offset_of_max_timestamp = -1
        """Last offset of the first batch that reached ``max_timestamp``."""
        self.first_batch_timestamp: int | None = None
        """Max timestamp of the first batch: what ``segment.ms`` is measured from."""
        self._bytes_since_last_index_entry = 0

    # -- loading ---------------------------------------------------------------------------

    def load(self, *, last_offset_bound: int) -> bool:
        """Load and sanity-check the indexes, then scan the tail headers.

        Returns False (indexes left empty) if an index file is missing or
        damaged: the caller must then :meth:`recover` the segment to rebuild it.
        """
        if self.size and not self._indexes_existed:
            return False
        try:
            self.offset_index.load(self.size)
            self.time_index.load(last_offset_bound)
            self._load_tail()
        except CorruptRecordError:
            return False
        return True

    def _load_tail(self) -> None:
        """Recompute the in-memory state from the indexes and the headers after them."""
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        last_time = self.time_index.last_entry
        if last_time is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_time
        self.first_batch_timestamp = None
        if self.size >= HEADER_SIZE:
            self.first_batch_timestamp = parse_header(
                os.pread(self._fd, HEADER_SIZE, 0)
            ).max_timestamp
        position = self.offset_index.last_entry[1]
        self._bytes_since_last_index_entry = self.size - position if len(self.offset_index) else 0
        for _, header in self.iter_headers(position):
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            self.next_offset = header.next_offset
            if not len(self.offset_index):
                self._bytes_since_last_index_entry += header.size_in_bytes

    def recover(self) -> int:
        """Rescan the whole ``.log``: check every CRC, rebuild both indexes.

        Truncates the file at the first torn, corrupt or out-of-order batch and
        returns the number of bytes removed (0 if the segment was intact).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = -1, -1
        self.first_batch_timestamp = None
        self._bytes_since_last_index_entry = 0
        position = 0
        valid_end: int | None = None
        while position < self.size and valid_end is None:
            chunk = os.pread(self._fd, min(_RECOVER_CHUNK, self.size - position), position)
            offset = 0
            while valid_end is None and len(chunk) - offset >= HEADER_SIZE:
                here = position + offset
                try:
                    header = parse_header(chunk, offset)
                except CorruptRecordError:
                    valid_end = here
                    break
                size = header.size_in_bytes
                if (
                    here + size > self.size
                    or header.base_offset < self.next_offset
                    or header.last_offset_delta < 0
                    or header.last_offset - self.base_offset > INT32_MAX
                ):
                    valid_end = here
                    break
                if offset + size > len(chunk):
                    if offset:
                        break  # read the next chunk from this batch on
                    buf, at = os.pread(self._fd, size, here), 0
                else:
                    buf, at = chunk, offset
                try:
                    verify_crc(buf, at, header)
                except CorruptRecordError:
                    valid_end = here
                    break
                self._index_batch(here, header)
                offset += size
            if valid_end is None and offset == 0:
                valid_end = position  # fewer than HEADER_SIZE bytes left: a torn header
            position += offset
        if valid_end is None:
            return 0
        removed = self.size - valid_end
        os.ftruncate(self._fd, valid_end)
        self.size = valid_end
        return removed

    # -- appending -------------------------------------------------------------------------

    def append(
        self, pieces: Sequence[Buffer], size: int, batches: Sequence[tuple[int, BatchHeader]]
    ) -> None:
        """Write ``pieces`` (``size`` bytes of whole batches, in order) at the end; index them.

        The pieces are gathered by one ``writev``, so a caller can patch batch
        headers without copying the batch bodies.  ``batches`` are
        ``(position within the written bytes, header with final offsets)``.
        On an I/O error the file is cut back to its old size and
        KafkaStorageError is raised.
        """
        start = self.size
        try:
            _write_all(self._fd, pieces)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, start)
            raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc
        for position, header in batches:
            self._index_batch(start + position, header)
        self.size = start + size

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.size_in_bytes
        self.next_offset = header.next_offset

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_batches: int) -> int:
        """Kafka's measure for ``segment.ms``: batch time since the first batch, else age."""
        if self.first_batch_timestamp is not None and self.first_batch_timestamp >= 0:
            return max_timestamp_in_batches - self.first_batch_timestamp
        return now_ms - self.created_ms

    @property
    def indexes_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def on_become_inactive(self) -> None:
        """Called on roll: make the last time index entry the segment's max timestamp."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    # -- reading ---------------------------------------------------------------------------

    def iter_headers(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of each batch from ``position`` (a batch start) on."""
        end = self.size
        while end - position >= HEADER_SIZE:
            chunk = os.pread(self._fd, min(_SCAN_CHUNK, end - position), position)
            offset = 0
            while len(chunk) - offset >= HEADER_SIZE:
                header = parse_header(chunk, offset)
                yield position + offset, header
                offset += header.size_in_bytes
            position += offset

    def translate_offset(self, target_offset: int) -> tuple[int, BatchHeader] | None:
        """``(position, header)`` of the first batch whose last offset >= target, or None."""
        hint = self.offset_index.lookup_at_or_after(target_offset)
        if hint is not None:
            header = parse_header(os.pread(self._fd, HEADER_SIZE, hint))
            if header.base_offset <= target_offset:
                return hint, header
        for position, header in self.iter_headers(self.offset_index.lookup(target_offset)):
            if header.last_offset >= target_offset:
                return position, header
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None,
        min_one_batch: bool,
    ) -> tuple[bytes, bool]:
        """Whole batches from the one holding ``start_offset``; ``(bytes, reached_end)``.

        Stops before a batch whose last offset >= ``max_offset``, or that would
        take the total past ``max_bytes`` (except the first batch when
        ``min_one_batch``).  ``reached_end`` is True when the read stopped only
        because this segment had no more batches (the caller may continue
        with the next segment).
        """
        found = self.translate_offset(start_offset)
        if found is None:
            return b"", True
        position, first = found
        if max_offset is not None and first.last_offset >= max_offset:
            return b"", False
        first_size = first.size_in_bytes
        if first_size > max_bytes:
            if not min_one_batch:
                return b"", False
            want = first_size
        else:
            want = min(max_bytes, self.size - position)
        data = os.pread(self._fd, want, position)
        end = first_size
        while len(data) - end >= HEADER_SIZE:
            header = parse_header(data, end)
            if end + header.size_in_bytes > len(data):
                break
            if max_offset is not None and header.last_offset >= max_offset:
                return data[:end], False
            end += header.size_in_bytes
        reached_end = position + end == self.size
        return (data if end == len(data) else data[:end]), reached_end

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        """The bytes of the one batch at ``position``."""
        return os.pread(self._fd, header.size_in_bytes, position)

    def find_batch_by_timestamp(
        self, timestamp: int, start_offset: int
    ) -> tuple[int, BatchHeader] | None:
        """First batch with max timestamp >= ``timestamp`` and last offset >= ``start_offset``."""
        if self.max_timestamp < timestamp:
            return None
        before = self.time_index.lookup_before(timestamp)
        position = self.offset_index.lookup_entry(before) if before is not None else 0
        for pos, header in self.iter_headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                return pos, header
        return None

    @property
    def largest_timestamp(self) -> int:
        """Newest batch timestamp, or the file's mtime for a segment without timestamps."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self._fd).st_mtime * 1000)

    # -- changing and removing -------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, header = found
        removed = self.size - position
        os.ftruncate(self._fd, position)
        self.size = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self._load_tail()
        return removed

    def flush(self) -> None:
        """fsync the log and its indexes."""
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        if self.txn_index.entries:
            self.txn_index.flush()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.offset_index.close()
        self.time_index.close()

    def delete(self) -> None:
        """Close and remove the segment's files."""
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
