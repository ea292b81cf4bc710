"""Control batches: Kafka's marker layout, the attribute bits, and bad markers refused."""

from __future__ import annotations

import pytest
from headwater.errors import CorruptRecordError
from headwater.records import Record, build_batch, read_batches
from headwater.records.control import (
    AbortedTransaction,
    ControlRecordType,
    EndTransactionMarker,
    build_control_batch,
    committed_batches,
    decode_control_key,
    decode_marker_value,
    encode_control_key,
    encode_marker_value,
    read_marker,
    set_batch_flags,
)


def test_the_key_and_value_are_kafkas_layout() -> None:
    assert encode_control_key(ControlRecordType.ABORT) == b"\x00\x00\x00\x00"
    assert encode_control_key(ControlRecordType.COMMIT) == b"\x00\x00\x00\x01"
    assert encode_marker_value(5) == b"\x00\x00\x00\x00\x00\x05"


@pytest.mark.parametrize("control_type", list(ControlRecordType))
def test_a_control_batch_reads_back_as_its_marker(control_type: ControlRecordType) -> None:
    data = build_control_batch(
        control_type,
        producer_id=42,
        producer_epoch=3,
        coordinator_epoch=9,
        timestamp_ms=1_000,
        base_offset=17,
    )
    (batch,) = read_batches(data)  # the CRC is checked
    assert batch.is_control and batch.is_transactional
    assert (batch.base_offset, batch.base_sequence, batch.records_count) == (17, -1, 1)
    assert read_marker(batch) == EndTransactionMarker(control_type, 42, 3, 9)


def test_set_batch_flags_sets_and_clears_the_bits_and_restamps_the_crc() -> None:
    data = build_batch([Record(b"k", b"v")], timestamp_ms=1, producer_id=7, producer_epoch=0)
    transactional = set_batch_flags(data, transactional=True)
    (batch,) = read_batches(transactional)
    assert batch.is_transactional and not batch.is_control
    assert read_marker(batch) is None
    (plain,) = read_batches(set_batch_flags(transactional, transactional=False))
    assert not plain.is_transactional and plain.raw() == data


def test_truncated_or_negative_version_markers_are_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_control_key(b"\x00\x00\x00")
    with pytest.raises(CorruptRecordError, match="missing"):
        decode_control_key(None)
    with pytest.raises(CorruptRecordError, match="negative"):
        decode_control_key(b"\xff\xff\x00\x01")
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_marker_value(b"\x00\x00\x00")
    with pytest.raises(CorruptRecordError, match="negative"):
        decode_marker_value(b"\xff\xff\x00\x00\x00\x01")


def test_an_unknown_control_type_is_ignored_as_kafka_does() -> None:
    assert decode_control_key(b"\x00\x00\x00\x07") is None
    data = build_batch(
        [Record(b"\x00\x00\x00\x07", encode_marker_value(1))], timestamp_ms=1, producer_id=1
    )
    (batch,) = read_batches(set_batch_flags(data, transactional=True, control=True))
    assert read_marker(batch) is None


def test_a_control_batch_of_two_records_is_corrupt() -> None:
    record = Record(encode_control_key(ControlRecordType.COMMIT), encode_marker_value(1))
    data = build_batch([record, record], timestamp_ms=1, producer_id=1)
    (batch,) = read_batches(set_batch_flags(data, transactional=True, control=True))
    with pytest.raises(CorruptRecordError, match="holds 2 records"):
        read_marker(batch)


def _data(offset: int, pid: int, *, transactional: bool = True) -> bytes:
    raw = build_batch(
        [Record(None, b"x")], base_offset=offset, timestamp_ms=1, producer_id=pid, producer_epoch=0
    )
    return set_batch_flags(raw, transactional=transactional)


def _marker(offset: int, pid: int, control_type: ControlRecordType) -> bytes:
    return build_control_batch(
        control_type,
        producer_id=pid,
        producer_epoch=1,
        coordinator_epoch=0,
        timestamp_ms=1,
        base_offset=offset,
    )


def test_read_committed_drops_aborted_data_and_every_marker() -> None:
    log = b"".join(
        [
            _data(0, 1),  # producer 1, aborted below
            _data(1, 2),  # producer 2, committed
            _data(2, 9, transactional=False),
            _marker(3, 1, ControlRecordType.ABORT),
            _data(4, 1),  # producer 1 again: a new transaction, committed
            _marker(5, 2, ControlRecordType.COMMIT),
            _marker(6, 1, ControlRecordType.COMMIT),
        ]
    )
    kept = committed_batches(read_batches(log), [AbortedTransaction(1, 0)])
    assert [b.base_offset for b in kept] == [1, 2, 4]
    everything = committed_batches(read_batches(log), [])
    assert [b.base_offset for b in everything] == [0, 1, 2, 4]
