"""The PySpark Python data source ``headwater``: the only module that imports pyspark.

Spark instantiates :class:`HeadwaterDataSource` with the options, asks it for
the schema (Spark's Kafka source schema, plus ``headers`` with
``includeHeaders``) and then for a reader or writer.  Those classes hold only
validated, picklable option values: Spark pickles readers to ship them to
executors.  Planning (``partitions``, ``latestOffset``, ``commit``) runs on the
driver in :mod:`headwater_spark.driver`; ``read`` runs on executors in
:mod:`headwater_spark.partition_reader` and yields Arrow batches; writes go
through :mod:`headwater_spark.writing`.

Streaming admission control uses pyspark >= 4.2's hooks:
``getDefaultReadLimit`` returns ``ReadMaxRows(maxOffsetsPerTrigger)`` and
``latestOffset(start, limit)`` honours whichever limit Spark passes
(``ReadAllAvailable`` for ``Trigger.AvailableNow`` batches it plans itself).
The reader also implements ``SupportsTriggerAvailableNow``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from headwater_spark import arrow, planning, writing
from headwater_spark.driver import ClusterView, StreamPlanner, plan_batch
from headwater_spark.options import (
    ClientIds,
    OptionError,
    ReadOptions,
    WriteOptions,
    client_ids,
    include_headers,
    parse_read_options,
    parse_write_options,
)
from headwater_spark.partition_reader import ReaderSettings, freeze_worker_heap, read_range
from headwater_spark.planning import OffsetRange


class RangePartition(InputPartition):
    """One Spark task: one offset range of one topic-partition."""

    def __init__(self, index: int, r: OffsetRange) -> None:
        super().__init__(index)
        self.range = r

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def _reader_settings(
    opts: ReadOptions, schema: StructType | None = None, *, ids: ClientIds | None = None
) -> ReaderSettings:
    """``schema``: what Spark hands the reader (the source's own, or the user's);
    ``ids``: the read's client ids (the executors' go in the settings)."""
    try:
        read_schema = (
            None
            if schema is None
            else arrow.read_columns(
                to_arrow_schema(schema, timezone="UTC"), include_headers=opts.include_headers
            )
        )
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    return ReaderSettings(
        read_schema=read_schema,
        bootstrap_servers=opts.bootstrap_servers,
        fetch_max_bytes=opts.fetch_max_bytes,
        max_partition_fetch_bytes=opts.max_partition_fetch_bytes,
        poll_timeout_ms=opts.poll_timeout_ms,
        fail_on_data_loss=opts.fail_on_data_loss,
        include_headers=opts.include_headers,
        security=opts.security,
        read_committed=opts.read_committed,
        client_id=ids.executor if ids is not None else "",
    )


def _read(partition: Any, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition, RangePartition):
        return iter(())  # Spark substitutes InputPartition(None) for an empty plan
    freeze_worker_heap()
    return read_range(partition.range, settings)


def _partitions(ranges: Sequence[OffsetRange]) -> list[InputPartition]:
    return [RangePartition(i, r) for i, r in enumerate(ranges)]


class HeadwaterBatchReader(DataSourceReader):
    """A batch read: ranges planned once on the driver, each read by one task."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.client_ids = client_ids(streaming=False)
        self.settings = _reader_settings(opts, schema, ids=self.client_ids)

    def partitions(self) -> list[InputPartition]:
        view = ClusterView(
            self.opts.bootstrap_servers,
            security=self.opts.security,
            read_committed=self.opts.read_committed,
            client_id=self.client_ids.driver,
        )
        try:
            return _partitions(plan_batch(self.opts, view))
        finally:
            view.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.settings)


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read; offsets are ``{"topic": {"partition": offset}}`` dicts."""

    def __init__(self, opts: ReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.client_ids = client_ids(streaming=True)
        self.settings = _reader_settings(opts, schema, ids=self.client_ids)
        self._planner: StreamPlanner | None = None
        self._view: ClusterView | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the options only; the driver's connections stay behind.
        return {
            "opts": self.opts,
            "settings": self.settings,
            "client_ids": self.client_ids,
            "_planner": None,
            "_view": None,
        }

    @property
    def planner(self) -> StreamPlanner:
        if self._planner is None:
            self._view = ClusterView(
                self.opts.bootstrap_servers,
                security=self.opts.security,
                read_committed=self.opts.read_committed,
                client_id=self.client_ids.driver,
            )
            self._planner = StreamPlanner(self.opts, self._view)
        return self._planner

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return planning.to_json(self.planner.initial_offset())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.planner.latest_offset(planning.from_json(start), max_rows)
        return planning.to_json(end)

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        return planning.to_json(self.planner.latest_report())

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        ranges = self.planner.partitions(planning.from_json(start), planning.from_json(end))
        return _partitions(ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.settings)

    def commit(self, end: dict[str, Any]) -> None:
        self.planner.commit(planning.from_json(end))

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
        self._view = None
        self._planner = None


@dataclass
class WriteCount(WriterCommitMessage):
    """What a write task reports: how many rows it sent."""

    rows: int


def _check_schema(schema: StructType, opts: WriteOptions) -> None:
    writing.check_columns(
        {f.name: f.dataType.simpleString() for f in schema.fields}, topic_option=opts.topic
    )


class HeadwaterWriter(DataSourceArrowWriter):
    """A batch write: every task produces its rows and flushes."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCount:
        return WriteCount(writing.write_batches(iterator, self.opts))


BATCH_ID_PROPERTY = "streaming.sql.batchId"
"""The local property Spark's micro-batch execution sets to the running batch's id; its
tasks see it in their :class:`~pyspark.TaskContext`."""


def _task_batch() -> tuple[int, int]:
    """(Spark partition id, micro-batch id) of the running write task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    raw = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if ctx is None or raw is None:
        raise RuntimeError(
            "exactly.once: the task does not know its micro-batch id (no Spark task context "
            f"or no {BATCH_ID_PROPERTY!r} local property); it needs a micro-batch query"
        )
    return ctx.partitionId(), int(raw)


class HeadwaterStreamWriter(DataSourceStreamArrowWriter):
    """A streaming write: each micro-batch's tasks produce and flush their rows.

    With ``exactly.once`` each task writes its rows and the batch's id in one
    transaction and skips a batch it wrote before (:mod:`headwater_spark.writing`):
    the tasks commit, so the driver's ``commit`` and ``abort`` have nothing to do.
    """

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCount:
        if not self.opts.exactly_once:
            return WriteCount(writing.write_batches(iterator, self.opts))
        partition_id, batch_id = _task_batch()
        return WriteCount(
            writing.write_batches_exactly_once(
                iterator, self.opts, partition_id=partition_id, batch_id=batch_id
            )
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every record was acknowledged (or its transaction committed)
        before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: acknowledged records stay (at-least-once, like Kafka); with
        ``exactly.once``, committed parts stay recorded and a replay skips them."""


class HeadwaterDataSource(DataSource):
    """``spark.read.format("headwater")``: Spark's Kafka source, reading Headwater."""

    @classmethod
    def name(cls) -> str:
        return "headwater"

    def schema(self) -> str:
        return arrow.schema_ddl(include_headers=include_headers(self.options))

    def reader(self, schema: StructType) -> HeadwaterBatchReader:
        return HeadwaterBatchReader(parse_read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> HeadwaterStreamReader:
        return HeadwaterStreamReader(parse_read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> HeadwaterWriter:
        """A batch write appends; ``overwrite`` is refused as Spark's Kafka sink refuses it.

        Records are appended to a topic and never replaced, so an overwrite that silently
        appended would tell the caller something that did not happen.
        """
        if overwrite:
            raise OptionError(
                "save mode 'overwrite' is not allowed for a topic: records are appended, "
                'never replaced; use .mode("append")'
            )
        opts = parse_write_options(self.options)
        _check_schema(schema, opts)
        return HeadwaterWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> HeadwaterStreamWriter:
        opts = parse_write_options(self.options, streaming=True)
        _check_schema(schema, opts)
        return HeadwaterStreamWriter(opts)
