"""Sparse offset and time indexes of one log segment (Kafka's ``.index``/``.timeindex``).

A segment's ``.log`` is only readable sequentially; the indexes let a read or a
timestamp lookup jump close to the right batch and scan a few headers from
there.  Entries are added at most once per ``index.interval.bytes`` of log, so
the indexes stay small (a 1 GiB segment at 4 KiB needs ~2 MiB of ``.index``).

File layout (big-endian, as Kafka's)::

    .index      entry = relativeOffset int32 | position int32            (8 bytes)
    .timeindex  entry = timestamp int64      | relativeOffset int32      (12 bytes)

where ``relativeOffset = offset - segment base offset``.  Kafka preallocates
and mmaps these files; Headwater keeps the entries in memory (``array``) and
appends each new entry to the file with one ``write``, which is as durable as
the ``.log`` bytes it describes (both reach disk at the next flush).  Loading
runs Kafka's sanity check and a failing index is rebuilt from the log.
"""

from __future__ import annotations

import array
import bisect
import os
import struct
import sys
from pathlib import Path

from headwater.errors import CorruptRecordError

__all__ = ["OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">ii")  # relativeOffset int32, position int32
_TIME_ENTRY = struct.Struct(">qi")  # timestamp int64, relativeOffset int32
_LITTLE = sys.byteorder == "little"


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


class _IndexFile:
    """The append-only file under an index; entries are whole ``entry_size`` records."""

    def __init__(self, path: Path, entry_size: int, max_index_bytes: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self.max_entries = max(max_index_bytes // entry_size, 1)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, data: bytes) -> None:
        os.write(self._fd, data)

    def truncate_entries(self, count: int) -> None:
        os.ftruncate(self._fd, count * self.entry_size)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex:
    """Maps offsets to file positions in one segment's ``.log``.

    Invariants: relative offsets and positions are strictly increasing; every
    entry ``(offset, position)`` says the batch starting at ``position`` holds
    ``offset`` as its last offset, so a lookup for ``target`` returns a position
    at or before the batch holding ``target``.  Not thread-safe: only the owning
    segment calls it, under the log's lock.
    """

    ENTRY_SIZE = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, *, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self._file = _IndexFile(path, self.ENTRY_SIZE, max_index_bytes)
        self._offsets = array.array("i")
        self._positions = array.array("i")

    @property
    def path(self) -> Path:
        return self._file.path

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def is_full(self) -> bool:
        return len(self._offsets) >= self._file.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(offset, position)`` of the last entry, ``(base_offset, 0)`` when empty."""
        if not self._offsets:
            return self.base_offset, 0
        return self.base_offset + self._offsets[-1], self._positions[-1]

    def load(self, segment_size: int) -> None:
        """Read the file and sanity-check it; raises CorruptRecordError if it is damaged."""
        data = _read_file(self.path)
        if len(data) % self.ENTRY_SIZE:
            raise CorruptRecordError(f"{self.path}: size {len(data)} is not a whole entry")
        pairs = array.array("i", data)
        if _LITTLE:
            pairs.byteswap()
        offsets, positions = pairs[0::2], pairs[1::2]
        for i in range(len(offsets)):
            bad = offsets[i] < 0 or not 0 <= positions[i] < max(segment_size, 1)
            if i and (offsets[i] <= offsets[i - 1] or positions[i] <= positions[i - 1]):
                bad = True
            if bad:
                raise CorruptRecordError(f"{self.path}: entry {i} is out of order or range")
        self._offsets, self._positions = offsets, positions

    def append(self, offset: int, position: int) -> None:
        """Add an entry; the caller keeps both columns increasing and checks ``is_full``."""
        relative = offset - self.base_offset
        self._file.write(_OFFSET_ENTRY.pack(relative, position))
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> int:
        """Position of the last indexed batch whose last offset is < ``target_offset`` (or 0).

        Scanning batch headers from there finds the batch holding the target.
        """
        i = bisect.bisect_left(self._offsets, target_offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def lookup_at_or_after(self, target_offset: int) -> int | None:
        """Position of the first entry with offset >= ``target_offset`` (None if none).

        That batch holds the target when its base offset is <= the target,
        which is the usual case for a consumer reading batch after batch.
        """
        i = bisect.bisect_left(self._offsets, target_offset - self.base_offset)
        return self._positions[i] if i < len(self._positions) else None

    def lookup_entry(self, target_offset: int) -> int:
        """Position of the last entry with offset <= ``target_offset`` (or 0)."""
        i = bisect.bisect_right(self._offsets, target_offset - self.base_offset) - 1
        return self._positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop entries pointing at ``position`` or later (the log is cut there)."""
        keep = bisect.bisect_left(self._positions, position)
        if keep < len(self._positions):
            del self._offsets[keep:]
            del self._positions[keep:]
            self._file.truncate_entries(keep)

    def reset(self) -> None:
        """Drop every entry (before a rebuild); also clears a damaged file."""
        del self._offsets[:]
        del self._positions[:]
        self._file.truncate_entries(0)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()


class TimeIndex:
    """Maps timestamps to offsets in one segment.

    Invariants: timestamps and relative offsets are strictly increasing; an
    entry ``(ts, offset)`` says the largest timestamp in the segment up to and
    including the batch ending at ``offset`` is ``ts``, and that this batch is
    the first to reach it.  So no record before ``offset`` has a timestamp
    above ``ts``.  Not thread-safe: only the owning segment calls it, under the
    log's lock.
    """

    ENTRY_SIZE = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, *, max_index_bytes: int) -> None:
        self.base_offset = base_offset
        self._file = _IndexFile(path, self.ENTRY_SIZE, max_index_bytes)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []

    @property
    def path(self) -> Path:
        return self._file.path

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self._file.max_entries

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the last entry, or None."""
        if not self._timestamps:
            return None
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def load(self, last_offset: int) -> None:
        """Read and sanity-check the file; raises CorruptRecordError if it is damaged."""
        data = _read_file(self.path)
        if len(data) % self.ENTRY_SIZE:
            raise CorruptRecordError(f"{self.path}: size {len(data)} is not a whole entry")
        timestamps: list[int] = []
        offsets: list[int] = []
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            if rel < 0 or rel > last_offset - self.base_offset:
                raise CorruptRecordError(f"{self.path}: offset {rel} beyond the segment")
            if timestamps and (ts <= timestamps[-1] or rel <= offsets[-1]):
                raise CorruptRecordError(f"{self.path}: entries out of order")
            timestamps.append(ts)
            offsets.append(rel)
        self._timestamps, self._offsets = timestamps, offsets

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is newer than the last one (Kafka's ``maybeAppend``)."""
        relative = offset - self.base_offset
        if self._timestamps and (
            timestamp <= self._timestamps[-1] or relative <= self._offsets[-1]
        ):
            return
        self._file.write(_TIME_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)

    def lookup_before(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is < ``timestamp`` (None if none).

        Every record at or before that offset is older than ``timestamp``.
        """
        i = bisect.bisect_left(self._timestamps, timestamp) - 1
        return self.base_offset + self._offsets[i] if i >= 0 else None

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        keep = bisect.bisect_left(self._offsets, offset - self.base_offset)
        if keep < len(self._offsets):
            del self._timestamps[keep:]
            del self._offsets[keep:]
            self._file.truncate_entries(keep)

    def reset(self) -> None:
        """Drop every entry (before a rebuild); also clears a damaged file."""
        self._timestamps, self._offsets = [], []
        self._file.truncate_entries(0)

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def delete(self) -> None:
        self._file.delete()
