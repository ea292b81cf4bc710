"""When the active segment rolls: segment.bytes, segment.ms, a full index, roll().

Covers: a segment never exceeding segment.bytes (unless one append is larger),
segment.ms measured from the first batch's timestamp, a full offset index
forcing a roll, explicit roll() and its no-op on an empty segment, and the
recovery point moving with each roll (the rolled segment is flushed).
"""

from __future__ import annotations

from pathlib import Path

from headwater.storage import Log

from .helpers import batch, open_log, read_all

DAY = 24 * 3600 * 1000


def test_segments_stay_within_segment_bytes(log: Log) -> None:
    for i in range(50):
        log.append_as_leader(batch(2, first=2 * i, size=25), leader_epoch=0, now_ms=0)
    assert all(s.size <= 1024 for s in log.segments)
    assert len(log.segments) > 3


def test_segment_ms_rolls_by_record_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=DAY)
    log.append_as_leader(batch(1, timestamp_ms=0), leader_epoch=0, now_ms=0)
    log.append_as_leader(batch(1, first=1, timestamp_ms=DAY), leader_epoch=0, now_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, first=2, timestamp_ms=DAY + 1), leader_epoch=0, now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_full_index_rolls(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=0, segment_index_bytes=24)  # 2 time entries
    for i in range(10):
        log.append_as_leader(batch(1, first=i), leader_epoch=0, now_ms=0)
    assert len(log.segments) > 2
    assert all(len(s.offset_index) <= 3 for s in log.segments)
    assert [o for o, _ in read_all(log)] == list(range(10))
    log.close()


def test_explicit_roll_and_empty_roll(log: Log) -> None:
    log.roll(now_ms=0)
    assert len(log.segments) == 1
    log.append_as_leader(batch(2), leader_epoch=0, now_ms=0)
    log.roll(now_ms=0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert (log.dir / "00000000000000000002.log").exists()


def test_roll_advances_the_recovery_point(log: Log) -> None:
    for i in range(20):
        log.append_as_leader(batch(2, first=2 * i, size=25), leader_epoch=0, now_ms=0)
    assert log.recovery_point == log.segments[-1].base_offset
