"""ListOffsets lookups: by timestamp, earliest (-2), latest (-1) and max timestamp (-3).

Covers: the exact first record offset with timestamp >= target (inside a
batch, across segments, through the time index), targets past every record,
out-of-order timestamps inside a batch, the lookups surviving a reopen, and
the log start offset bounding the answer.
"""

from __future__ import annotations

import pytest
from headwater.errors import InvalidRequestError
from headwater.storage import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Log,
    TimestampAndOffset,
)

from .helpers import batch_with_timestamps, reopen


def _fill(log: Log) -> None:
    # 50 batches of 4 records with timestamps 1000, 1010, ... (10 ms apart), epoch 2.
    for b in range(50):
        stamps = [1000 + 10 * (4 * b + i) for i in range(4)]
        log.append_as_leader(batch_with_timestamps(stamps), leader_epoch=2, now_ms=0)


def test_exact_first_offset_for_every_timestamp(log: Log) -> None:
    _fill(log)
    assert len(log.segments) > 3
    for offset in range(200):
        ts = 1000 + 10 * offset
        assert log.fetch_offset_by_timestamp(ts) == TimestampAndOffset(ts, offset, 2)
        # a timestamp between two records finds the later one
        assert log.fetch_offset_by_timestamp(ts - 5) == TimestampAndOffset(ts, offset, 2)


def test_timestamp_after_every_record_finds_nothing(log: Log) -> None:
    _fill(log)
    assert log.fetch_offset_by_timestamp(1000 + 10 * 200) is None


def test_out_of_order_timestamps_inside_a_batch(log: Log) -> None:
    log.append_as_leader(batch_with_timestamps([500, 100, 900, 300]), leader_epoch=0, now_ms=0)
    assert log.fetch_offset_by_timestamp(200) == TimestampAndOffset(500, 0, 0)
    assert log.fetch_offset_by_timestamp(600) == TimestampAndOffset(900, 2, 0)


def test_earliest_latest_and_max_timestamp(log: Log) -> None:
    _fill(log)
    log.append_as_leader(batch_with_timestamps([10, 99_999, 20]), leader_epoch=3, now_ms=0)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 0, 2)
    assert log.fetch_offset_by_timestamp(LATEST_TIMESTAMP) == TimestampAndOffset(-1, 203, 3)
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(99_999, 201, 3)


def test_max_timestamp_of_an_empty_log_is_none(log: Log) -> None:
    assert log.fetch_offset_by_timestamp(MAX_TIMESTAMP) is None
    assert log.fetch_offset_by_timestamp(0) is None


def test_lookups_survive_reopen(log: Log) -> None:
    _fill(log)
    reopened = reopen(log, clean=True)
    assert reopened.fetch_offset_by_timestamp(1000 + 10 * 77) == TimestampAndOffset(1770, 77, 2)
    assert reopened.fetch_offset_by_timestamp(MAX_TIMESTAMP) == TimestampAndOffset(2990, 199, 2)
    reopened.close()


def test_log_start_offset_bounds_the_answer(log: Log) -> None:
    _fill(log)
    log.maybe_increment_log_start_offset(10)
    assert log.fetch_offset_by_timestamp(0) == TimestampAndOffset(1100, 10, 2)
    assert log.fetch_offset_by_timestamp(EARLIEST_TIMESTAMP) == TimestampAndOffset(-1, 10, 2)


def test_other_negative_targets_are_refused(log: Log) -> None:
    with pytest.raises(InvalidRequestError):
        log.fetch_offset_by_timestamp(-4)
