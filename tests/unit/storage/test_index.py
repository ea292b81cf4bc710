"""OffsetIndex and TimeIndex: file layout, lookups, sanity checks, truncation.

Covers: Kafka's big-endian entry layout (int32/int32 and int64/int32), the
lookups the segment relies on, maybe_append skipping non-increasing
timestamps, load rejecting torn or out-of-order files, truncation of the
in-memory entries and the file, and the full flag.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from headwater.errors import CorruptRecordError
from headwater.storage.index import OffsetIndex, TimeIndex


def test_offset_index_layout_and_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100, max_index_bytes=1024)
    index.append(104, 0)
    index.append(110, 500)
    index.append(120, 900)
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiiiii", 4, 0, 10, 500, 20, 900)
    assert index.lookup(104) == 0  # no entry ends before 104
    assert index.lookup(111) == 500
    assert index.lookup(121) == 900
    assert index.lookup_entry(110) == 500
    assert index.lookup_entry(109) == 0
    assert index.lookup_at_or_after(105) == 500
    assert index.lookup_at_or_after(110) == 500
    assert index.lookup_at_or_after(121) is None
    index.close()


def test_offset_index_load_and_sanity(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">iiii", 1, 0, 5, 80))
    index = OffsetIndex(path, 0, max_index_bytes=1024)
    index.load(segment_size=100)
    assert index.last_entry == (5, 80)
    index.close()
    for bad in (b"\x00" * 7, struct.pack(">iiii", 5, 0, 1, 80), struct.pack(">ii", 1, 100)):
        path.write_bytes(bad)
        index = OffsetIndex(path, 0, max_index_bytes=1024)
        with pytest.raises(CorruptRecordError):
            index.load(segment_size=100)
        index.close()


def test_offset_index_truncate_and_full(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_bytes=24)
    for i in range(3):
        index.append(i * 10, i * 100)
    assert index.is_full
    index.truncate_to_position(100)
    assert len(index) == 1 and not index.is_full
    assert (tmp_path / "x.index").stat().st_size == 8
    index.close()


def test_time_index_layout_lookup_and_monotonicity(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 100, max_index_bytes=1024)
    index.maybe_append(1000, 105)
    index.maybe_append(1000, 107)  # not newer: skipped
    index.maybe_append(2000, 110)
    assert (tmp_path / "x.timeindex").read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 10)
    assert index.lookup_before(1000) is None
    assert index.lookup_before(1001) == 105
    assert index.lookup_before(5000) == 110
    index.truncate_to_offset(110)
    assert index.last_entry == (1000, 105)
    index.close()


def test_time_index_load_rejects_bad_files(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    for bad in (b"\x01" * 13, struct.pack(">qiqi", 2000, 1, 1000, 2), struct.pack(">qi", 1, 99)):
        path.write_bytes(bad)
        index = TimeIndex(path, 0, max_index_bytes=1024)
        with pytest.raises(CorruptRecordError):
            index.load(last_offset=50)
        index.close()
