"""Executor side of a write: Arrow batches of rows to records through the Producer.

The columns are those of Spark's Kafka sink: ``value`` (required), and
optionally ``key``, ``topic`` (unless the ``topic`` option is set, which
overrides it), ``partition`` and ``headers`` (``array<struct<key: string,
value: binary>>``); keys and values may be strings (sent as UTF-8) or binary.
Other columns are ignored, as by the Kafka sink.  :func:`check_columns` runs
on the driver so a bad schema fails before any task starts.

Each task uses its own :class:`headwater.Producer` (``acks=all`` unless the
options say otherwise), sends every row, flushes, and fails the task with the
first delivery error; a failed task is retried by Spark, which can duplicate
records, as with the Kafka sink (at-least-once).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from headwater.client.producer.producer import Producer
from headwater.client.types import RecordMetadata

from headwater_spark.options import OptionError, WriteOptions

_TEXT_OR_BINARY = ("string", "binary")


def check_columns(types: Mapping[str, str], *, topic_option: str | None) -> None:
    """Fail naming the column when the DataFrame cannot be written (Spark type names)."""
    lowered = {k.lower(): v for k, v in types.items()}
    if "value" not in lowered:
        raise OptionError("a headwater write needs a 'value' column (string or binary)")
    for name in ("key", "value"):
        if name in lowered and lowered[name] not in _TEXT_OR_BINARY:
            raise OptionError(f"column {name!r} must be string or binary, not {lowered[name]}")
    if topic_option is None:
        if "topic" not in lowered:
            raise OptionError("a headwater write needs a 'topic' column or the 'topic' option")
        if lowered["topic"] != "string":
            raise OptionError(f"column 'topic' must be a string, not {lowered['topic']}")
    if "partition" in lowered and lowered["partition"] not in ("int", "bigint", "smallint"):
        raise OptionError(f"column 'partition' must be an int, not {lowered['partition']}")
    if "headers" in lowered and lowered["headers"].replace(" ", "") not in (
        "array<struct<key:string,value:binary>>",
        "array<struct<key:string,value:string>>",
    ):
        raise OptionError(
            "column 'headers' must be array<struct<key:string,value:binary>>, "
            f"not {lowered['headers']}"
        )


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    for i, field in enumerate(batch.schema):
        if field.name.lower() == name:
            return list(batch.column(i).to_pylist())
    return None


class _Errors:
    """The first delivery error of a task (callbacks run on the producer's thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first: BaseException | None = None

    def callback(self, _meta: RecordMetadata | None, error: BaseException | None) -> None:
        if error is not None:
            with self.lock:
                if self.first is None:
                    self.first = error


def write_batches(
    batches: Iterable[pa.RecordBatch],
    opts: WriteOptions,
    *,
    producer_factory: Callable[..., Producer] = Producer,
) -> int:
    """Send every row of ``batches``; return how many were sent (raise on any failure)."""
    sent = 0
    failures = _Errors()
    producer = producer_factory(opts.bootstrap_servers, **opts.producer)
    try:
        for batch in batches:
            n = batch.num_rows
            if n == 0:
                continue
            values = _column(batch, "value")
            if values is None:
                raise OptionError("a headwater write needs a 'value' column")
            keys: Sequence[Any] = _column(batch, "key") or [None] * n
            parts: Sequence[Any] = _column(batch, "partition") or [None] * n
            hdrs: Sequence[Any] = _column(batch, "headers") or [None] * n
            topics: Sequence[Any]
            if opts.topic is not None:
                topics = [opts.topic] * n
            else:
                found = _column(batch, "topic")
                if found is None:
                    raise OptionError("a headwater write needs a 'topic' column or option")
                topics = found
            send = producer.send
            callback = failures.callback
            for topic, key, value, partition, headers in zip(
                topics, keys, values, parts, hdrs, strict=True
            ):
                if topic is None:
                    raise ValueError("null topic in a row (set the 'topic' option or column)")
                send(
                    topic,
                    _bytes(value),
                    key=_bytes(key),
                    headers=[(h["key"], _bytes(h["value"])) for h in headers] if headers else None,
                    partition=partition,
                    callback=callback,
                )
            sent += n
            if failures.first is not None:
                raise failures.first
        producer.flush()
    finally:
        producer.close()
    if failures.first is not None:
        raise failures.first
    return sent
