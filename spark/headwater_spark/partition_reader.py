"""Executor side: read one offset range of a partition as Arrow batches.

Each Spark task reads exactly ``[from_offset, until_offset)`` of one
partition through the client's
:class:`~headwater.client.consumer.range_reader.RangeReader`, which finds the leader,
pipelines the fetches, steps over compacted gaps and control batches, drops
the records outside the range, and retries leader changes and lost
connections with the client's backoff until ``pollTimeoutMs`` passes without
progress.  This module only turns each fetch answer's batches into one Arrow
batch, decoded straight into the columns
(:func:`~headwater_spark.arrow.batches_to_record_batches`).

Offsets the range needs and the log no longer holds (retention deleted them,
the partition was reset or recreated, or they never came within
``pollTimeoutMs``) are reported by the client and handed to
:func:`~headwater_spark.planning.report_data_loss`: the task fails, or with
``failOnDataLoss=false`` the read skips them.

A worker process keeps one client per bootstrap list and fetch sizes (Spark
reuses Python workers across tasks); it is created after the worker forked,
never inherited through ``fork``.

Before its first task a worker moves the objects it holds then (pyspark's, pyarrow's
and this package's modules, the client) out of the garbage collector's sight
(:func:`freeze_worker_heap`): pyspark's daemon runs a full collection after every
task, and walking those ~100,000 long-lived objects cost 10-30 ms a task.
"""

from __future__ import annotations

import dataclasses
import gc
import threading
from collections.abc import Iterator

import pyarrow as pa
from headwater.client.consumer.range_reader import MissingOffsets, RangeReader
from headwater.client.transport.security import PLAINTEXT, ClientSecurity

from headwater_spark import arrow
from headwater_spark.planning import OffsetRange, report_data_loss

_MAX_WAIT_MS = 500
_REQUEST_TIMEOUT_MS = 30000


@dataclasses.dataclass(frozen=True)
class ReaderSettings:
    """What an executor needs to read a range (picklable, shipped with the task)."""

    bootstrap_servers: str
    fetch_max_bytes: int = 52428800
    max_partition_fetch_bytes: int = 4 * 1024 * 1024
    poll_timeout_ms: int = 120000
    fail_on_data_loss: bool = True
    include_headers: bool = False
    security: ClientSecurity = PLAINTEXT
    """How executors reach the brokers (the ``kafka.security.*``/``ssl.*``/``sasl.*``
    options); the PEM files must exist at the same paths on the executors."""
    read_committed: bool = False
    """Fetch committed data only and drop aborted transactions' records."""
    read_schema: pa.Schema | None = None
    """The columns to yield (None: the source's whole schema); see
    :func:`~headwater_spark.arrow.read_columns`."""
    client_id: str = ""
    """The executors' ``client.id`` (:func:`headwater_spark.options.client_ids`)."""


_clients: dict[tuple[str, int, int, ClientSecurity, bool, str], RangeReader] = {}
_clients_lock = threading.Lock()


def _client(settings: ReaderSettings) -> RangeReader:
    key = (
        settings.bootstrap_servers,
        settings.fetch_max_bytes,
        settings.max_partition_fetch_bytes,
        settings.security,
        settings.read_committed,
        settings.client_id,
    )
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = RangeReader(
                settings.bootstrap_servers,
                fetch_max_wait_ms=_MAX_WAIT_MS,
                fetch_max_bytes=settings.fetch_max_bytes,
                max_partition_fetch_bytes=settings.max_partition_fetch_bytes,
                request_timeout_ms=_REQUEST_TIMEOUT_MS,
                security=settings.security,
                isolation_level=(
                    "read_committed" if settings.read_committed else "read_uncommitted"
                ),
                client_id=settings.client_id,
            )
            _clients[key] = client
        return client


_heap_frozen = False


def freeze_worker_heap() -> None:
    """``gc.freeze()`` once per process: the objects alive now are never walked again.

    For Spark's Python worker, whose daemon calls ``gc.collect()`` after each task: a
    collection then walks only what was allocated since, not every module's objects
    (10-30 ms a task, about 0.1 µs a row of a 1M-row read in four tasks).  Objects
    frozen here are never freed by the collector even if they later become
    unreachable cycles; they are the worker's modules and long-lived state, and it
    happens once, so at most the first task's own objects stay behind.
    """
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.freeze()


def close_clients() -> None:
    """Close every cached client (tests and benchmarks call it; workers just exit)."""
    with _clients_lock:
        for client in _clients.values():
            client.close()
        _clients.clear()


def read_range(
    r: OffsetRange, settings: ReaderSettings, *, client: RangeReader | None = None
) -> Iterator[pa.RecordBatch]:
    """Arrow batches holding exactly the records of ``r`` (what an executor task yields).

    ``client`` reads the range (default: the worker's cached one for ``settings``).
    """
    reader = client if client is not None else _client(settings)

    def missing(gap: MissingOffsets) -> None:
        report_data_loss(gap.message, fail_on_data_loss=settings.fail_on_data_loss)

    answers = reader.read_range_batches(
        r.tp,
        r.from_offset,
        r.until_offset,
        timeout_ms=settings.poll_timeout_ms,
        on_missing=missing,
    )
    for answer in answers:
        out = list(
            arrow.batches_to_record_batches(
                r.topic,
                r.partition,
                answer.batches,
                start=answer.start,
                end=answer.end,
                include_headers=settings.include_headers,
            )
        )
        del answer  # the fetched buffer goes before the next answer is awaited
        for batch in out:
            yield (
                batch if settings.read_schema is None else arrow.select(batch, settings.read_schema)
            )
        del out
