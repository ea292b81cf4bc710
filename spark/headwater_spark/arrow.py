"""Records to Arrow: the rows Spark sees, built column by column.

Spark's Python data source accepts ``pyarrow.RecordBatch``\\ es from
``read()`` and hands them to the JVM without touching each row; that is
what makes a Python reader fast enough.  The batch's schema must equal, field
for field, what Spark derives from the declared schema (``to_arrow_schema``
with UTC), so :data:`ARROW_SCHEMA` spells it out and a unit test compares the
two.  The columns and their types are those of Spark's Kafka source.

:func:`to_record_batch` takes decoded batches (the records of one
RecordBatch v2 share a timestamp type) and builds each column in C: a
``map`` of an ``itemgetter`` over the records, then one ``pa.array`` call (a
column of constants, or of nulls only, is made without a look at each record).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import pyarrow as pa
from headwater.records import ConsumedRecord

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
