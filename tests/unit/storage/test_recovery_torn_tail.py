"""Crash recovery of a log cut short: every cut point keeps exactly the complete batches.

Covers: truncating the ``.log`` every few bytes across several batches (torn
headers and torn bodies), the recovered log holding exactly the batches that
were complete and accepting appends again; a tear in an older segment
deleting the later segments; recovery starting from the recovery point.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from headwater.storage import Log, LogConfig

from .helpers import batch, read_all

CONFIG = LogConfig(segment_bytes=100_000, index_interval_bytes=50)


def _build(directory: Path) -> list[int]:
    """Write 6 batches of 3 records; return the end position of each batch."""
    log = Log.open(directory, CONFIG, now_ms=0)
    ends = []
    for i in range(6):
        log.append_as_leader(batch(3, first=3 * i, size=10 + 7 * i), leader_epoch=i % 2, now_ms=0)
        ends.append(log.size_in_bytes)
    log.close()
    return ends


def test_every_cut_point_keeps_the_complete_batches(tmp_path: Path) -> None:
    original = tmp_path / "orders-0"
    ends = _build(original)
    for cut in range(0, ends[-1] + 1, 5):
        crashed = tmp_path / "crash" / "orders-0"
        shutil.rmtree(crashed.parent, ignore_errors=True)
        shutil.copytree(original, crashed)
        os.truncate(crashed / "00000000000000000000.log", cut)
        log = Log.open(crashed, CONFIG, now_ms=0)  # no clean shutdown: full recovery
        complete = sum(1 for end in ends if end <= cut)
        assert log.log_end_offset == 3 * complete, cut
        assert read_all(log) == [(o, f"v{o}".encode()) for o in range(3 * complete)]
        assert log.size_in_bytes == (ends[complete - 1] if complete else 0)
        assert log.load_info.bytes_truncated == cut - log.size_in_bytes
        # epochs of the vanished batches are gone from the cache too
        assert all(e.start_offset < log.log_end_offset for e in log.epoch_cache.entries)
        info = log.append_as_leader(batch(1), leader_epoch=9, now_ms=0)
        assert info.first_offset == 3 * complete
        log.close()


def test_a_tear_in_an_older_segment_deletes_later_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, index_interval_bytes=50)
    log = Log.open(tmp_path / "orders-0", config, now_ms=0)
    for i in range(20):
        log.append_as_leader(batch(2, first=2 * i, size=30), leader_epoch=0, now_ms=0)
    bases = [s.base_offset for s in log.segments]
    log.close()
    assert len(bases) >= 4
    second = tmp_path / "orders-0" / f"{bases[1]:020d}.log"
    os.truncate(second, second.stat().st_size - 1)
    recovered = Log.open(tmp_path / "orders-0", config, now_ms=0)
    assert [s.base_offset for s in recovered.segments] == bases[:2]
    assert recovered.load_info.segments_deleted == len(bases) - 2
    assert [o for o, _ in read_all(recovered)] == list(range(recovered.log_end_offset))
    assert bases[1] < recovered.log_end_offset < bases[2]
    assert sorted(p.name for p in (tmp_path / "orders-0").glob("*.log")) == [
        f"{b:020d}.log" for b in bases[:2]
    ]
    recovered.close()


def test_recovery_starts_at_the_recovery_point(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, index_interval_bytes=50)
    log = Log.open(tmp_path / "orders-0", config, now_ms=0)
    for i in range(20):
        log.append_as_leader(batch(2, first=2 * i, size=30), leader_epoch=0, now_ms=0)
    segments = len(log.segments)
    recovery_point = log.segments[-2].base_offset
    log.close()
    reopened = Log.open(tmp_path / "orders-0", config, now_ms=0, recovery_point=recovery_point)
    assert reopened.load_info.segments_recovered == 2
    assert len(reopened.segments) == segments
    reopened.close()
