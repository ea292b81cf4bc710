"""Append planning (headwater.storage.appends) and retention predicates
(headwater.storage.retention) as pure functions: offsets and epochs stamped into header
copies only, follower gaps refused, LogAppendTime patching the whole copy, the size
predicate counting down."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from headwater.errors import InvalidRecordError
from headwater.records import HEADER_SIZE, read_batches, set_base_offset, validate_batches
from headwater.storage import appends, retention

from .helpers import batch


def test_a_leader_append_stamps_offsets_and_epoch_in_header_copies() -> None:
    records = batch(2) + batch(3, first=2)
    headers = validate_batches(records)
    plan = appends.plan_leader_append(
        records, headers, base_offset=10, leader_epoch=4, now_ms=99, log_append_time=False
    )
    assert plan.size == len(records) and plan.log_append_time_ms == -1
    assert [(pos, h.base_offset, h.partition_leader_epoch) for pos, h in plan.placed] == [
        (0, 10, 4),
        (headers[0].size_in_bytes, 12, 4),
    ]
    assert all(len(p) == HEADER_SIZE for p in plan.pieces[::2])  # bodies are not copied
    written = b"".join(bytes(p) for p in plan.pieces)
    assert [(b.base_offset, b.partition_leader_epoch) for b in read_batches(written)] == [
        (10, 4),
        (12, 4),
    ]
    info = appends.append_info(plan, log_start_offset=3)
    assert (info.first_offset, info.last_offset, info.num_batches, info.num_records) == (
        10,
        14,
        2,
        5,
    )
    assert info.log_start_offset == 3 and info.valid_bytes == len(records)


def test_log_append_time_copies_the_request_once_and_stamps_the_time() -> None:
    records = batch(2, timestamp_ms=5)
    plan = appends.plan_leader_append(
        records,
        validate_batches(records),
        base_offset=0,
        leader_epoch=1,
        now_ms=1234,
        log_append_time=True,
    )
    assert len(plan.pieces) == 1 and plan.log_append_time_ms == 1234
    assert plan.max_timestamp() == (1234, 1)
    assert next(read_batches(bytes(plan.pieces[0]))).max_timestamp == 1234
    assert records == batch(2, timestamp_ms=5)  # the request's bytes are untouched


def at(base_offset: int, count: int) -> bytes:
    raw = bytearray(batch(count))
    set_base_offset(raw, 0, base_offset)
    return bytes(raw)


def test_a_follower_append_keeps_offsets_and_refuses_gaps_and_overlaps() -> None:
    records = at(5, 2) + at(7, 1)
    plan = appends.plan_follower_append(
        records, validate_batches(records), log_end_offset=5, where="t-0"
    )
    assert plan.pieces == [records] and [h.base_offset for _, h in plan.placed] == [5, 7]
    with pytest.raises(InvalidRecordError, match="t-0: follower append starts at offset 5"):
        appends.plan_follower_append(
            records, validate_batches(records), log_end_offset=4, where="t-0"
        )
    overlapping = at(5, 2) + at(6, 1)
    with pytest.raises(InvalidRecordError, match="non-monotonic"):
        appends.plan_follower_append(
            overlapping, validate_batches(overlapping), log_end_offset=5, where="t-0"
        )


def segment(size: int = 0, largest_timestamp: int = 0) -> Any:
    return SimpleNamespace(size=size, largest_timestamp=largest_timestamp)


def test_retention_predicates() -> None:
    assert retention.below_log_start(10)(segment(), 10)
    assert not retention.below_log_start(10)(segment(), 11)
    old = retention.older_than(100, now_ms=1000)
    assert old(segment(largest_timestamp=899), 0) and not old(segment(largest_timestamp=900), 0)
    over = retention.beyond_size(25)  # 25 bytes too many: two 10-byte segments go, not a third
    assert [over(segment(size=10), 0) for _ in range(3)] == [True, True, False]
