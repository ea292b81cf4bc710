"""Fixed byte vectors: batches built by hand from the spec, byte for byte.

Each vector spells out the expected bytes of a RecordBatch v2 (header fields,
zigzag varints, CRC-32C over attributes..end computed here, independently of
the codec) and checks that ``build_batch`` produces exactly those bytes and
that ``read_batches`` decodes them back.
"""

from __future__ import annotations

import struct

from crc32c import crc32c
from headwater.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Compression,
    ConsumedRecord,
    Record,
    TimestampType,
    build_batch,
    parse_header,
    read_batches,
)

from tests.unit.records import spec_batch


def test_crc32c_is_castagnoli() -> None:
    # The standard check value of CRC-32C (iSCSI/Castagnoli), not zlib's CRC-32 (0xCBF43926).
    assert crc32c(b"123456789") == 0xE3069283


def test_header_constants() -> None:
    assert (HEADER_SIZE, LOG_OVERHEAD, MAGIC) == (61, 12, 2)


def _one_record_vector() -> bytes:
    record = bytes.fromhex(
        "18"  # length 12 (zigzag 24)
        "00"  # attributes
        "00"  # timestampDelta 0
        "00"  # offsetDelta 0
        "02 6b"  # keyLength 1, "k"
        "02 76"  # valueLength 1, "v"
        "02"  # headersCount 1
        "02 68"  # header keyLength 1, "h"
        "02 78"  # header valueLength 1, "x"
    )
    tail = bytes.fromhex(
        "0000"  # attributes: no compression, CreateTime
        "00000000"  # lastOffsetDelta 0
        "00000000000003e8"  # baseTimestamp 1000
        "00000000000003e8"  # maxTimestamp 1000
        "ffffffffffffffff"  # producerId -1
        "ffff"  # producerEpoch -1
        "ffffffff"  # baseSequence -1
        "00000001"  # recordsCount 1
    )
    crc = crc32c(tail + record)
    prefix = bytes.fromhex(
        "0000000000000000"  # baseOffset 0
        "0000003e"  # batchLength 62 = 49 + 13
        "ffffffff"  # partitionLeaderEpoch -1
        "02"  # magic
    ) + crc.to_bytes(4, "big")
    return prefix + tail + record


def test_one_record_with_a_header_matches_the_spec_bytes() -> None:
    expected = _one_record_vector()
    built = build_batch([Record(b"k", b"v", [("h", b"x")], 1000)])
    assert built == expected
    assert len(built) == 74


def test_one_record_vector_decodes() -> None:
    [batch] = read_batches(_one_record_vector())
    assert batch.base_offset == 0
    assert batch.batch_length == 62
    assert batch.size_in_bytes == 74
    assert batch.partition_leader_epoch == -1
    assert batch.magic == 2
    assert batch.crc == struct.unpack_from(">I", _one_record_vector(), 17)[0]
    assert batch.attributes == 0
    assert batch.compression is Compression.NONE
    assert batch.timestamp_type is TimestampType.CREATE_TIME
    assert not batch.is_transactional
    assert not batch.is_control
    assert (batch.base_timestamp, batch.max_timestamp) == (1000, 1000)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.records_count, batch.last_offset_delta, batch.last_offset) == (1, 0, 0)
    assert list(batch.records()) == [ConsumedRecord(0, 1000, b"k", b"v", (("h", b"x"),))]


def test_null_key_and_null_value() -> None:
    record = bytes.fromhex(
        "0c"  # length 6
        "00 00 00"  # attributes, timestampDelta, offsetDelta
        "01"  # keyLength -1 (null)
        "01"  # valueLength -1 (null)
        "00"  # headersCount 0
    )
    expected = spec_batch.assemble(
        record, records_count=1, base_offset=7, base_timestamp=5, producer_id=9
    )
    assert expected[8:12] == (56).to_bytes(4, "big")  # 49 + 7 record bytes
    built = build_batch([Record(None, None)], base_offset=7, timestamp_ms=5, producer_id=9)
    assert built == expected
    [batch] = read_batches(built)
    assert list(batch.records()) == [ConsumedRecord(7, 5, None, None, ())]


def test_null_header_value_and_empty_key() -> None:
    record = spec_batch.record(b"", b"abc", headers=(("trace", None), ("", b"")))
    expected = spec_batch.assemble(record, records_count=1, base_timestamp=42)
    built = build_batch([Record(b"", b"abc", [("trace", None), ("", b"")], 42)])
    assert built == expected
    [batch] = read_batches(built)
    [got] = batch.records()
    assert got.key == b"" and got.value == b"abc"
    assert got.headers == (("trace", None), ("", b""))


def test_several_records_with_timestamp_deltas_and_producer_fields() -> None:
    records = [
        Record(b"a", b"1", timestamp_ms=1_700_000_000_000),
        Record(b"b", b"2", timestamp_ms=1_699_999_999_999),  # delta -1
        Record(b"c", b"3" * 200, timestamp_ms=1_700_000_000_100),  # two-byte varints
    ]
    section = (
        spec_batch.record(b"a", b"1", timestamp_delta=0, offset_delta=0)
        + spec_batch.record(b"b", b"2", timestamp_delta=-1, offset_delta=1)
        + spec_batch.record(b"c", b"3" * 200, timestamp_delta=100, offset_delta=2)
    )
    expected = spec_batch.assemble(
        section,
        records_count=3,
        base_offset=100,
        base_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_100,
        producer_id=12345,
        producer_epoch=3,
        base_sequence=17,
    )
    built = build_batch(
        records, base_offset=100, producer_id=12345, producer_epoch=3, base_sequence=17
    )
    assert built == expected
    header = parse_header(built)
    assert header.last_offset == 102
    assert header.max_timestamp == 1_700_000_000_100
    [batch] = read_batches(built)
    got = list(batch.records())
    assert [r.offset for r in got] == [100, 101, 102]
    assert [r.timestamp_ms for r in got] == [r.timestamp_ms for r in records]
    assert [r.value for r in got] == [b"1", b"2", b"3" * 200]


def test_untimed_records_get_the_batch_timestamp() -> None:
    built = build_batch([Record(b"k", b"v"), Record(b"k", b"w", timestamp_ms=9)], timestamp_ms=4)
    [batch] = read_batches(built)
    assert [r.timestamp_ms for r in batch.records()] == [4, 9]
    assert (batch.base_timestamp, batch.max_timestamp) == (4, 9)


def test_untimed_records_without_a_batch_timestamp_use_the_wall_clock() -> None:
    import time

    before = time.time_ns() // 1_000_000
    built = build_batch([Record(b"k", b"v")])
    after = time.time_ns() // 1_000_000
    [batch] = read_batches(built)
    [record] = batch.records()
    assert before <= record.timestamp_ms <= after
