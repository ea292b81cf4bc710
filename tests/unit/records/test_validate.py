"""``validate_batches``: what the broker checks on every produce request.

Complete batches only (a trailing partial batch is an error here, unlike in
``read_batches``), magic 2, sane lengths, a known codec, matching CRCs,
contiguous non-empty offset deltas unless disabled, and the size limit
(MessageTooLargeError).  An empty request is corrupt.
"""

from __future__ import annotations

import pytest
from headwater.errors import CorruptRecordError, MessageTooLargeError
from headwater.records import Record, build_batch, read_batches, validate_batches

from tests.unit.records import spec_batch


def _batch(n: int, base_offset: int = 0, compression: str = "none") -> bytes:
    return build_batch(
        [Record(None, b"x" * 10)] * n,
        base_offset=base_offset,
        timestamp_ms=1,
        compression=compression,
    )


def test_valid_batches_return_their_headers_in_order() -> None:
    data = _batch(2) + _batch(3, 2, "snappy") + _batch(1, 5, "gzip")
    headers = validate_batches(data)
    assert [(h.base_offset, h.records_count) for h in headers] == [(0, 2), (2, 3), (5, 1)]
    assert validate_batches(memoryview(data)) == headers
    assert validate_batches(bytearray(data)) == headers


def test_empty_buffer_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="empty"):
        validate_batches(b"")


@pytest.mark.parametrize("cut", [1, 11, 12, 17, 60, 61, -1])
def test_trailing_partial_batch_is_refused(cut: int) -> None:
    whole = _batch(2)
    data = whole + _batch(3)[:cut]
    assert len(list(read_batches(data))) == 1  # a reader would skip it ...
    with pytest.raises(CorruptRecordError):  # ... but a produce request must be whole
        validate_batches(data)


def test_a_lone_partial_batch_is_refused_with_a_clear_message() -> None:
    data = _batch(5)
    with pytest.raises(CorruptRecordError, match=r"batch 0 at position 0 .*incomplete"):
        validate_batches(data[:-3])


def test_bad_crc_names_the_batch() -> None:
    first = _batch(1)
    data = bytearray(first + _batch(2, 1))
    data[-2] ^= 0x40
    with pytest.raises(CorruptRecordError, match=rf"batch 1 at position {len(first)} .*CRC"):
        validate_batches(data)


def test_oversize_batch_is_message_too_large() -> None:
    small, big = _batch(1), _batch(50)
    assert validate_batches(small + big, max_batch_bytes=len(big))
    with pytest.raises(MessageTooLargeError, match=f"{len(big)} bytes exceeds"):
        validate_batches(small + big, max_batch_bytes=len(big) - 1)


def test_empty_batch_is_refused_unless_not_contiguous() -> None:
    data = spec_batch.assemble(b"", records_count=0, last_offset_delta=0)
    with pytest.raises(CorruptRecordError, match="recordsCount 0"):
        validate_batches(data)
    [header] = validate_batches(data, require_contiguous=False)
    assert header.records_count == 0


def test_last_offset_delta_must_match_records_count() -> None:
    section = spec_batch.record(b"a", b"1") + spec_batch.record(b"b", b"2", offset_delta=5)
    data = spec_batch.assemble(section, records_count=2, last_offset_delta=5)
    with pytest.raises(CorruptRecordError, match="lastOffsetDelta 5"):
        validate_batches(data)
    # A compacted log keeps offset holes: fine when contiguity is not required.
    [header] = validate_batches(data, require_contiguous=False)
    assert header.last_offset == 5
    [batch] = read_batches(data)
    assert [r.offset for r in batch.records()] == [0, 5]


def test_inconsistent_counts_are_refused_even_when_not_contiguous() -> None:
    section = spec_batch.record(b"a", b"1") + spec_batch.record(b"b", b"2", offset_delta=1)
    data = spec_batch.assemble(section, records_count=2, last_offset_delta=0)
    with pytest.raises(CorruptRecordError, match="inconsistent"):
        validate_batches(data, require_contiguous=False)


def test_unknown_codec_is_refused() -> None:
    data = bytearray(_batch(1))
    data[22] = 0x05
    spec_batch.restamp_crc(data)
    with pytest.raises(CorruptRecordError, match="unknown compression codec id 5"):
        validate_batches(data)


def test_bad_magic_and_impossible_length_are_refused() -> None:
    data = bytearray(_batch(1))
    data[16] = 3
    with pytest.raises(CorruptRecordError, match="magic 3"):
        validate_batches(data)
    data = bytearray(_batch(1))
    data[8:12] = (-5).to_bytes(4, "big", signed=True)
    with pytest.raises(CorruptRecordError, match="impossible batchLength -5"):
        validate_batches(data)
