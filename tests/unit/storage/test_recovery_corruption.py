"""Crash recovery of corrupted files: bad bytes truncate at that batch; indexes are rebuilt.

Covers: a flipped byte in a batch body (CRC mismatch), in its header (magic,
length), offsets going backwards, each truncating the log at that batch and
keeping every batch before it; missing, torn and nonsensical index files
rebuilt even after a clean shutdown, with reads and timestamp lookups correct.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from headwater.storage import Log, LogConfig, TimestampAndOffset

from .helpers import batch, read_all

CONFIG = LogConfig(segment_bytes=100_000, index_interval_bytes=50)
LOG_FILE = "00000000000000000000.log"


def _build(directory: Path) -> list[int]:
    """8 batches of 3 records (timestamps 1000 + 10*batch); return each batch's start."""
    log = Log.open(directory, CONFIG, now_ms=0)
    starts = []
    for i in range(8):
        starts.append(log.size_in_bytes)
        log.append_as_leader(
            batch(3, first=3 * i, size=40, timestamp_ms=1000 + 10 * i), leader_epoch=0, now_ms=0
        )
    log.close()
    return starts


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("where", [70, 100, -1])  # inside the records; -1: last byte
@pytest.mark.parametrize("victim", [0, 3, 7])
def test_flipped_body_byte_truncates_at_that_batch(tmp_path: Path, victim: int, where: int) -> None:
    directory = tmp_path / "orders-0"
    starts = _build(directory)
    end = starts[victim + 1] if victim + 1 < len(starts) else (directory / LOG_FILE).stat().st_size
    _flip(directory / LOG_FILE, end - 1 if where == -1 else starts[victim] + where)
    log = Log.open(directory, CONFIG, now_ms=0)
    assert log.log_end_offset == 3 * victim
    assert [o for o, _ in read_all(log)] == list(range(3 * victim))
    assert (directory / LOG_FILE).stat().st_size == starts[victim]
    log.close()


@pytest.mark.parametrize("field_position", [8, 16, 17, 21])  # length, magic, crc, attributes
def test_flipped_header_byte_truncates_at_that_batch(tmp_path: Path, field_position: int) -> None:
    directory = tmp_path / "orders-0"
    starts = _build(directory)
    _flip(directory / LOG_FILE, starts[5] + field_position)
    log = Log.open(directory, CONFIG, now_ms=0)
    assert log.log_end_offset == 15
    log.close()


def test_offsets_going_backwards_truncate(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    starts = _build(directory)
    data = bytearray((directory / LOG_FILE).read_bytes())
    struct.pack_into(">q", data, starts[4], 2)  # baseOffset is outside the CRC
    (directory / LOG_FILE).write_bytes(bytes(data))
    log = Log.open(directory, CONFIG, now_ms=0)
    assert log.log_end_offset == 12
    log.close()


def _check_intact(log: Log) -> None:
    assert [o for o, _ in read_all(log)] == list(range(24))
    assert log.fetch_offset_by_timestamp(1045) == TimestampAndOffset(1050, 15, 0)
    for offset in range(24):
        assert log.read(offset, 100).records[:8] == struct.pack(">q", offset - offset % 3)


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_deleted_index_is_rebuilt_after_clean_shutdown(tmp_path: Path, suffix: str) -> None:
    directory = tmp_path / "orders-0"
    _build(directory)
    original = (directory / f"00000000000000000000{suffix}").read_bytes()
    assert original
    (directory / f"00000000000000000000{suffix}").unlink()
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=24, had_clean_shutdown=True)
    assert log.load_info.indexes_rebuilt == 1
    assert (directory / f"00000000000000000000{suffix}").read_bytes() == original
    _check_intact(log)
    log.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00",  # not a whole entry
        struct.pack(">ii", 5, 100) + struct.pack(">ii", 3, 200),  # offsets out of order
        struct.pack(">ii", 1, 10**6),  # position beyond the log
    ],
)
def test_corrupt_offset_index_is_rebuilt(tmp_path: Path, garbage: bytes) -> None:
    directory = tmp_path / "orders-0"
    _build(directory)
    original = (directory / "00000000000000000000.index").read_bytes()
    (directory / "00000000000000000000.index").write_bytes(garbage)
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=24, had_clean_shutdown=True)
    assert log.load_info.indexes_rebuilt == 1
    assert (directory / "00000000000000000000.index").read_bytes() == original
    _check_intact(log)
    log.close()


def test_corrupt_time_index_is_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    _build(directory)
    path = directory / "00000000000000000000.timeindex"
    path.write_bytes(struct.pack(">qi", 5000, 1) + struct.pack(">qi", 4000, 2))
    log = Log.open(directory, CONFIG, now_ms=0, recovery_point=24, had_clean_shutdown=True)
    assert log.load_info.indexes_rebuilt == 1
    _check_intact(log)
    log.close()


def test_stray_files_are_removed_on_open(tmp_path: Path) -> None:
    directory = tmp_path / "orders-0"
    _build(directory)
    (directory / "00000000000000000099.index").write_bytes(b"")
    (directory / "leader-epoch-checkpoint.tmp").write_bytes(b"junk")
    log = Log.open(directory, CONFIG, now_ms=0)
    assert not (directory / "00000000000000000099.index").exists()
    assert not (directory / "leader-epoch-checkpoint.tmp").exists()
    assert os.path.exists(directory / "leader-epoch-checkpoint")
    log.close()
