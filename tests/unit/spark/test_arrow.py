"""Arrow conversion: the batch schema Spark demands, and record contents column by column."""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pytest
from headwater import records
from headwater.client.consumer.range_reader import decode_range
from headwater.records import ConsumedRecord, columns
from headwater_spark import arrow
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tests.unit.client.test_decode_paths_agree import mixed_stream

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
HEADERS = StructField(
    "headers",
    ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
)


def test_arrow_schemas_equal_what_spark_derives_from_the_kafka_schema() -> None:
    assert to_arrow_schema(KAFKA_SCHEMA, timezone="UTC").equals(arrow.ARROW_SCHEMA)
    with_headers = StructType([*KAFKA_SCHEMA.fields, HEADERS])
    assert to_arrow_schema(with_headers, timezone="UTC").equals(arrow.ARROW_SCHEMA_WITH_HEADERS)


def test_ddl_names_the_same_columns() -> None:
    names = [part.split()[0] for part in arrow.schema_ddl(include_headers=True).split(", ")]
    assert names == [*KAFKA_SCHEMA.fieldNames(), "headers"]


def test_records_become_rows() -> None:
    chunks = [
        ([ConsumedRecord(5, 1_700_000_000_123, b"k", None, (("h", b"v"), ("n", None)))], 0),
        ([ConsumedRecord(6, 1_700_000_000_456, None, b"v", ())], 1),
        ([], 0),
    ]
    batch = arrow.to_record_batch("orders", 3, chunks, include_headers=True)
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [5, 6]
    assert rows[0]["key"] == b"k" and rows[0]["value"] is None
    assert rows[1]["key"] is None and rows[1]["value"] == b"v"
    assert {r["topic"] for r in rows} == {"orders"} and {r["partition"] for r in rows} == {3}
    assert [r["timestampType"] for r in rows] == [0, 1]
    assert rows[0]["timestamp"] == datetime.datetime(
        2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.UTC
    )
    assert rows[0]["headers"] == [{"key": "h", "value": b"v"}, {"key": "n", "value": None}]
    assert rows[1]["headers"] == []


def test_without_headers_there_is_no_headers_column() -> None:
    batch = arrow.to_record_batch(
        "t", 0, [([ConsumedRecord(0, 0, None, b"x", (("h", b"v"),))], 0)], include_headers=False
    )
    assert batch.schema.equals(arrow.ARROW_SCHEMA)
    assert batch.num_rows == 1


def _previous_record_batch(
    topic: str, partition: int, chunks: Any, *, include_headers: bool
) -> pa.RecordBatch:
    """The column building ``to_record_batch`` replaced (``zip(*rows)`` and one
    ``pa.array`` per column, every column from a list): the reference it must equal."""
    offsets: list[int] = []
    stamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers: list[object] = []
    types: list[int] = []
    for recs, timestamp_type in chunks:
        if not recs:
            continue
        cols = list(zip(*recs, strict=True))
        offsets.extend(cols[0])
        stamps.extend(cols[1])
        keys.extend(cols[2])
        values.extend(cols[3])
        if include_headers:
            headers.extend([{"key": k, "value": v} for k, v in hs] if hs else [] for hs in cols[4])
        types.extend([timestamp_type] * len(recs))
    n = len(offsets)
    ts_ms = pa.timestamp("ms", tz="UTC")
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, ts_ms).cast(pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array(headers, arrow.ARROW_SCHEMA_WITH_HEADERS.field("headers").type))
    return pa.RecordBatch.from_arrays(
        arrays, schema=arrow.arrow_schema(include_headers=include_headers)
    )


def _assert_same_batch(got: pa.RecordBatch, want: pa.RecordBatch) -> None:
    assert got.schema.equals(want.schema) and got.num_rows == want.num_rows
    for name in want.schema.names:
        assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
        assert got.column(name).null_count == want.column(name).null_count, name
    assert got.equals(want)


@pytest.mark.parametrize("codec", ["python", "native"])
@pytest.mark.parametrize("include_headers", [False, True])
@pytest.mark.parametrize("start", [0, 17])
def test_columns_equal_the_previous_row_transpose(
    codec: str, include_headers: bool, start: int
) -> None:
    """Decoded fetch data of every kind (null, empty and present keys and values,
    headers, both timestamp types, compression, a control batch, a cut batch) and
    chunks without keys at all: the same Arrow batch as the row-by-row path."""
    if codec == "native" and not records.native_available():
        pytest.skip("native record codec not built")
    chosen = records.NativeRecordCodec() if codec == "native" else records.PythonRecordCodec()
    previous = records.record_codec()
    records.set_record_codec(chosen)
    try:
        decoded = decode_range(list(records.read_batches(mixed_stream())), start=start, end=212)
        no_keys = records.build_batch([records.Record(None, b"v%d" % i) for i in range(9)])
        keyless = decode_range(list(records.read_batches(no_keys)), start=0, end=9)
    finally:
        records.set_record_codec(previous)
    cases = [
        [(d.records, d.timestamp_type) for d in decoded],
        [(d.records, d.timestamp_type) for d in keyless],
        [([], 0), ([], 1)],
        [(decoded[0].records, 1), ([], 0), (keyless[0].records, 1)],
    ]
    assert {t for _, t in cases[0]} == {0, 1}, "both timestamp types are in the stream"
    for chunks in cases:
        _assert_same_batch(
            arrow.to_record_batch("mixed-é", 3, chunks, include_headers=include_headers),
            _previous_record_batch("mixed-é", 3, chunks, include_headers=include_headers),
        )


@pytest.mark.parametrize("builder", ["c", "python"])
@pytest.mark.parametrize("include_headers", [False, True])
@pytest.mark.parametrize(("start", "end"), [(0, 10**6), (17, 212), (41, 42)])
def test_batches_decoded_into_columns_equal_the_records_path(
    builder: str,
    include_headers: bool,
    start: int,
    end: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mixed stream (headers, null and empty keys and values, every codec, a
    transaction's batches, LogAppendTime, a cut batch) built straight into columns, by
    the C builder and by the pure-Python one: the Arrow batch of the decoded records."""
    if builder == "c" and not columns.native_columns_available():
        pytest.skip("native columns builder not built")
    if builder == "python":
        monkeypatch.setenv("HEADWATER_PURE_PYTHON_RECORDS", "1")
    batches = [b for b in records.read_batches(mixed_stream()) if not b.is_control]
    want = arrow.to_record_batch(
        "mixed-é",
        3,
        [(d.records, d.timestamp_type) for d in decode_range(batches, start=start, end=end)],
        include_headers=include_headers,
    )
    got = list(
        arrow.batches_to_record_batches(
            "mixed-é", 3, batches, start=start, end=end, include_headers=include_headers
        )
    )
    assert len(got) == 1
    got[0].validate(full=True)
    _assert_same_batch(got[0], want)


def test_no_records_in_range_make_no_batch() -> None:
    batches = list(records.read_batches(records.build_batch([records.Record(None, b"v")] * 3)))
    assert (
        list(
            arrow.batches_to_record_batches("t", 0, batches, start=3, end=9, include_headers=False)
        )
        == []
    )


def test_a_batch_is_cut_when_its_data_pass_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow, "MAX_BATCH_DATA", 250)
    raws = [
        records.build_batch([records.Record(None, b"x" * 100)] * 2, base_offset=2 * i)
        for i in range(4)
    ]
    batches = list(records.read_batches(b"".join(raws)))
    got = list(
        arrow.batches_to_record_batches("t", 0, batches, start=1, end=8, include_headers=True)
    )
    assert [b.num_rows for b in got] == [3, 4]  # cut once 250 bytes are held
    assert [o for b in got for o in b.column("offset").to_pylist()] == list(range(1, 8))


def test_a_schema_naming_some_columns_selects_them() -> None:
    full = arrow.ARROW_SCHEMA_WITH_HEADERS
    assert arrow.read_columns(arrow.ARROW_SCHEMA, include_headers=False) is None
    assert arrow.read_columns(full, include_headers=True) is None
    narrow = pa.schema([full.field("value"), full.field("offset")])
    assert arrow.read_columns(narrow, include_headers=False) is narrow
    spark_narrow = to_arrow_schema(
        StructType([StructField("headers", HEADERS.dataType), StructField("key", BinaryType())]),
        timezone="UTC",
    )
    assert arrow.read_columns(spark_narrow, include_headers=True) is spark_narrow
    chunks = [([ConsumedRecord(5, 1000, b"k", b"v", (("h", None),))], 0)]
    batch = arrow.to_record_batch("t", 0, chunks, include_headers=True)
    picked = arrow.select(batch, spark_narrow)
    assert picked.schema.equals(spark_narrow)
    assert picked.to_pylist() == [{"headers": [{"key": "h", "value": None}], "key": b"k"}]


@pytest.mark.parametrize(
    ("fields", "include_headers", "message"),
    [
        ([pa.field("size", pa.int32())], False, "does not have"),
        ([pa.field("offset", pa.int32())], False, "column 'offset' is offset long, not int32"),
        ([arrow.ARROW_SCHEMA_WITH_HEADERS.field("headers")], False, "includeHeaders"),
        ([pa.field("value", pa.binary())] * 2, False, "distinct column names"),
        ([], False, "distinct column names"),
    ],
)
def test_a_schema_the_source_cannot_yield_is_refused(
    fields: list[pa.Field], include_headers: bool, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        arrow.read_columns(pa.schema(fields), include_headers=include_headers)
