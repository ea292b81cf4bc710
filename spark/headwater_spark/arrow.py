"""Records to Arrow: the rows Spark sees, built column by column.

Spark's Python data source accepts ``pyarrow.RecordBatch``\\ es from
``read()`` and hands them to the JVM without touching each row; that is
what makes a Python reader fast enough.  The batch's schema must equal, field
for field, what Spark derives from the declared schema (``to_arrow_schema``
with UTC), so :data:`ARROW_SCHEMA` spells it out and a unit test compares the
two.  The columns and their types are those of Spark's Kafka source.

:func:`batches_to_record_batches` is the executors' path: the fetched (CRC-checked)
batches go to a :mod:`headwater.records.columns` builder, which decodes each records
section in one C pass straight into the columns' buffers, and
``pa.Array.from_buffers`` wraps those without a copy (each value is copied once, from
the fetched or decompressed section into its column).  The topic and partition
columns are constants (``pa.repeat``).

:func:`to_record_batch` builds the same batch from decoded records (a ``map`` of an
``itemgetter`` over the records, then one ``pa.array`` per column); tests compare the
two column by column.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence

import pyarrow as pa
from headwater.records import Batch, ConsumedRecord
from headwater.records.columns import BinaryColumn, Columns, add_batch, columns_builder

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
"""The schema of Spark's Kafka source, in Spark's DDL."""
HEADERS_DDL = "headers array<struct<key:string,value:binary>>"
"""The extra column with ``includeHeaders=true``."""

_HEADER_TYPE = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)
_TIMESTAMP_MS = pa.timestamp("ms", tz="UTC")
_TIMESTAMP_US = pa.timestamp("us", tz="UTC")

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", _TIMESTAMP_US),
        pa.field("timestampType", pa.int32()),
    ]
)
ARROW_SCHEMA_WITH_HEADERS = ARROW_SCHEMA.append(pa.field("headers", _HEADER_TYPE))


def schema_ddl(*, include_headers: bool) -> str:
    return f"{SCHEMA_DDL}, {HEADERS_DDL}" if include_headers else SCHEMA_DDL


def arrow_schema(*, include_headers: bool) -> pa.Schema:
    return ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA


def read_columns(schema: pa.Schema, *, include_headers: bool) -> pa.Schema | None:
    """The Arrow schema a read yields for the schema Spark hands the reader: None for
    the source's own schema (every column), else a user-specified schema that names some
    of its columns, with their types, in any order.

    Spark 4.3's Python data source converts every column of every row into its own
    row format and prunes none, so a query that needs only ``value`` costs less when
    the schema names only ``value``.  Raises ValueError for a column the source does not
    have, a type it does not yield, or ``headers`` without ``includeHeaders``.
    """
    full = arrow_schema(include_headers=include_headers)
    if schema.equals(full):
        return None
    names = tuple(schema.names)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"a schema needs distinct column names, not {list(names)}")
    for field in schema:
        if field.name == "headers" and not include_headers:
            raise ValueError("the schema names headers: set includeHeaders to true")
        index = ARROW_SCHEMA_WITH_HEADERS.get_field_index(field.name)
        if index < 0:
            raise ValueError(
                f"the schema names column {field.name!r}, which the source does not have "
                f"(it has {', '.join(ARROW_SCHEMA_WITH_HEADERS.names)})"
            )
        want = ARROW_SCHEMA_WITH_HEADERS.field(index).type
        if not field.type.equals(want):
            raise ValueError(
                f"column {field.name!r} is {schema_ddl(include_headers=True).split(', ')[index]}"
                f", not {field.type}"
            )
    return schema


def select(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The columns of ``batch`` that ``schema`` names, as ``schema`` types them (no copy)."""
    return pa.RecordBatch.from_arrays([batch.column(n) for n in schema.names], schema=schema)


_offset, _timestamp, _key, _value, _headers = (operator.itemgetter(i) for i in range(5))
"""A record's fields by position (:class:`ConsumedRecord`'s order; the decoders' plain
tuples have the same)."""


def to_record_batch(
    topic: str,
    partition: int,
    chunks: Sequence[tuple[Sequence[ConsumedRecord], int]],
    *,
    include_headers: bool,
) -> pa.RecordBatch:
    """One Arrow batch from ``(records, timestamp_type)`` chunks of one partition."""
    recs: list[ConsumedRecord] = []
    spans: list[tuple[int, int]] = []
    for records, timestamp_type in chunks:
        if records:
            recs += records
            spans.append((len(records), timestamp_type))
    n = len(recs)
    arrays = [
        _binary(list(map(_key, recs)), n),
        _binary(list(map(_value, recs)), n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(list(map(_offset, recs)), pa.int64()),
        pa.array(list(map(_timestamp, recs)), _TIMESTAMP_MS).cast(_TIMESTAMP_US),
        _timestamp_types(spans, n),
    ]
    if include_headers:
        arrays.append(
            pa.array(
                [
                    [{"key": k, "value": v} for k, v in hs] if hs else []
                    for hs in map(_headers, recs)
                ],
                _HEADER_TYPE,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers=include_headers))


def _binary(column: list[bytes | None], n: int) -> pa.Array:
    """A binary column; all-null (records without keys) made without a look at each item,
    which ``pa.array`` takes its slow path for."""
    if column.count(None) == n:
        return pa.nulls(n, pa.binary())
    return pa.array(column, pa.binary())


def _timestamp_types(spans: list[tuple[int, int]], n: int) -> pa.Array:
    """The ``timestampType`` column from ``(record count, type)`` per batch."""
    kinds = {kind for _, kind in spans}
    if len(kinds) <= 1:
        return pa.repeat(pa.scalar(kinds.pop() if kinds else 0, pa.int32()), n)
    types: list[int] = []
    for count, kind in spans:
        types += [kind] * count
    return pa.array(types, pa.int32())


MAX_BATCH_DATA = 1 << 30
"""Bytes of keys, values and headers after which an Arrow batch is cut (binary columns
have int32 offsets; a fetch answer is far smaller)."""


def batches_to_record_batches(
    topic: str,
    partition: int,
    batches: Sequence[Batch],
    *,
    start: int,
    end: int,
    include_headers: bool,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records of ``batches`` (data batches, CRC-checked) in
    ``[start, end)``: one batch, unless the data pass :data:`MAX_BATCH_DATA`."""
    builder = columns_builder(headers=include_headers)
    builder.reserve(
        sum(b.header.records_count for b in batches),
        sum(b.header.size_in_bytes for b in batches),
    )
    for batch in batches:
        add_batch(builder, batch, start=start, end=end)
        if builder.data_size >= MAX_BATCH_DATA:
            yield columns_to_record_batch(
                topic, partition, Columns.from_tuple(builder.finish()), include_headers
            )
    if builder.count:
        yield columns_to_record_batch(
            topic, partition, Columns.from_tuple(builder.finish()), include_headers
        )


def columns_to_record_batch(
    topic: str, partition: int, columns: Columns, include_headers: bool
) -> pa.RecordBatch:
    """The Arrow batch of a builder's columns; the buffers are wrapped, not copied."""
    n = columns.rows
    arrays = [
        _binary_array(pa.binary(), n, columns.key),
        _binary_array(pa.binary(), n, columns.value),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(columns.offsets)]),
        pa.Array.from_buffers(_TIMESTAMP_US, n, [None, pa.py_buffer(columns.timestamps)]),
        pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(columns.timestamp_types)]),
    ]
    if include_headers:
        h = columns.headers
        if h is None:
            raise ValueError("the columns were built without headers")
        entries = pa.StructArray.from_arrays(
            [
                _binary_array(pa.string(), h.total, h.key),
                _binary_array(pa.binary(), h.total, h.value),
            ],
            fields=list(_HEADER_TYPE.value_type),
        )
        arrays.append(
            pa.Array.from_buffers(
                _HEADER_TYPE, n, [None, pa.py_buffer(h.offsets)], children=[entries]
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers=include_headers))


def _binary_array(kind: pa.DataType, n: int, column: BinaryColumn) -> pa.Array:
    validity = None if column.validity is None else pa.py_buffer(column.validity)
    return pa.Array.from_buffers(
        kind,
        n,
        [validity, pa.py_buffer(column.offsets), pa.py_buffer(column.data)],
        null_count=column.null_count,
    )
