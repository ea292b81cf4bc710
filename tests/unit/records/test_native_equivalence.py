"""The native record codec against the pure-Python one (the reference), by hypothesis.

For any records both encode the same bytes, both builders (fed record by
record) produce those bytes too, both decode them to equal ``ConsumedRecord``
lists, and for damaged input (a byte changed, bytes cut or inserted, a wrong
record count, random bytes) both raise CorruptRecordError or both return the
same records.  Runs only where the C extension is built.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from headwater.errors import CorruptRecordError
from headwater.records import (
    ConsumedRecord,
    NativeRecordCodec,
    PythonRecordCodec,
    Record,
    RecordCodec,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.records.conftest import make_codec


@pytest.fixture(scope="module", autouse=True)
def codec() -> Iterator[RecordCodec]:
    """Overrides the conftest's: this module compares both codecs itself."""
    yield make_codec("native")


PY = PythonRecordCodec()

# Values of 512 bytes and more take the native builder's by-reference path.
blobs = st.none() | st.binary(max_size=200) | st.binary(min_size=500, max_size=1200)
headers = st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=30)), max_size=10)
timestamps = st.none() | st.integers(min_value=-(2**40), max_value=2**45)
records = st.builds(Record, blobs, blobs, headers, timestamps)
record_lists = st.lists(records, min_size=1, max_size=30)


def _native() -> NativeRecordCodec:
    return NativeRecordCodec()


def _decode(codec: RecordCodec, data: bytes, count: int) -> list[ConsumedRecord] | str:
    """The records, or "corrupt" when the codec raised CorruptRecordError."""
    try:
        return codec.decode(
            data, count=count, base_offset=1000, base_timestamp=7, log_append_time=None
        )
    except CorruptRecordError:
        return "corrupt"


@settings(deadline=None, max_examples=200)
@given(record_lists, st.integers(min_value=0, max_value=2**45))
def test_encode_is_byte_for_byte_the_same(batch: list[Record], default_ts: int) -> None:
    assert _native().encode(batch, default_timestamp_ms=default_ts) == PY.encode(
        batch, default_timestamp_ms=default_ts
    )


@settings(deadline=None, max_examples=150)
@given(record_lists, st.integers(min_value=0, max_value=2**45))
def test_builders_match_encode(batch: list[Record], default_ts: int) -> None:
    expected = PY.encode(batch, default_timestamp_ms=default_ts)
    for codec in (PY, _native()):
        builder = codec.builder(capacity=64)
        for i, (key, value, hdrs, ts) in enumerate(batch):
            assert builder.append(key, value, hdrs, default_ts if ts is None else ts) == i
        assert builder.count == len(batch)
        assert builder.size == len(expected.data)
        assert (builder.base_timestamp, builder.max_timestamp) == expected[1:]
        assert bytes(builder.records()) == expected.data


@settings(deadline=None, max_examples=150)
@given(record_lists, st.none() | st.integers(min_value=0, max_value=2**45))
def test_decode_gives_equal_records(batch: list[Record], log_append_time: int | None) -> None:
    data = PY.encode(batch, default_timestamp_ms=3).data
    args = {"count": len(batch), "base_offset": 2**40, "base_timestamp": 3}
    py = PY.decode(data, log_append_time=log_append_time, **args)
    native = _native().decode(data, log_append_time=log_append_time, **args)
    assert native == py
    assert all(type(r) is ConsumedRecord for r in native)
    assert _native().decode(memoryview(data), log_append_time=log_append_time, **args) == py


@settings(deadline=None, max_examples=300)
@given(
    record_lists,
    st.sampled_from(["flip", "cut", "insert", "count"]),
    st.integers(min_value=0, max_value=10_000),
    st.binary(min_size=1, max_size=4),
)
def test_damage_is_caught_by_both_or_neither(
    batch: list[Record], how: str, where: int, noise: bytes
) -> None:
    data = bytearray(PY.encode(batch, default_timestamp_ms=3).data)
    count = len(batch)
    at = where % len(data)
    if how == "flip":
        data[at] ^= noise[0] or 1
    elif how == "cut":
        del data[at : at + len(noise)]
    elif how == "insert":
        data[at:at] = noise
    else:
        count += (where % 5) - 2 or 1
    damaged = bytes(data)
    assert _decode(_native(), damaged, count) == _decode(PY, damaged, count)


@settings(deadline=None, max_examples=300)
@given(st.binary(max_size=60), st.integers(min_value=-1, max_value=6))
def test_random_bytes_are_judged_alike(data: bytes, count: int) -> None:
    assert _decode(_native(), data, count) == _decode(PY, data, count)


@pytest.mark.parametrize(
    "varint",
    [
        b"\xff" * 9 + b"\x02",  # a tenth byte beyond 64 bits
        b"\x80" * 10 + b"\x00",  # eleven bytes
    ],
)
def test_overlong_varints_are_corrupt_in_both(varint: bytes) -> None:
    # A record whose timestampDelta is the bad varint.
    body = b"\x00" + varint + b"\x00\x01\x01\x00"
    data = bytes([len(body) * 2]) + body
    assert _decode(PY, data, 1) == "corrupt"
    assert _decode(_native(), data, 1) == "corrupt"


def test_encode_refuses_what_python_refuses() -> None:
    for bad in (Record("text", None), Record(None, 5), Record(None, None, [(b"k", None)])):  # type: ignore[arg-type]
        with pytest.raises((TypeError, AttributeError)):
            PY.encode([bad], default_timestamp_ms=0)
        with pytest.raises(TypeError):
            _native().encode([bad], default_timestamp_ms=0)
    with pytest.raises(ValueError):
        _native().encode([], default_timestamp_ms=0)
