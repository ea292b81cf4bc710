"""The header-level API the broker and storage use: parse, scan, CRC, patching.

Covers ``parse_header``, ``verify_crc``, ``scan_batches`` (complete batches
only, a trailing partial batch ends the scan silently), and the in-place
``set_base_offset`` / ``set_partition_leader_epoch`` / ``set_log_append_time``
helpers, which must leave a valid CRC behind.
"""

from __future__ import annotations

import pytest
from headwater.errors import CorruptRecordError
from headwater.records import (
    BatchHeader,
    Compression,
    Record,
    TimestampType,
    build_batch,
    parse_header,
    read_batches,
    scan_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
    verify_crc,
)

from tests.unit.records import spec_batch


def _batch(n: int = 3, *, base_offset: int = 0, compression: str = "none") -> bytes:
    return build_batch(
        [Record(b"k%d" % i, b"v" * i) for i in range(n)],
        base_offset=base_offset,
        timestamp_ms=1000,
        compression=compression,
    )


def test_parse_header_fields_and_properties() -> None:
    data = build_batch(
        [Record(b"k", b"v")] * 4,
        base_offset=10,
        compression="lz4",
        timestamp_ms=77,
        producer_id=5,
        producer_epoch=6,
        base_sequence=7,
    )
    header = parse_header(data)
    assert isinstance(header, BatchHeader)
    assert header.base_offset == 10
    assert header.size_in_bytes == len(data) == header.batch_length + 12
    assert header.magic == 2
    assert header.compression is Compression.LZ4
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert (header.records_count, header.last_offset_delta) == (4, 3)
    assert (header.last_offset, header.next_offset) == (13, 14)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 6, 7)
    assert (header.base_timestamp, header.max_timestamp) == (77, 77)


def test_parse_header_at_a_position_in_a_memoryview() -> None:
    first, second = _batch(2), _batch(5, base_offset=2)
    header = parse_header(memoryview(first + second), len(first))
    assert (header.base_offset, header.records_count) == (2, 5)


@pytest.mark.parametrize("available", [0, 1, 12, 60])
def test_parse_header_refuses_a_short_buffer(available: int) -> None:
    with pytest.raises(CorruptRecordError, match="needs 61"):
        parse_header(_batch()[:available])


def test_parse_header_refuses_bad_magic() -> None:
    data = bytearray(_batch())
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        parse_header(data)


@pytest.mark.parametrize("length", [-1, 0, 48, -(2**31)])
def test_parse_header_refuses_impossible_lengths(length: int) -> None:
    data = bytearray(_batch())
    data[8:12] = length.to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordError, match="impossible batchLength"):
        parse_header(data)


def test_a_batch_of_exactly_49_is_a_possible_length() -> None:
    data = spec_batch.assemble(b"", records_count=0, last_offset_delta=0)
    header = parse_header(data)
    assert header.batch_length == 49
    verify_crc(data, 0, header)


def test_verify_crc_accepts_good_and_refuses_bad() -> None:
    data = bytearray(_batch())
    verify_crc(data, 0, parse_header(data))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        verify_crc(data, 0, parse_header(data))


def test_verify_crc_refuses_an_incomplete_batch() -> None:
    data = _batch()
    with pytest.raises(CorruptRecordError, match="incomplete"):
        verify_crc(data[:-1], 0, parse_header(data))


def test_scan_batches_yields_positions_and_headers() -> None:
    batches = [_batch(2), _batch(3, base_offset=2), _batch(1, base_offset=5)]
    data = b"".join(batches)
    scanned = list(scan_batches(data))
    assert [pos for pos, _ in scanned] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [h.base_offset for _, h in scanned] == [0, 2, 5]
    assert list(scan_batches(data, len(batches[0]))) == scanned[1:]


def test_scan_batches_stops_silently_at_every_possible_cut() -> None:
    first, second = _batch(2), _batch(3, base_offset=2)
    for cut in range(len(second)):
        data = first + second[:cut]
        assert [h.base_offset for _, h in scan_batches(data)] == [0], cut
        assert [b.base_offset for b in read_batches(data)] == [0], cut


def test_scan_batches_of_nothing_is_nothing() -> None:
    assert list(scan_batches(b"")) == []


def test_scan_batches_raises_on_bad_magic_even_in_a_partial_batch() -> None:
    data = bytearray(_batch(2) + _batch(3))
    second = len(_batch(2))
    data[second + 16] = 0
    with pytest.raises(CorruptRecordError, match="magic 0"):
        list(scan_batches(data[: second + 20]))
    with pytest.raises(CorruptRecordError, match="magic 0"):
        list(scan_batches(data))


def test_scan_batches_raises_on_impossible_length() -> None:
    data = bytearray(_batch(2))
    data[8:12] = (12).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="impossible batchLength 12"):
        list(scan_batches(data))


def test_scan_batches_does_not_check_crcs() -> None:
    data = bytearray(_batch(2))
    data[-1] ^= 0xFF
    assert len(list(scan_batches(data))) == 1


def test_set_base_offset_and_epoch_keep_the_crc_valid() -> None:
    first, second = _batch(2), _batch(3, compression="gzip")
    data = bytearray(first + second)
    set_base_offset(data, 0, 1_000)
    set_partition_leader_epoch(data, 0, 7)
    set_base_offset(data, len(first), 1_002)
    set_partition_leader_epoch(data, len(first), 8)
    headers = validate_batches(data)
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(1000, 7), (1002, 8)]
    assert headers[0].crc == parse_header(first).crc
    offsets = [r.offset for b in read_batches(data) for r in b.records()]
    assert offsets == [1000, 1001, 1002, 1003, 1004]


def test_set_log_append_time_stamps_every_record() -> None:
    data = bytearray(_batch(3, compression="zstd"))
    set_log_append_time(data, 0, 555)
    [header] = validate_batches(data)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert header.compression is Compression.ZSTD
    assert header.max_timestamp == 555
    [batch] = read_batches(data)
    assert [r.timestamp_ms for r in batch.records()] == [555, 555, 555]


def test_unknown_codec_is_reported_by_the_header() -> None:
    data = bytearray(_batch())
    data[22] |= 0x07
    spec_batch.restamp_crc(data)
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 7"):
        _ = parse_header(data).compression
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 7"):
        list(read_batches(data))
