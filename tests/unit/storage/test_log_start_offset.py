"""The log start offset: DeleteRecords and followers following the leader's start.

Covers: maybe_increment_log_start_offset moving only forward, refusing a
value past the log end, delete_records_before dropping whole segments below
it, and the epoch cache's first entry moved up.
"""

from __future__ import annotations

import pytest
from headwater.errors import OffsetOutOfRangeError
from headwater.storage import Log

from .helpers import batch, read_all


def _fill(log: Log) -> None:
    for i in range(30):
        log.append_as_leader(batch(3, first=3 * i, size=30), leader_epoch=i // 10, now_ms=0)


def test_log_start_offset_only_moves_forward(log: Log) -> None:
    _fill(log)
    assert log.maybe_increment_log_start_offset(10)
    assert not log.maybe_increment_log_start_offset(5)
    assert log.log_start_offset == 10


def test_beyond_the_log_end_is_out_of_range(log: Log) -> None:
    _fill(log)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(91)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(91)
    assert log.log_start_offset == 0


def test_delete_records_before_drops_whole_segments_below(log: Log) -> None:
    _fill(log)
    assert log.delete_records_before(50) == 50
    assert log.segments[0].base_offset <= 50
    assert len(log.segments) == 1 or log.segments[1].base_offset > 50
    assert next(o for o, _ in read_all(log)) == 50
    assert log.high_watermark >= 50


def test_epoch_cache_starts_at_the_log_start_offset(log: Log) -> None:
    _fill(log)
    log.delete_records_before(40)
    assert [tuple(e) for e in log.epoch_cache.entries] == [(1, 40), (2, 60)]
    assert log.end_offset_for_epoch(0) == (0, 40)


def test_delete_records_up_to_the_end(log: Log) -> None:
    _fill(log)
    log.delete_records_before(90)
    assert log.log_start_offset == 90
    assert log.read(90, 1000).records == b""
