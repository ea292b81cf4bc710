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

**Exactly once** (streaming, ``exactly.once=true``): the task of Spark partition ``p``
of micro-batch ``b`` writes with the transactional id ``<prefix>-<p>``
(:func:`transactional_id`).  ``init_transactions`` fences any earlier attempt of the
same task (a zombie of a killed driver or executor) and ends what it left open; then
the task reads the batch record of the group ``<prefix>`` (:func:`record_group`): the
committed offset of ``spark.batch.id``-``p`` (:data:`BATCH_RECORD_TOPIC`) is the next
batch id partition ``p`` has not written.  If it is past ``b``, the batch was written
before (a query restarted from its checkpoint replays the batch whose commit it had
not recorded) and the task writes nothing.  Otherwise it sends its rows and records
``b + 1`` with ``send_offsets_to_transaction`` in the same transaction, and commits:
the rows and the record become visible together or not at all.

This needs a replayed batch to give each Spark partition the same rows (true for this
source's ranges and deterministic transformations; a ``repartition`` without a key is
not), and a prefix of its own per query, kept across restarts.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.producer.producer import Producer
from headwater.client.types import ConsumerGroupMetadata, RecordMetadata, TopicPartition

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
    producer = producer_factory(opts.bootstrap_servers, **opts.producer)
    try:
        failures = _Errors()
        sent = _send_rows(producer, batches, opts, failures)
        producer.flush()
    finally:
        producer.close()
    if failures.first is not None:
        raise failures.first
    return sent


def _send_rows(
    producer: Producer, batches: Iterable[pa.RecordBatch], opts: WriteOptions, failures: _Errors
) -> int:
    """Queue every row of ``batches`` (errors land in ``failures``); how many were queued."""
    sent = 0
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
    return sent


BATCH_RECORD_TOPIC = "spark.batch.id"
"""The topic name under which the record group keeps, per Spark partition, the next
micro-batch id to write (no such topic exists; a group may hold offsets of any name)."""


def transactional_id(prefix: str, partition_id: int) -> str:
    """The transactional id of one Spark partition's writes: the same in every batch and
    every attempt, so a new attempt fences the old one."""
    return f"{prefix}-{partition_id}"


def record_group(prefix: str) -> str:
    """The group whose offsets record which micro-batches each partition wrote."""
    return prefix


def already_written(next_batch: int | None, batch_id: int) -> bool:
    """Whether a partition whose record says ``next_batch`` (None: nothing written yet)
    wrote batch ``batch_id`` before."""
    return next_batch is not None and next_batch > batch_id


def write_batches_exactly_once(
    batches: Iterable[pa.RecordBatch],
    opts: WriteOptions,
    *,
    partition_id: int,
    batch_id: int,
    producer_factory: Callable[..., Producer] = Producer,
    admin_factory: Callable[..., Admin] = Admin,
) -> int:
    """Write one Spark partition's rows of micro-batch ``batch_id`` in one transaction
    that also records the batch (see the module docstring); 0 if it was written before."""
    prefix = opts.transactional_id_prefix
    if prefix is None:
        raise ValueError("an exactly-once write needs a transactional id prefix")
    if partition_id < 0 or batch_id < 0:
        raise ValueError(f"need partition_id, batch_id >= 0, not {partition_id}, {batch_id}")
    group = record_group(prefix)
    record = TopicPartition(BATCH_RECORD_TOPIC, partition_id)
    producer = producer_factory(
        opts.bootstrap_servers, transactional_id=transactional_id(prefix, partition_id),
        **opts.producer,
    )  # fmt: skip
    try:
        producer.init_transactions()  # fences earlier attempts; their transaction is ended
        security = opts.producer.get("security")
        with admin_factory(
            opts.bootstrap_servers, **({"security": security} if security else {})
        ) as admin:
            recorded = admin.list_consumer_group_offsets(group, [record]).get(record)
        if already_written(recorded.offset if recorded is not None else None, batch_id):
            return 0
        producer.begin_transaction()
        try:
            failures = _Errors()
            sent = _send_rows(producer, batches, opts, failures)
            producer.send_offsets_to_transaction(
                {record: batch_id + 1}, ConsumerGroupMetadata(group)
            )
            producer.commit_transaction()
            if failures.first is not None:  # commit_transaction raises first; kept as a guard
                raise failures.first
        except BaseException:
            with contextlib.suppress(errors.HeadwaterError):
                producer.abort_transaction()
            raise
        return sent
    finally:
        producer.close()
