"""Leader appends and reads: offset assignment, epochs, segment rolls, read bounds.

Covers: offsets assigned from the log end offset by patching baseOffset, the
leader epoch stamped into each batch, round trips across many segments, a
read starting inside a batch, the max_offset (high watermark) bound,
max_bytes with and without min_one_batch, and out-of-range offsets.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from headwater.errors import OffsetOutOfRangeError
from headwater.records import read_batches
from headwater.storage import Log

from .helpers import batch, batch_bases, offsets_and_values, open_log, read_all


def test_offsets_are_assigned_from_the_log_end(log: Log) -> None:
    first = log.append_as_leader(batch(3), leader_epoch=0, now_ms=0)
    second = log.append_as_leader(batch(2, first=3), leader_epoch=0, now_ms=0)
    assert (first.first_offset, first.last_offset) == (0, 2)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert second.num_records == 2 and second.num_batches == 1
    assert log.log_end_offset == 5


def test_several_batches_in_one_append_get_consecutive_offsets(log: Log) -> None:
    info = log.append_as_leader(batch(2) + batch(3, first=2), leader_epoch=0, now_ms=0)
    assert (info.first_offset, info.last_offset, info.num_batches) == (0, 4, 2)
    assert batch_bases(log.read(0, 10_000).records) == [0, 2]


def test_leader_epoch_is_stamped_into_each_batch(log: Log) -> None:
    log.append_as_leader(batch(1), leader_epoch=7, now_ms=0)
    (stored,) = read_batches(log.read(0, 10_000).records)
    assert stored.partition_leader_epoch == 7
    assert log.latest_epoch == 7


def test_round_trip_across_segment_rolls(log: Log) -> None:
    for i in range(40):
        log.append_as_leader(batch(3, first=3 * i, size=30), leader_epoch=0, now_ms=0)
    assert len(log.segments) > 5
    assert read_all(log) == [(o, f"v{o}".encode()) for o in range(120)]
    names = sorted(p.name for p in log.dir.glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert [int(n[:20]) for n in names] == [s.base_offset for s in log.segments]


def test_read_from_inside_a_batch_returns_that_batch_first(log: Log) -> None:
    log.append_as_leader(batch(5), leader_epoch=0, now_ms=0)
    log.append_as_leader(batch(5, first=5), leader_epoch=0, now_ms=0)
    info = log.read(7, 10_000)
    assert batch_bases(info.records) == [5]
    assert info.fetch_offset == 7


def test_read_at_every_offset_starts_with_the_holding_batch(log: Log) -> None:
    for i in range(30):
        log.append_as_leader(batch(4, first=4 * i, size=20), leader_epoch=0, now_ms=0)
    for offset in range(120):
        bases = batch_bases(log.read(offset, 300).records)
        assert bases[0] == offset - offset % 4


def test_max_offset_stops_before_the_batch_holding_it(log: Log) -> None:
    for i in range(4):
        log.append_as_leader(batch(3, first=3 * i), leader_epoch=0, now_ms=0)
    assert batch_bases(log.read(0, 10_000, max_offset=6).records) == [0, 3]
    assert batch_bases(log.read(0, 10_000, max_offset=7).records) == [0, 3]
    assert log.read(6, 10_000, max_offset=6).records == b""
    assert log.read(0, 10_000, max_offset=0).records == b""


def test_a_read_at_the_high_watermark_reads_no_segment(
    log: Log, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An incremental fetch (KIP-227) reads every partition of its session: one whose
    consumer is at the high watermark costs no file read."""
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=0)
    preads: list[int] = []
    real_pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        preads.append(n)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting_pread)
    assert log.read(3, 10_000, max_offset=3).records == b""
    assert log.read(3, 10_000).records == b""  # the log end, as a follower reads it
    assert preads == []
    assert batch_bases(log.read(0, 10_000, max_offset=3).records) == [0]
    assert preads


def test_max_bytes_returns_whole_batches_only(log: Log) -> None:
    one = batch(3)
    for i in range(3):
        log.append_as_leader(batch(3, first=3 * i), leader_epoch=0, now_ms=0)
    data = log.read(0, 2 * len(one) + 10).records
    assert len(data) == 2 * len(one)


def test_min_one_batch_returns_a_batch_larger_than_max_bytes(log: Log) -> None:
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=0)
    assert batch_bases(log.read(0, 10).records) == [0]
    assert log.read(0, 10, min_one_batch=False).records == b""


def test_read_at_log_end_is_empty_and_beyond_is_out_of_range(log: Log) -> None:
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=0)
    assert log.read(3, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(4, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)


def test_read_below_log_start_is_out_of_range(log: Log) -> None:
    for i in range(3):
        log.append_as_leader(batch(3, first=3 * i), leader_epoch=0, now_ms=0)
    log.maybe_increment_log_start_offset(4)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1000)
    assert batch_bases(log.read(4, 1000).records)[0] == 3


def test_read_returns_the_stored_bytes_unchanged(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(4), leader_epoch=2, now_ms=0)
    stored = (log.dir / "00000000000000000000.log").read_bytes()
    assert log.read(0, 1 << 20).records == stored
    assert offsets_and_values(stored) == [(i, f"v{i}".encode()) for i in range(4)]
    log.close()


def test_size_in_bytes_sums_segments(log: Log) -> None:
    for i in range(20):
        log.append_as_leader(batch(3, first=3 * i, size=30), leader_epoch=0, now_ms=0)
    assert log.size_in_bytes == sum(p.stat().st_size for p in log.dir.glob("*.log"))
