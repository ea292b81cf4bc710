"""RecordsBuilder and finish_batch, for each codec (the conftest runs this module twice).

A builder returns each record's index, tracks count, size and the batch
timestamps, and finish_batch makes exactly the bytes build_batch makes of the
same records, compressed or not.  A batch re-stamped with another header
(a retry under a new producer epoch) leaves the bytes handed out before
untouched.  Finished builders refuse appends; records that cannot be
encoded leave the builder as it was (native) and never corrupt it.
"""

from __future__ import annotations

import pytest
from headwater.records import (
    HEADER_SIZE,
    ConsumedRecord,
    Record,
    RecordCodec,
    RecordsBuilder,
    build_batch,
    finish_batch,
    new_records_builder,
    parse_header,
    read_batches,
    record_codec,
    validate_batches,
)

RECORDS = [
    Record(b"k%d" % i, b"value %d" % i * (i + 1), [("h", b"1"), ("n", None)] * (i % 3), 1000 + i)
    for i in range(50)
]


def _fill(records: list[Record], capacity: int = 64) -> RecordsBuilder:
    builder = new_records_builder(capacity=capacity)
    for i, (key, value, headers, ts) in enumerate(records):
        assert builder.append(key, value, headers, ts or 0) == i
    return builder


def test_the_active_codec_makes_the_builder(codec: RecordCodec) -> None:
    assert record_codec() is codec
    assert type(new_records_builder()) is type(codec.builder())


def test_empty_builder_state_and_refusal() -> None:
    builder = new_records_builder()
    assert (builder.count, builder.size, builder.finished) == (0, 0, False)
    assert builder.base_timestamp is None and builder.max_timestamp is None
    with pytest.raises(ValueError, match="at least one record"):
        finish_batch(builder)


def test_count_size_and_timestamps_follow_appends() -> None:
    builder = new_records_builder(capacity=64)
    builder.append(None, b"a", (), 50)
    builder.append(None, b"b", (), 40)  # out of order: a negative delta
    builder.append(None, b"c", (), 90)
    assert (builder.count, builder.base_timestamp, builder.max_timestamp) == (3, 50, 90)
    assert builder.size == len(bytes(builder.records()))
    assert builder.finished


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_finish_batch_equals_build_batch(compression: str) -> None:
    builder = _fill(RECORDS)
    built = finish_batch(
        builder,
        compression=compression,
        producer_id=7,
        producer_epoch=2,
        base_sequence=40,
    )
    expected = build_batch(
        RECORDS, compression=compression, producer_id=7, producer_epoch=2, base_sequence=40
    )
    assert built == expected
    [batch] = read_batches(built)
    assert batch.record_list() == [
        ConsumedRecord(i, r.timestamp_ms or 0, r.key, r.value, tuple(r.headers))
        for i, r in enumerate(RECORDS)
    ]


def test_restamping_keeps_the_first_batch_intact() -> None:
    builder = _fill(RECORDS[:5])
    first = finish_batch(builder, producer_id=1, producer_epoch=0, base_sequence=0)
    copy = bytes(first)
    second = finish_batch(builder, producer_id=2, producer_epoch=1, base_sequence=0)
    assert first == copy, "bytes handed out earlier were rewritten"
    assert first[HEADER_SIZE:] == second[HEADER_SIZE:]
    assert parse_header(second).producer_id == 2 and parse_header(first).producer_id == 1
    validate_batches(first + second, require_contiguous=True)
    # Asking for the records after a batch does not change that batch either.
    assert bytes(builder.records()) == first[HEADER_SIZE:]
    assert first == copy


def test_a_finished_builder_refuses_appends() -> None:
    builder = _fill(RECORDS[:2])
    finish_batch(builder)
    with pytest.raises(ValueError, match="finished"):
        builder.append(None, b"x", (), 0)


def test_growth_past_the_initial_capacity_keeps_every_record() -> None:
    big = [Record(None, bytes([i]) * 70_000, (), i) for i in range(5)]
    builder = _fill(big, capacity=64)
    assert finish_batch(builder) == build_batch(big)


def test_header_shapes_and_bytes_like_values() -> None:
    many = [(f"h{i}", bytes([i])) for i in range(20)]  # more than fit the native fast path
    builder = new_records_builder()
    builder.append(b"k", bytearray(b"ba"), many, 1)
    builder.append(memoryview(b"mv"), b"v", [["list", b"pair"]], 2)  # type: ignore[list-item]
    [batch] = read_batches(finish_batch(builder))
    first, second = batch.record_list()
    assert first.value == b"ba" and first.headers == tuple(many)
    assert second.key == b"mv" and second.headers == (("list", b"pair"),)


def test_unencodable_records_leave_the_native_builder_unchanged(codec: RecordCodec) -> None:
    if codec.name != "native":
        pytest.skip("the pure-Python builder encodes at finish; its errors come from there")
    builder = _fill(RECORDS[:3])
    size = builder.size
    for bad in (
        ("text", b"v", (), 5),
        (None, 5, (), 5),
        (None, b"v", [(b"bytes key", None)], 5),
        (None, b"v", [("k", "str value")], 5),
        (None, b"v", [("k",)], 5),
        (None, b"v", (), "soon"),
        (None, b"v", (), 2**64),
    ):
        with pytest.raises((TypeError, ValueError)):
            builder.append(*bad)
    assert (builder.count, builder.size) == (3, size)
    assert finish_batch(builder) == build_batch(RECORDS[:3])


def test_append_thunk_makes_the_same_bytes_and_the_flat_thunks() -> None:
    """``append_thunk`` (the producer's send path) = ``append`` + ``(callback, index, ts)``
    on the list, nothing for a None callback; the batch bytes are a fixed vector."""
    plain, with_thunks = new_records_builder(), new_records_builder()
    thunks: list[object] = []
    cb = print  # any object: it is only stored
    for i, (key, value, headers, ts) in enumerate(RECORDS[:6]):
        assert plain.append(key, value, headers, ts or 0) == i
        callback = cb if i % 2 == 0 else None
        assert with_thunks.append_thunk(key, value, headers, ts or 0, callback, thunks) == i
    assert thunks == [cb, 0, 1000, cb, 2, 1002, cb, 4, 1004]
    assert with_thunks.count == plain.count == 6
    assert with_thunks.records() == plain.records()
    one, thunks = new_records_builder(), []
    one.append_thunk(b"k", b"v", (), 5, cb, thunks)
    assert bytes(one.records()) == bytes.fromhex("10000000026b027600")
    assert thunks == [cb, 0, 5]


def test_append_thunk_refused_changes_nothing(codec: RecordCodec) -> None:
    builder, thunks = new_records_builder(), [print, 0, 1]
    with pytest.raises(TypeError):
        builder.append_thunk(b"k", b"v", (), "not an int", print, thunks)  # type: ignore[arg-type]
    assert thunks == [print, 0, 1] and builder.count == 0
    builder.records()
    with pytest.raises(ValueError):
        builder.append_thunk(b"k", b"v", (), 1, print, thunks)
    assert thunks == [print, 0, 1]


class _Future(tuple):  # type: ignore[type-arg]
    """A tuple subclass with a Python __new__ that append_future must not call."""

    def __new__(cls, *args: object) -> _Future:
        raise AssertionError("append_future builds the tuple directly")


def test_append_future_returns_the_records_future_tuple() -> None:
    builder, plain = new_records_builder(), new_records_builder()
    thunks: list[object] = []
    result = object()
    first = builder.append_future(b"k", b"v", (), 5, print, thunks, result, _Future)
    second = builder.append_future(None, b"w", (), 7, None, thunks, result, _Future)
    plain.append(b"k", b"v", (), 5)
    plain.append(None, b"w", (), 7)
    assert type(first) is _Future and tuple(first) == (result, 0, 5)
    assert tuple(second) == (result, 1, 7)
    assert thunks == [print, 0, 5]
    assert bytes(builder.records()) == bytes(plain.records())


def test_append_future_refused_changes_nothing() -> None:
    builder = new_records_builder()
    thunks: list[object] = []
    with pytest.raises(TypeError):
        builder.append_future(b"k", b"v", (), None, print, thunks, 1, _Future)  # type: ignore[arg-type]
    assert thunks == [] and builder.count == 0
