"""The public surface of headwater.records: values, exports and argument checks."""

from __future__ import annotations

import headwater.records as records
import pytest
from headwater.records import (
    Batch,
    BatchHeader,
    Compression,
    ConsumedRecord,
    Record,
    build_batch,
    parse_header,
    read_batches,
)


def test_everything_in_all_is_exported() -> None:
    for name in records.__all__:
        assert hasattr(records, name), name


def test_record_defaults_and_immutability() -> None:
    record = Record(b"k", None)
    assert record.headers == ()
    assert record.timestamp_ms is None
    with pytest.raises(AttributeError):
        record.key = b"x"  # type: ignore[misc]


def test_consumed_record_fields() -> None:
    assert ConsumedRecord._fields == ("offset", "timestamp_ms", "key", "value", "headers")


def test_batch_exposes_every_header_field() -> None:
    data = build_batch(
        [Record(b"a", b"b"), Record(None, b"c")],
        base_offset=9,
        compression=Compression.GZIP,
        timestamp_ms=3,
        producer_id=4,
        producer_epoch=5,
        base_sequence=6,
    )
    [batch] = read_batches(data)
    assert isinstance(batch, Batch)
    header = parse_header(data)
    for field in BatchHeader._fields:
        assert getattr(batch, field) == getattr(header, field), field
    assert batch.header == header
    assert (batch.last_offset, batch.next_offset, batch.size_in_bytes) == (10, 11, len(data))
    assert batch.compression is Compression.GZIP
    assert batch.raw() == data
    assert "base_offset=9" in repr(batch)
    assert "gzip" in repr(batch)


def test_records_can_be_read_twice_and_from_any_iterable() -> None:
    data = build_batch((Record(None, b"%d" % i) for i in range(3)), timestamp_ms=0)
    [batch] = read_batches(bytearray(data))
    assert list(batch.records()) == list(batch.records())
    assert [r.value for r in batch.record_list()] == [b"0", b"1", b"2"]


def test_an_empty_batch_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


def test_read_batches_of_nothing_yields_nothing() -> None:
    assert list(read_batches(b"")) == []
