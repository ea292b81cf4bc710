"""Corrupting each header field, and the records, of a valid batch.

Fields covered by the CRC (attributes through the last record byte) and the
CRC itself must make ``read_batches`` raise CorruptRecordError; so must a bad
magic.  A damaged ``batchLength`` either raises or, when it now claims more
bytes than exist, reads as a trailing partial batch (which ``validate_batches``
refuses).  ``baseOffset`` and ``partitionLeaderEpoch`` lie outside the CRC,
because the leader rewrites them, so damage there must NOT raise.
Also covers records that are malformed despite a valid CRC.
"""

from __future__ import annotations

import pytest
from headwater.errors import CorruptRecordError
from headwater.records import Record, build_batch, read_batches, validate_batches

from tests.unit.records import spec_batch

FIELDS = {  # name: (offset, size) in the 61-byte header
    "baseOffset": (0, 8),
    "batchLength": (8, 4),
    "partitionLeaderEpoch": (12, 4),
    "magic": (16, 1),
    "crc": (17, 4),
    "attributes": (21, 2),
    "lastOffsetDelta": (23, 4),
    "baseTimestamp": (27, 8),
    "maxTimestamp": (35, 8),
    "producerId": (43, 8),
    "producerEpoch": (51, 2),
    "baseSequence": (53, 4),
    "recordsCount": (57, 4),
}
CRC_COVERED = [n for n, (offset, _) in FIELDS.items() if offset >= 21] + ["crc"]


def _batch(compression: str = "none") -> bytes:
    records = [Record(b"key", b"value %d" % i, [("h", b"1")], 1000 + i) for i in range(5)]
    return build_batch(records, base_offset=40, compression=compression)


def _flipped(data: bytes, offset: int) -> bytearray:
    out = bytearray(data)
    out[offset] ^= 0xFF
    return out


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("field", [*CRC_COVERED, "magic"])
def test_flipping_a_checked_field_raises(field: str, compression: str) -> None:
    offset, size = FIELDS[field]
    for i in range(size):
        data = _flipped(_batch(compression), offset + i)
        with pytest.raises(CorruptRecordError, match=r"CRC mismatch|magic"):
            list(read_batches(data))
        with pytest.raises(CorruptRecordError):
            validate_batches(data)


@pytest.mark.parametrize("field", ["baseOffset", "partitionLeaderEpoch"])
def test_flipping_a_field_outside_the_crc_does_not_raise(field: str) -> None:
    offset, size = FIELDS[field]
    for i in range(size):
        data = _flipped(_batch(), offset + i)
        [batch] = read_batches(data)
        assert len(list(batch.records())) == 5
        validate_batches(data)


def test_flipping_batch_length_raises_or_reads_as_partial() -> None:
    offset, size = FIELDS["batchLength"]
    trailer = _batch()  # a following batch, so a shorter length does not end the buffer
    for i in range(size):
        data = _flipped(_batch(), offset + i) + trailer
        try:
            batches = list(read_batches(data))
        except CorruptRecordError:
            pass
        else:
            assert batches == [], f"byte {i} of batchLength went unnoticed"
        with pytest.raises(CorruptRecordError):
            validate_batches(data)


def test_flipping_any_single_covered_byte_raises() -> None:
    good = _batch("snappy")
    for offset in range(21, len(good)):
        with pytest.raises(CorruptRecordError):
            list(read_batches(_flipped(good, offset)))


def test_error_names_the_batch_position_and_offset() -> None:
    first = _batch()
    data = first + _flipped(_batch(), 30)
    with pytest.raises(CorruptRecordError, match=rf"position {len(first)} \(base offset 40\)"):
        list(read_batches(data))


# Records that are malformed although the CRC (computed over the damage) matches.


def test_more_records_declared_than_present() -> None:
    data = spec_batch.assemble(spec_batch.record(b"k", b"v"), records_count=2)
    [batch] = read_batches(data)
    with pytest.raises(CorruptRecordError, match="record 1 of 2 runs past the end"):
        list(batch.records())


def test_bytes_left_after_the_declared_records() -> None:
    section = spec_batch.record(b"k", b"v") + spec_batch.record(b"k", b"v", offset_delta=1)
    data = spec_batch.assemble(section, records_count=1)
    [batch] = read_batches(data)
    with pytest.raises(CorruptRecordError, match="bytes left after"):
        list(batch.records())


def test_record_length_disagreeing_with_its_fields() -> None:
    record = bytearray(spec_batch.record(b"k", b"v"))
    record[0] += 2  # claims one more byte (zigzag +1)
    data = spec_batch.assemble(bytes(record) + b"\x00", records_count=1)
    [batch] = read_batches(data)
    with pytest.raises(CorruptRecordError, match="disagrees"):
        list(batch.records())


@pytest.mark.parametrize("length", [-2, -100])
def test_negative_key_length_other_than_null(length: int) -> None:
    body = b"\x00\x00\x00" + spec_batch.zigzag_varint(length) + b"\x01\x00"
    section = spec_batch.zigzag_varint(len(body)) + body
    [batch] = read_batches(spec_batch.assemble(section, records_count=1))
    with pytest.raises(CorruptRecordError, match=f"key length {length}"):
        list(batch.records())


def test_header_key_that_is_not_utf8() -> None:
    body = b"\x00\x00\x00\x01\x01\x02" + b"\x02\xff" + b"\x01"
    section = spec_batch.zigzag_varint(len(body)) + body
    [batch] = read_batches(spec_batch.assemble(section, records_count=1))
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        list(batch.records())


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_undecompressable_payload(codec: int) -> None:
    data = spec_batch.assemble(b"this is not compressed at all", records_count=1, attributes=codec)
    [batch] = read_batches(data)
    with pytest.raises(CorruptRecordError, match="cannot decompress"):
        list(batch.records())
