"""Bad input is refused with a typed error and leaves the log byte-for-byte untouched.

Covers: a CRC mismatch, a torn batch, bad magic, an oversize batch
(max.message.bytes), an empty request, a follower append that does not start
at the log end offset or whose offsets go backwards.  Each test compares every
file in the partition directory before and after.
"""

from __future__ import annotations

import pytest
from headwater.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError
from headwater.records import set_base_offset
from headwater.storage import Log

from .helpers import batch, snapshot


@pytest.fixture
def filled(log: Log) -> Log:
    for i in range(5):
        log.append_as_leader(batch(3, first=3 * i, size=40), leader_epoch=1, now_ms=0)
    return log


def _corrupt(data: bytes, at: int) -> bytes:
    mutable = bytearray(data)
    mutable[at] ^= 0xFF
    return bytes(mutable)


def _assert_refused(log: Log, records: bytes, error: type[Exception], *, leader: bool) -> None:
    before = snapshot(log.dir)
    end = log.log_end_offset
    with pytest.raises(error):
        if leader:
            log.append_as_leader(records, leader_epoch=1, now_ms=0)
        else:
            log.append_as_follower(records)
    assert snapshot(log.dir) == before
    assert log.log_end_offset == end


def test_crc_mismatch_is_refused(filled: Log) -> None:
    good = batch(2)
    _assert_refused(filled, _corrupt(good, len(good) - 1), CorruptRecordError, leader=True)


def test_a_corrupt_second_batch_refuses_the_whole_request(filled: Log) -> None:
    good = batch(2)
    records = good + _corrupt(good, len(good) - 1)
    _assert_refused(filled, records, CorruptRecordError, leader=True)


def test_torn_batch_is_refused(filled: Log) -> None:
    _assert_refused(filled, batch(2)[:-3], CorruptRecordError, leader=True)


def test_bad_magic_is_refused(filled: Log) -> None:
    records = bytearray(batch(2))
    records[16] = 1
    _assert_refused(filled, bytes(records), CorruptRecordError, leader=True)


def test_empty_request_is_refused(filled: Log) -> None:
    _assert_refused(filled, b"", CorruptRecordError, leader=True)


def test_oversize_batch_is_refused(filled: Log) -> None:
    filled.update_config(filled.config.__class__(segment_bytes=1024, max_message_bytes=200))
    _assert_refused(filled, batch(10, size=50), MessageTooLargeError, leader=True)


def test_follower_append_not_at_log_end_is_refused(filled: Log) -> None:
    records = bytearray(batch(2))
    set_base_offset(records, 0, filled.log_end_offset + 1)
    _assert_refused(filled, bytes(records), InvalidRecordError, leader=False)
    set_base_offset(records, 0, filled.log_end_offset - 1)
    _assert_refused(filled, bytes(records), InvalidRecordError, leader=False)


def test_follower_append_with_backwards_offsets_is_refused(filled: Log) -> None:
    end = filled.log_end_offset
    first, second = bytearray(batch(3)), bytearray(batch(3))
    set_base_offset(first, 0, end)
    set_base_offset(second, 0, end + 1)  # overlaps the first batch (end..end+2)
    _assert_refused(filled, bytes(first + second), InvalidRecordError, leader=False)


def test_follower_append_with_bad_crc_is_refused(filled: Log) -> None:
    records = bytearray(batch(2))
    set_base_offset(records, 0, filled.log_end_offset)
    _assert_refused(filled, _corrupt(bytes(records), 70), CorruptRecordError, leader=False)
