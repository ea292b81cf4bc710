"""``headwater.Producer``: Kafka's producer API over Headwater's gRPC Produce RPC.

``send`` runs on the caller's thread: it picks a partition (murmur2 of the key,
or the sticky partition), stamps the record and appends it to the
:class:`~headwater.client.producer.accumulator.RecordAccumulator`, returning a future at
once.  One background :class:`~headwater.client.producer.sender.Sender` thread per
producer batches, sends, retries and acknowledges (see those modules).

    with headwater.Producer(bootstrap_servers="127.0.0.1:9092") as p:
        p.send("orders", b"hello", key=b"k").result()
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from headwater import errors, interpreter
from headwater.client.producer.accumulator import (
    RECORD_OVERHEAD_BYTES,
    RecordAccumulator,
    estimate_size,
)
from headwater.client.producer.futures import RecordCallback, RecordFuture, failed_future
from headwater.client.producer.partitioner import DefaultPartitioner, Partitioner
from headwater.client.producer.sender import Sender
from headwater.client.producer.transactions import TransactionManager
from headwater.client.settings import ProducerSettings, parse_acks, parse_bootstrap
from headwater.client.transport import connection
from headwater.client.transport import security as client_security
from headwater.client.transport.metadata import ClusterMetadata, MetadataManager
from headwater.client.transport.security import ClientSecurity
from headwater.client.types import ConsumerGroupMetadata, TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.records import Record
from headwater.records.allocator import tune_allocator
from headwater.retry import RetryPolicy

Callback = RecordCallback
"""Called as ``callback(metadata, None)`` on success, ``callback(None, error)`` on failure,
on the producer's sender thread, in send order per partition (Kafka's guarantee)."""

_new_record = tuple.__new__
"""Builds a :class:`Record` without its Python-level ``__new__`` (the send hot path)."""
_time_ns = time.time_ns
"""``_time_ns() // 1_000_000`` is :func:`headwater.clock.wall_ms` inlined: the send hot path."""

_producer_ids = itertools.count(1)
"""N of the default ``client_id`` ``producer-N``."""

HeadersArg = Mapping[str, bytes | None] | Iterable[tuple[str, bytes | None]] | None


class Producer:
    """Sends records to topics; thread-safe (any thread may call ``send``)."""

    def __init__(
        self,
        bootstrap_servers: str | list[str] | tuple[str, ...] = "127.0.0.1:9092",
        *,
        acks: str | int = "all",
        linger_ms: int = 5,
        batch_size: int = 16384,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60000,
        compression_type: str = "none",
        max_in_flight_requests_per_connection: int = 5,
        retries: int = 2**31 - 1,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        delivery_timeout_ms: int = 120000,
        request_timeout_ms: int = 30000,
        enable_idempotence: bool | None = None,
        max_request_size: int = 1024 * 1024,
        metadata_max_age_ms: int = 300000,
        partitioner: Partitioner | None = None,
        clock: Clock = monotonic_ms,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        security: ClientSecurity | None = None,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        client_id: str | None = None,
    ) -> None:
        """``transactional_id``: a transactional producer (Kafka's semantics, see
        :mod:`headwater.client.producer.transactions`); it implies idempotence and
        ``acks="all"``, and every ``send`` must be inside a transaction.

        ``client_id``: Kafka's ``client.id``, sent with every call to the brokers (which
        apply client quotas by it); any printable-ASCII string.  None: ``producer-N``,
        N counting this process's producers from 1, as Kafka's default."""
        tune_allocator()  # MiB batches: see headwater.records.allocator
        interpreter.tune_switch_interval()  # background threads: see headwater.interpreter
        acks_value = parse_acks(acks)
        if transactional_id is not None:
            if enable_idempotence is False:
                raise ValueError("a transactional producer is idempotent: enable_idempotence=False")
            if acks_value != -1:
                raise ValueError("a transactional producer needs acks='all'")
            enable_idempotence = True
        sequence_acks_1 = enable_idempotence is None  # see ProducerSettings.sequenced
        if enable_idempotence is None:
            # Kafka's default is idempotence on, silently off when the other settings
            # conflict with it; an explicit True with acks != all is an error.
            enable_idempotence = acks_value == -1 and max_in_flight_requests_per_connection <= 5
        self.settings = ProducerSettings(
            bootstrap_servers=parse_bootstrap(bootstrap_servers),
            acks=acks_value,
            linger_ms=linger_ms,
            batch_size=batch_size,
            buffer_memory=buffer_memory,
            max_block_ms=max_block_ms,
            compression_type=compression_type,
            max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            enable_idempotence=enable_idempotence,
            sequence_acks_1=sequence_acks_1,
            max_request_size=max_request_size,
            metadata_max_age_ms=metadata_max_age_ms,
            retry=RetryPolicy(
                retries=retries,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=max(retry_backoff_ms, retry_backoff_max_ms),
            ),
        )
        s = self.settings
        self._clock = clock
        self.client_id = f"producer-{next(_producer_ids)}" if client_id is None else client_id
        self._channels = connection.Channels(
            client_id=self.client_id,
            security=security
            or client_security.from_options(
                security_protocol=security_protocol,
                ssl_cafile=ssl_cafile,
                ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile,
                ssl_check_hostname=ssl_check_hostname,
                sasl_mechanism=sasl_mechanism,
                sasl_plain_username=sasl_plain_username,
                sasl_plain_password=sasl_plain_password,
            ),
        )
        self._metadata = MetadataManager(
            bootstrap=s.bootstrap_servers,
            channels=self._channels,
            retry=s.retry,
            request_timeout_ms=s.request_timeout_ms,
            max_age_ms=s.metadata_max_age_ms,
            clock=clock,
        )
        self._accumulator = RecordAccumulator(
            batch_size=s.batch_size,
            linger_ms=s.linger_ms,
            buffer_memory=s.buffer_memory,
            delivery_timeout_ms=s.delivery_timeout_ms,
            max_in_flight_per_partition=s.max_in_flight_per_partition,
            clock=clock,
        )
        self._partitioner = partitioner or DefaultPartitioner()
        self._builtin_partitioner = type(self._partitioner) is DefaultPartitioner
        self._partition_lock = threading.Lock()
        self._tp_cache: dict[str, tuple[ClusterMetadata, list[TopicPartition]]] = {}
        self._max_request_size = s.max_request_size
        self._transactions = (
            None
            if transactional_id is None
            else TransactionManager(
                transactional_id=transactional_id,
                transaction_timeout_ms=transaction_timeout_ms,
                channels=self._channels,
                addresses=self._addresses,
                request_timeout_ms=s.request_timeout_ms,
                max_block_ms=s.max_block_ms,
            )
        )
        self._sender = Sender(
            settings=s,
            accumulator=self._accumulator,
            metadata=self._metadata,
            channels=self._channels,
            clock=clock,
            transactions=self._transactions,
        )
        # The common case of send in one C call (None: pure Python, see native_send_path).
        builtin = self._partitioner if type(self._partitioner) is DefaultPartitioner else None
        self._native_send = self._accumulator.native_send_path(
            metadata=self._metadata,
            tp_cache=self._tp_cache,
            sticky=None if builtin is None else builtin.sticky,
            on_full=self._on_batch_full,
            max_request_size=s.max_request_size,
        )
        self._thread = threading.Thread(
            target=self._sender.run, name="headwater-producer-sender", daemon=True
        )
        self._closed = False
        self._thread.start()

    # -- sending --------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        *,
        callback: Callback | None = None,
    ) -> RecordFuture:
        """Queue one record; the future resolves to its
        :class:`~headwater.client.types.RecordMetadata`.

        Blocks at most ``max_block_ms`` (for the topic's metadata or buffer
        space).  Errors that concern this record alone (too large, unknown
        partition) are reported through the future.
        """
        if self._transactions is not None:
            self._transactions.check_send()  # before either path: no record outside one
        native = self._native_send
        if native is not None and not headers:
            # The common case in C (RecordAccumulator.native_send_path); None: it
            # changed nothing and the Python path below decides.
            future = native(topic, key, value, partition, timestamp_ms, callback)
            if future is not None:
                return future
        if self._closed:
            raise errors.HeadwaterError("cannot send: the producer is closed")
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        if headers:
            record_headers = _headers(headers)
            size = estimate_size(_new_record(Record, (key, value, record_headers, timestamp_ms)))
        else:
            # The per-record hot path: no Record tuple at all, the size inline.
            record_headers = ()
            size = RECORD_OVERHEAD_BYTES
            if value is not None:
                size += len(value)
            if key is not None:
                size += len(key)
        if partition is None and size <= self._max_request_size:
            # The topic's partitions, cached per metadata snapshot (replaced, never mutated).
            meta = self._metadata.current
            cached = self._tp_cache.get(topic)
            if cached is None or cached[0] is not meta:
                cached = self._cache_partitions(topic, meta)
            tps = cached[1]
            if tps:
                count = len(tps)
                if count == 1 and self._builtin_partitioner:
                    chosen = 0  # what DefaultPartitioner answers, without its lock
                else:
                    with self._partition_lock:
                        chosen = self._partitioner.partition(topic, key, count)
                fast = self._accumulator.try_append(
                    tps[chosen], key, value, record_headers, timestamp_ms, size, callback
                )
                if fast is not None:
                    future, full = fast
                    if full:
                        self._on_batch_full(topic, chosen, count)
                    return future
        record = _new_record(Record, (key, value, record_headers, timestamp_ms))
        return self._send_slow(topic, record, key, partition, size, callback)

    def _on_batch_full(self, topic: str, partition: int, count: int) -> None:
        """A ``send`` filled ``partition``'s batch: the next keyless record goes
        elsewhere (the sticky partitioner) and the sender has a batch to send."""
        with self._partition_lock:
            self._partitioner.on_batch_full(topic, partition, count)
        self._sender.wakeup()

    def _cache_partitions(
        self, topic: str, meta: ClusterMetadata
    ) -> tuple[ClusterMetadata, list[TopicPartition]]:
        count = meta.partition_count(topic) or 0
        cached = self._tp_cache.get(topic)
        tps = cached[1] if cached is not None and len(cached[1]) == count else None
        if tps is None:
            tps = [TopicPartition(topic, i) for i in range(count)]
        entry = self._tp_cache[topic] = (meta, tps)
        return entry

    def _send_slow(
        self,
        topic: str,
        record: Record,
        key: bytes | None,
        partition: int | None,
        size: int,
        callback: Callback | None,
    ) -> RecordFuture:
        """``send`` when a batch must be started, metadata fetched or the buffer waited for."""
        try:
            if size > self.settings.max_request_size:
                raise errors.MessageTooLargeError(
                    f"record of ~{size} bytes exceeds "
                    f"max_request_size={self.settings.max_request_size}"
                )
            count = self._metadata.current.partition_count(topic)
            if count is not None and partition is None:
                with self._partition_lock:  # metadata known, no partition given
                    tp = TopicPartition(topic, self._partitioner.partition(topic, key, count))
                max_block_ms: float = self.settings.max_block_ms
            else:
                start = self._clock()
                tp = self._choose_partition(topic, key, partition)
                max_block_ms = max(0.0, self.settings.max_block_ms - (self._clock() - start))
            result = self._accumulator.append(
                tp, record, max_block_ms=max_block_ms, size=size, callback=callback
            )
        except errors.HeadwaterError as exc:
            if isinstance(exc, errors.UnknownTopicOrPartitionError | errors.NetworkError):
                raise  # the topic or the cluster is not there: the caller must know now
            return failed_future(TopicPartition(topic, partition or 0), exc, callback=callback)
        if result.batch_full:
            with self._partition_lock:
                count = self._metadata.current.partition_count(topic) or 1
                self._partitioner.on_batch_full(topic, tp.partition, count)
        if result.batch_full or result.new_batch:
            self._sender.wakeup()
        return result.future

    def _choose_partition(
        self, topic: str, key: bytes | None, partition: int | None
    ) -> TopicPartition:
        count = self._metadata.current.partition_count(topic)
        if count is None:
            parts = self._metadata.wait_for_topic(topic, timeout_ms=self.settings.max_block_ms)
            count = len(parts)
        if partition is not None:
            if not 0 <= partition < count:
                raise errors.UnknownTopicOrPartitionError(
                    f"partition {partition} of topic {topic!r} does not exist "
                    f"(it has {count} partitions)"
                )
            return TopicPartition(topic, partition)
        with self._partition_lock:
            return TopicPartition(topic, self._partitioner.partition(topic, key, count))

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers (fetching metadata if needed)."""
        parts = self._metadata.wait_for_topic(topic, timeout_ms=self.settings.max_block_ms)
        return [p.partition for p in parts]

    # -- transactions ---------------------------------------------------------------

    def _txn(self) -> TransactionManager:
        if self._transactions is None:
            raise errors.InvalidTxnStateError("this producer has no transactional_id")
        return self._transactions

    def _addresses(self) -> list[str]:
        known = [b.address for b in self._metadata.current.brokers.values()]
        return known + [a for a in self.settings.bootstrap_servers if a not in known]

    def init_transactions(self) -> None:
        """Get the producer id and epoch of ``transactional_id`` from its coordinator,
        fencing every older producer with the same id (its open transaction is aborted).
        Call once, before the first transaction."""
        self._txn().init_transactions()

    def begin_transaction(self) -> None:
        """Open a transaction: the records sent until commit or abort belong to it."""
        self._txn().begin_transaction()

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, Any], group_metadata: ConsumerGroupMetadata
    ) -> None:
        """Commit a consumer group's ``offsets`` (``{partition: offset or
        OffsetAndMetadata}``, the next offsets to read) as part of the transaction."""
        self._txn().send_offsets(offsets, group_metadata)

    def commit_transaction(self) -> None:
        """Flush the transaction's records, then commit it: every record becomes visible
        to ``read_committed`` consumers at once.  An abortable error is raised if a
        record failed (then call :meth:`abort_transaction`)."""
        self._txn().end_transaction(commit=True, flush=self.flush)

    def abort_transaction(self) -> None:
        """Abort the open transaction: ``read_committed`` consumers never see its records."""
        self._txn().end_transaction(commit=False, flush=self._flush_ignoring_errors)

    def _flush_ignoring_errors(self) -> None:
        with contextlib.suppress(errors.HeadwaterError):
            self.flush()

    # -- flush and close ------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait for the answers (``timeout`` in seconds)."""
        self._accumulator.begin_flush()
        try:
            self._sender.wakeup()
            ok = self._accumulator.await_incomplete(
                timeout_ms=None if timeout is None else timeout * 1000.0
            )
        finally:
            self._accumulator.end_flush()
        if not ok:
            raise errors.RequestTimedOutError(f"flush did not complete within {timeout} s")

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued (for up to ``timeout`` seconds), then stop; idempotent.

        Records still unsent when the timeout passes fail with an error.
        """
        if self._closed:
            return
        self._closed = True
        self._accumulator.close()
        self._native_send = None  # it refuses from now on; this drops its references
        self._sender.initiate_close()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._sender.force_close()
            # Channels first: closing them ends a call the sender thread may be
            # making itself (an inline call, see sender.py), so the join is short.
            self._channels.close()
            self._thread.join(5.0)
        else:
            self._channels.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _headers(headers: HeadersArg) -> tuple[tuple[str, bytes | None], ...]:
    if not headers:
        return ()
    items = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for k, v in items:
        if not isinstance(k, str):
            raise TypeError(f"header keys are str, not {type(k).__name__}")
        if v is not None and not isinstance(v, bytes | bytearray):
            raise TypeError(f"header values are bytes or None, not {type(v).__name__}")
        out.append((k, None if v is None else bytes(v)))
    return tuple(out)
