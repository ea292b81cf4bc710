"""Records sections decoded into Arrow column buffers: the C builder and the pure-Python one
write the same bytes for a mixed stream (headers, null and empty keys and values, each
compression codec, a transaction, LogAppendTime, ranges cut inside batches), and a
malformed or truncated section is refused with CorruptRecordError and adds nothing."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from typing import Any

import pytest
from crc32c import crc32c
from headwater import errors, records
from headwater.records import columns
from headwater.records.columns import Columns, PythonColumnsBuilder, add_batch

from tests.unit.client.test_decode_paths_agree import mixed_stream

native_columns = pytest.mark.skipif(
    not columns.native_columns_available(), reason="native columns builder not built"
)

Builder = Callable[[bool], columns.ColumnsBuilder]


def c_builder(headers: bool) -> columns.ColumnsBuilder:
    from headwater.records import _arrow

    return _arrow.ColumnsBuilder(headers)


def py_builder(headers: bool) -> columns.ColumnsBuilder:
    return PythonColumnsBuilder(headers=headers)


BUILDERS = [
    pytest.param(c_builder, id="c", marks=native_columns),
    pytest.param(py_builder, id="python"),
]


STREAM = mixed_stream()
"""One stream for the whole module (its values are random)."""


def data_batches() -> list[records.Batch]:
    return [b for b in records.read_batches(STREAM) if not b.is_control]


def build(builder: columns.ColumnsBuilder, start: int, end: int) -> Columns:
    for b in data_batches():
        add_batch(builder, b, start=start, end=end)
    return Columns.from_tuple(builder.finish())


def as_bytes(buffer: Any) -> bytes | None:
    return None if buffer is None else bytes(memoryview(buffer).cast("B"))


def ints(buffer: Any, fmt: str) -> list[int]:
    return list(memoryview(as_bytes(buffer) or b"").cast(fmt))


def flat(cols: Columns) -> list[Any]:
    """Every buffer's bytes and every count, in order."""
    out: list[Any] = []
    for item in cols:
        if isinstance(item, tuple):
            out += flat(item)  # type: ignore[arg-type]
        elif isinstance(item, int) or item is None:
            out.append(item)
        else:
            out.append(as_bytes(item))
    return out


@native_columns
@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize(("start", "end"), [(0, 10**6), (17, 212), (100, 101), (300, 400)])
def test_c_and_python_builders_write_the_same_buffers(headers: bool, start: int, end: int) -> None:
    got = build(c_builder(headers), start, end)
    want = build(py_builder(headers), start, end)
    assert flat(got) == flat(want)
    assert (got.headers is None) is not headers


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_columns_hold_the_decoded_records(builder: Builder) -> None:
    """Checked against the record codec's records, field by field."""
    want = [
        (r, int(b.timestamp_type))
        for b in data_batches()
        for r in b.record_list()
        if 17 <= r.offset < 212
    ]
    cols = build(builder(True), 17, 212)
    assert cols.rows == len(want) > 100
    assert ints(cols.offsets, "q") == [r.offset for r, _ in want]
    assert ints(cols.timestamps, "q") == [r.timestamp_ms * 1000 for r, _ in want]
    assert ints(cols.timestamp_types, "i") == [t for _, t in want]
    assert {t for _, t in want} == {0, 1}
    assert items(cols.key) == [r.key for r, _ in want]
    assert items(cols.value) == [r.value for r, _ in want]
    h = cols.headers
    assert h is not None
    ends = ints(h.offsets, "i")
    keys = [k.decode() if k is not None else None for k in items(h.key)]
    values = items(h.value)
    got_headers = [
        tuple(zip(keys[a:b], values[a:b], strict=True)) for a, b in itertools.pairwise(ends)
    ]
    assert got_headers == [r.headers for r, _ in want]
    assert any(r.key is None for r, _ in want) and any(r.value == b"" for r, _ in want)
    assert any(("null", None) in r.headers for r, _ in want)


def items(column: columns.BinaryColumn) -> list[bytes | None]:
    ends = ints(column.offsets, "i")
    data = as_bytes(column.data) or b""
    bits = as_bytes(column.validity)
    out: list[bytes | None] = []
    for i, (a, b) in enumerate(itertools.pairwise(ends)):
        present = bits is None or bits[i >> 3] >> (i & 7) & 1
        out.append(data[a:b] if present else None)
    assert sum(x is None for x in out) == column.null_count
    return out


@pytest.mark.parametrize("builder", BUILDERS)
def test_an_empty_finish_and_a_reused_builder(builder: Builder) -> None:
    b = builder(True)
    empty = Columns.from_tuple(b.finish())
    assert empty.rows == 0 and as_bytes(empty.key.offsets) == b"\0\0\0\0"
    assert build(b, 0, 10**6).rows == build(builder(True), 0, 10**6).rows


# -- malformed sections -----------------------------------------------------------------

ONE = bytes([0x12, 0, 0, 0, 0x02, 0x6B, 0x04]) + b"vv" + b"\x00"
"""One record: length 9, attributes, ts delta 0, offset delta 0, key b"k", value b"vv", no
headers."""


def header_record(key: bytes) -> bytes:
    body = b"\x00\x00\x00\x01\x01\x02" + bytes([len(key) * 2]) + key + b"\x01"
    return bytes([len(body) * 2]) + body


BAD = [
    pytest.param(ONE[:-3], 1, "runs past the end", id="truncated"),
    pytest.param(ONE + b"\x00", 1, "bytes left after", id="trailing-bytes"),
    pytest.param(ONE, 2, "runs past the end", id="count-too-high"),
    pytest.param(bytes([0x0E, 0, 0, 0, 0x03]) + b"\x02vv\x00", 1, "key length", id="neg-key"),
    pytest.param(bytes([0x0E, 0, 0, 0, 0x02, 0x6B, 0x05, 0x00]), 1, "value length", id="neg-val"),
    pytest.param(b"\x10" + ONE[1:], 1, "record length", id="length-disagrees"),
    pytest.param(b"\xff" * 11, 1, "longer than 10 bytes|varint", id="long-varint"),
    pytest.param(header_record(b"\xff\xfe"), 1, "UTF-8", id="header-key-not-utf8"),
    pytest.param(ONE, -1, "negative recordsCount", id="negative-count"),
]


@pytest.mark.parametrize("builder", BUILDERS)
@pytest.mark.parametrize(("data", "count", "message"), BAD)
def test_a_malformed_section_is_refused_and_adds_nothing(
    builder: Builder, data: bytes, count: int, message: str
) -> None:
    b = builder(True)
    assert b.add(ONE, 1, 0, 1000, None, 0, 0, 10) == 1
    with pytest.raises(errors.CorruptRecordError, match=message):
        b.add(data, count, 1, 1000, None, 0, 0, 10)
    assert b.count == 1
    assert b.add(ONE, 1, 2, 1000, None, 0, 0, 10) == 1
    cols = Columns.from_tuple(b.finish())
    assert ints(cols.offsets, "q") == [0, 2]
    assert items(cols.value) == [b"vv", b"vv"] and items(cols.key) == [b"k", b"k"]
    assert cols.headers is not None and (ints(cols.headers.offsets, "i")) == [
        0,
        0,
        0,
    ]


def test_the_test_record_is_what_the_codec_reads() -> None:
    """``ONE`` and ``header_record`` are valid records (so each bad case is bad for the
    reason it names)."""
    codec = records.PythonRecordCodec()
    (r,) = codec.decode(ONE, count=1, base_offset=5, base_timestamp=9, log_append_time=None)
    assert r == records.ConsumedRecord(5, 9, b"k", b"vv", ())
    (h,) = codec.decode(
        header_record("é".encode()), count=1, base_offset=0, base_timestamp=0, log_append_time=None
    )
    assert h.headers == (("é", None),)


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_corrupt_batch_names_its_offset(builder: Builder) -> None:
    raw = bytearray(records.build_batch([records.Record(b"k", b"v" * 50)], compression="lz4"))
    raw[-10:] = b"\xff" * 10  # the compressed records
    raw[17:21] = struct.pack(">I", crc32c(bytes(raw[21:])))
    (batch,) = records.read_batches(bytes(raw))
    with pytest.raises(errors.CorruptRecordError, match="batch at offset 0"):
        add_batch(builder(False), batch, start=0, end=10)


def test_the_pure_python_switch_picks_the_python_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HEADWATER_PURE_PYTHON_RECORDS", "1")
    assert isinstance(columns.columns_builder(headers=False), PythonColumnsBuilder)
    monkeypatch.delenv("HEADWATER_PURE_PYTHON_RECORDS")
    chosen = columns.columns_builder(headers=False)
    assert isinstance(chosen, PythonColumnsBuilder) is not columns.native_columns_available()


@native_columns
def test_a_c_builder_without_init_refuses_work() -> None:
    from headwater.records import _arrow

    b = _arrow.ColumnsBuilder.__new__(_arrow.ColumnsBuilder)
    with pytest.raises(RuntimeError, match="__init__"):
        b.add(ONE, 1, 0, 0, None, 0, 0, 10)
    with pytest.raises(RuntimeError, match="__init__"):
        b.finish()
