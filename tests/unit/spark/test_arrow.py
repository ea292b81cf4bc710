"""Arrow conversion: the batch schema Spark demands, and record contents column by column."""

from __future__ import annotations

import datetime

from headwater.records import ConsumedRecord
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
