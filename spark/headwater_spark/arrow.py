"""Records to Arrow: the rows Spark sees, built column by column.

Spark's Python data source accepts ``pyarrow.RecordBatch``\\ es from
``read()`` and hands them to the JVM without touching each row; that is
what makes a Python reader fast enough.  The batch's schema must equal, field
for field, what Spark derives from the declared schema (``to_arrow_schema``
with UTC), so :data:`ARROW_SCHEMA` spells it out and a unit test compares the
two.  The columns and their types are those of Spark's Kafka source.

:func:`to_record_batch` takes decoded batches (the records of one
RecordBatch v2 share a timestamp type) and transposes them with ``zip(*rows)``,
which builds each column in C, then converts each column with one
``pa.array`` call.
"""

from __future__ import annotations

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


def to_record_batch(
    topic: str,
    partition: int,
    chunks: Sequence[tuple[Sequence[ConsumedRecord], int]],
    *,
    include_headers: bool,
) -> pa.RecordBatch:
    """One Arrow batch from ``(records, timestamp_type)`` chunks of one partition."""
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
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pa.array(stamps, _TIMESTAMP_MS).cast(_TIMESTAMP_US),
        pa.array(types, pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array(headers, _HEADER_TYPE))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema(include_headers=include_headers))
