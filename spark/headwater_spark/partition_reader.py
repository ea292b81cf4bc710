"""Executor side: read one offset range from the partition's leader as Arrow batches.

Each Spark task reads exactly ``[from_offset, until_offset)`` of one
partition, talking gRPC straight to the partition's leader (found through the
client's :class:`~headwater.client.metadata.MetadataManager`).  Fetches are
pipelined: the next Fetch is sent as soon as the current answer's batch
headers say where it ends, so the broker reads the next chunk while this one
is decoded and handed to Spark.

Exactness: a fetch returns whole stored batches, so the first batch may start
before ``from_offset`` and the last may run past ``until_offset``; records
outside the range are dropped, and a batch's ``next_offset`` (not its last
record) moves the position on, so compacted gaps and control batches are
stepped over.  The task ends when the position reaches ``until_offset``.

Failures: leader changes and lost connections refresh metadata and retry with
the client's backoff until ``pollTimeoutMs`` passes without progress.
``OFFSET_OUT_OF_RANGE`` below the log start means retention deleted records
the plan expected: :func:`~headwater_spark.planning.report_data_loss` fails the
task, or with ``failOnDataLoss=false`` the read skips to the log start.

A worker process keeps one gRPC channel cache and metadata view per bootstrap
list (Spark reuses Python workers across tasks); they are created after the
worker forked, never inherited through ``fork``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pyarrow as pa
from headwater import errors, records
from headwater.client import connection
from headwater.client.metadata import MetadataManager
from headwater.client.retry import Clock, RetryPolicy, monotonic_ms
from headwater.client.settings import parse_bootstrap
from headwater.client.types import TopicPartition
from headwater.v1 import broker_pb2

from headwater_spark import arrow
from headwater_spark.planning import OffsetRange, report_data_loss

log = logging.getLogger(__name__)

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


class _Client:
    """Channels and metadata for one bootstrap list, shared by a worker's tasks."""

    def __init__(self, bootstrap: str) -> None:
        self.channels = connection.Channels()
        self.retry = RetryPolicy()
        self.metadata = MetadataManager(
            bootstrap=parse_bootstrap(bootstrap),
            channels=self.channels,
            retry=self.retry,
            request_timeout_ms=_REQUEST_TIMEOUT_MS,
        )


_clients: dict[str, _Client] = {}
_clients_lock = threading.Lock()


def _client(bootstrap: str) -> _Client:
    with _clients_lock:
        client = _clients.get(bootstrap)
        if client is None:
            client = _Client(bootstrap)
            _clients[bootstrap] = client
        return client


def close_clients() -> None:
    """Close every cached channel (tests and benchmarks call it; workers just exit)."""
    with _clients_lock:
        for client in _clients.values():
            client.channels.close()
        _clients.clear()


class _Stalled(Exception):
    """No progress: the caller backs off and retries until the poll timeout."""


class RangeReader:
    """Reads one :class:`OffsetRange`; iterate it for Arrow record batches."""

    def __init__(
        self,
        r: OffsetRange,
        settings: ReaderSettings,
        *,
        clock: Clock = monotonic_ms,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.range = r
        self.settings = settings
        self.position = r.from_offset
        self._tp = TopicPartition(r.topic, r.partition)
        self._client = _client(settings.bootstrap_servers)
        self._clock = clock
        self._sleep = sleep

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        r = self.range
        if self.position >= r.until_offset:
            return
        self._client.metadata.add_topics([r.topic])
        pending = self._send(self.position)
        last_progress = self._clock()
        attempts = 0
        while self.position < r.until_offset:
            try:
                resp = self._answer(pending)
                fetch_offset = pending[2]
                batches = self._batches(resp, fetch_offset)
            except (errors.HeadwaterError, _Stalled) as exc:
                retriable = isinstance(exc, _Stalled) or exc.retriable
                waited = self._clock() - last_progress
                if not retriable or waited >= self.settings.poll_timeout_ms:
                    if isinstance(exc, _Stalled):
                        report_data_loss(
                            f"{self._tp}: no records at offset {self.position} after "
                            f"{self.settings.poll_timeout_ms} ms, though the plan reads up "
                            f"to {r.until_offset}",
                            fail_on_data_loss=self.settings.fail_on_data_loss,
                        )
                        return
                    raise
                if self.position >= r.until_offset:
                    break
                attempts += 1
                log.debug("reading %s at %d: %s; retrying", self._tp, self.position, exc)
                self._client.metadata.request_update()
                self._sleep(self._client.retry.backoff_ms(attempts) / 1000.0)
                pending = self._send(self.position)
                continue
            attempts = 0
            last_progress = self._clock()
            next_position = max(self.position, batches[-1].next_offset)
            if next_position < r.until_offset:
                pending = self._send(next_position)
            chunk = self._decode(batches)
            self.position = next_position
            if chunk is not None:
                yield chunk

    # -- one fetch ------------------------------------------------------------------

    def _send(self, offset: int) -> tuple[Any, str, int]:
        """Start a Fetch at ``offset`` to the current leader: (future or error, address, offset)."""
        meta = self._client.metadata
        meta.maybe_refresh()
        leader = meta.current.leader(self._tp)
        if leader is None:
            try:
                meta.fetch(sorted({self._tp.topic}))
            except errors.HeadwaterError as exc:
                return exc, "", offset
            leader = meta.current.leader(self._tp)
            if leader is None:
                return errors.LeaderNotAvailableError(f"no leader for {self._tp}"), "", offset
        s = self.settings
        request = broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=_MAX_WAIT_MS,
            min_bytes=1,
            max_bytes=s.fetch_max_bytes,
            isolation_level=broker_pb2.READ_UNCOMMITTED,
            partitions=[
                broker_pb2.FetchPartition(
                    topic=self._tp.topic,
                    partition=self._tp.partition,
                    fetch_offset=offset,
                    current_leader_epoch=-1,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=s.max_partition_fetch_bytes,
                )
            ],
        )
        address = leader.address
        try:
            stub = self._client.channels.broker(address)
            timeout_s = (_MAX_WAIT_MS + _REQUEST_TIMEOUT_MS) / 1000.0
            return stub.Fetch.future(request, timeout=timeout_s), address, offset
        except errors.HeadwaterError as exc:
            return exc, address, offset

    def _answer(self, pending: tuple[Any, str, int]) -> Any:
        fut, address, offset = pending
        if isinstance(fut, errors.HeadwaterError):
            raise fut
        try:
            resp = fut.result()
        except grpc.RpcError as exc:
            self._client.channels.forget(address)
            raise connection.translate_rpc_error(exc, address) from None
        for p in resp.partitions:
            if p.topic != self._tp.topic or p.partition != self._tp.partition:
                continue
            if p.error == 0:
                return p
            err = errors.for_code(p.error, p.error_message or f"fetching {self._tp} at {offset}")
            if isinstance(err, errors.OffsetOutOfRangeError):
                self._out_of_range(offset, p.log_start_offset)
                raise _Stalled(str(err))
            raise err
        raise errors.UnknownServerError(f"the fetch answer did not mention {self._tp}")

    def _out_of_range(self, offset: int, log_start: int) -> None:
        if log_start < 0:
            log_start = self._earliest()
        if offset < log_start:
            report_data_loss(
                f"offsets [{offset}, {min(log_start, self.range.until_offset)}) of {self._tp} "
                "were deleted before they were read",
                fail_on_data_loss=self.settings.fail_on_data_loss,
            )
            self.position = max(self.position, min(log_start, self.range.until_offset))
        else:
            report_data_loss(
                f"offset {offset} of {self._tp} is beyond the end of the log "
                "(the partition was reset or recreated)",
                fail_on_data_loss=self.settings.fail_on_data_loss,
            )
            self.position = self.range.until_offset

    def _earliest(self) -> int:
        from headwater.client import offsets

        found = offsets.list_offsets(
            {self._tp: offsets.EARLIEST_TIMESTAMP},
            metadata=self._client.metadata,
            channels=self._client.channels,
            retry=self._client.retry,
            request_timeout_ms=_REQUEST_TIMEOUT_MS,
            timeout_ms=self.settings.poll_timeout_ms,
        )
        ot = found.get(self._tp)
        return ot.offset if ot is not None else 0

    def _batches(self, p: Any, fetch_offset: int) -> list[records.Batch]:
        if fetch_offset != self.position:  # out-of-range handling moved the position on
            raise _Stalled(f"position moved to {self.position}")
        batches = [b for b in records.read_batches(p.records) if b.last_offset >= fetch_offset]
        if not batches:
            raise _Stalled(f"no data at {fetch_offset} (high watermark {p.high_watermark})")
        return batches

    def _decode(self, batches: list[records.Batch]) -> pa.RecordBatch | None:
        low, high = self.position, self.range.until_offset
        chunks = []
        for b in batches:
            if b.is_control or b.base_offset >= high:
                continue
            recs = b.record_list()
            if b.base_offset < low or b.last_offset >= high:
                recs = [rec for rec in recs if low <= rec.offset < high]
            chunks.append((recs, int(b.timestamp_type)))
        if not any(recs for recs, _ in chunks):
            return None
        return arrow.to_record_batch(
            self._tp.topic,
            self._tp.partition,
            chunks,
            include_headers=self.settings.include_headers,
        )


def read_range(r: OffsetRange, settings: ReaderSettings) -> Iterator[pa.RecordBatch]:
    """Arrow batches holding exactly the records of ``r`` (what an executor task yields)."""
    return iter(RangeReader(r, settings))
