"""Property tests: any records survive build_batch -> read_batches unchanged.

Keys, values and header values may be None or empty; header keys are any
Unicode text; timestamps may be absent, out of order or negative deltas; the
offsets come back as base_offset + index; all five codecs.  Several batches
in one buffer read back in order, and validate_batches accepts what
build_batch makes.
"""

from __future__ import annotations

from headwater.records import (
    Compression,
    ConsumedRecord,
    Record,
    build_batch,
    read_batches,
    validate_batches,
)
from hypothesis import given, settings
from hypothesis import strategies as st

blobs = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=40)), max_size=4)
timestamps = st.none() | st.integers(min_value=0, max_value=2**45)
records = st.builds(Record, blobs, blobs, headers, timestamps)
codecs = st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"])


def _expected(batch: list[Record], base_offset: int, default_ts: int) -> list[ConsumedRecord]:
    return [
        ConsumedRecord(
            base_offset + i,
            default_ts if r.timestamp_ms is None else r.timestamp_ms,
            r.key,
            r.value,
            tuple(r.headers),
        )
        for i, r in enumerate(batch)
    ]


@settings(deadline=None, max_examples=150)
@given(
    st.lists(records, min_size=1, max_size=40),
    codecs,
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**45),
)
def test_records_round_trip(
    batch: list[Record], compression: str, base_offset: int, default_ts: int
) -> None:
    data = build_batch(
        batch, base_offset=base_offset, compression=compression, timestamp_ms=default_ts
    )
    [header] = validate_batches(data)
    assert header.compression is Compression.parse(compression)
    assert header.records_count == len(batch)
    assert header.last_offset == base_offset + len(batch) - 1
    expected = _expected(batch, base_offset, default_ts)
    assert header.base_timestamp == expected[0].timestamp_ms
    assert header.max_timestamp == max(r.timestamp_ms for r in expected)
    [got] = read_batches(data)
    assert list(got.records()) == expected


@settings(deadline=None, max_examples=30)
@given(st.lists(st.lists(records, min_size=1, max_size=5), min_size=1, max_size=5), codecs)
def test_many_batches_in_one_buffer(batches: list[list[Record]], compression: str) -> None:
    offset = 0
    parts, expected = [], []
    for batch in batches:
        parts.append(
            build_batch(batch, base_offset=offset, compression=compression, timestamp_ms=1)
        )
        expected += _expected(batch, offset, 1)
        offset += len(batch)
    data = b"".join(parts)
    assert len(validate_batches(data)) == len(batches)
    assert [r for b in read_batches(memoryview(data)) for r in b.records()] == expected


def test_many_records_cross_the_varint_table() -> None:
    # 20 000 offset deltas and a few large values exercise the multi-byte varint paths.
    batch = [Record(None, b"v", timestamp_ms=5) for _ in range(20_000)]
    batch.append(Record(b"k" * 70_000, b"x" * 200_000, [("h" * 300, b"y" * 20_000)], 4))
    for compression in ("none", "lz4"):
        data = build_batch(batch, base_offset=0, compression=compression)
        [got] = read_batches(data)
        assert list(got.records()) == _expected(batch, 0, 0)
