"""Truncation for follower divergence and full resets.

Covers: truncate_to at batch boundaries and inside a batch, across segments
(later segment files deleted), no-op beyond the end, the epoch cache and high
watermark trimmed with it, appending after truncation, truncate_fully_and_start_at.
"""

from __future__ import annotations

from headwater.storage import Log

from .helpers import batch, read_all


def _fill(log: Log, batches: int = 30) -> None:
    for i in range(batches):
        log.append_as_leader(batch(3, first=3 * i, size=30), leader_epoch=i // 10, now_ms=0)


def test_truncate_at_a_batch_boundary(log: Log) -> None:
    _fill(log)
    assert log.truncate_to(45)
    assert log.log_end_offset == 45
    assert [o for o, _ in read_all(log)] == list(range(45))


def test_truncate_inside_a_batch_removes_that_batch(log: Log) -> None:
    _fill(log)
    log.truncate_to(46)
    assert log.log_end_offset == 45


def test_truncate_deletes_later_segment_files(log: Log) -> None:
    _fill(log)
    segments_before = len(log.segments)
    log.truncate_to(10)
    assert len(log.segments) < segments_before
    files = sorted(p.name for p in log.dir.glob("*.log"))
    assert [int(n[:20]) for n in files] == [s.base_offset for s in log.segments]
    assert log.segments[-1].base_offset < 10


def test_truncate_beyond_the_end_changes_nothing(log: Log) -> None:
    _fill(log, 3)
    assert not log.truncate_to(9)
    assert not log.truncate_to(100)
    assert log.log_end_offset == 9


def test_truncate_trims_epoch_cache_and_high_watermark(log: Log) -> None:
    _fill(log)
    log.high_watermark = 80
    assert [tuple(e) for e in log.epoch_cache.entries] == [(0, 0), (1, 30), (2, 60)]
    log.truncate_to(51)
    assert [tuple(e) for e in log.epoch_cache.entries] == [(0, 0), (1, 30)]
    assert log.high_watermark == 51
    assert log.recovery_point <= 51


def test_append_after_truncation_continues_from_the_new_end(log: Log) -> None:
    _fill(log)
    log.truncate_to(20)
    assert log.log_end_offset == 18  # the batch 18..20 straddles 20
    info = log.append_as_leader(batch(2, first=18), leader_epoch=5, now_ms=0)
    assert info.first_offset == 18
    assert [o for o, _ in read_all(log)] == list(range(20))


def test_truncate_to_zero_empties_the_log(log: Log) -> None:
    _fill(log)
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.read(0, 1000).records == b""


def test_truncate_fully_and_start_at(log: Log) -> None:
    _fill(log)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (500, 500, 500)
    assert [p.name for p in log.dir.glob("*.log")] == ["00000000000000000500.log"]
    assert log.epoch_cache.entries == []
    info = log.append_as_leader(batch(2), leader_epoch=4, now_ms=0)
    assert info.first_offset == 500
