"""``headwater perf produce|consume``: throughput and latency figures, like Kafka's
``kafka-producer-perf-test`` / ``kafka-consumer-perf-test`` (``perf end-to-end``,
Kafka's ``EndToEndLatency``, is in :mod:`headwater.cli.perf_e2e`).

``perf produce`` sends ``--num-records`` records of ``--record-size`` bytes as
fast as the producer accepts them and measures each record's latency from
``send`` to acknowledgement, in whole milliseconds from the record's create
timestamp, as Kafka's tool does.  ``perf consume`` reads ``--messages`` records from
the beginning of every partition and measures the time from a record's
timestamp to its arrival for a sample (one record in 16); with ``--group`` it
reads as a group member (``subscribe()``) and, as Kafka's tool does, leaves the
time until the group assigns the partitions out of its rates.  Both print a progress line every
``--reporting-interval-ms`` on stderr and a summary (records/s, MB/s, latency
percentiles) on stdout, or one JSON object with ``--output json``.
"""

from __future__ import annotations

import argparse
import operator
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from headwater.cli import perf_e2e
from headwater.cli._common import (
    CliError,
    add_bootstrap_option,
    add_output_option,
    admin_for,
    client_errors,
    print_json,
    security_for,
)
from headwater.cli.perf_stats import percentiles
from headwater.client.consumer.consumer import Consumer
from headwater.client.group.listener import ConsumerRebalanceListener
from headwater.client.producer.producer import Producer
from headwater.client.settings import COMPRESSION_TYPES
from headwater.client.types import ConsumerRecord, RecordMetadata, TopicPartition
from headwater.records.native import payload_bytes


def register(sub: Any) -> None:
    perf = sub.add_parser("perf", help="measure producer and consumer throughput and latency")
    psub = perf.add_subparsers(dest="perf_command", metavar="ACTION", required=True)

    p = psub.add_parser("produce", help="producer throughput and latency")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    p.add_argument("--record-size", type=int, required=True, help="value bytes")
    p.add_argument("--acks", default="1", choices=("all", "-1", "0", "1"))
    p.add_argument("--batch-size", type=int, default=1024 * 1024)
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--compression", default="none", choices=COMPRESSION_TYPES)
    p.add_argument("--reporting-interval-ms", type=int, default=1000)
    p.add_argument(
        "--transactional-id",
        help="produce in transactions with this id (implies --acks all), like Kafka's "
        "ProducerPerformance",
    )
    p.add_argument(
        "--transaction-duration-ms",
        type=int,
        default=3000,
        help="with --transactional-id: commit a transaction this often",
    )
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_produce)

    p = psub.add_parser("consume", help="consumer throughput")
    p.add_argument("--topic", required=True)
    p.add_argument("--messages", type=int, required=True)
    p.add_argument(
        "--timeout-ms", type=int, default=10000, help="give up after this long without a record"
    )
    p.add_argument(
        "--group",
        help="read as a member of this consumer group (subscribe(), like Kafka's "
        "ConsumerPerformance --group); the time until the group assigns the partitions "
        "is reported apart (rebalance_ms) and left out of the rates, as Kafka's tool does",
    )
    p.add_argument("--reporting-interval-ms", type=int, default=1000)
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_consume)

    perf_e2e.register(psub)


def _summary(
    count: int, total_bytes: int, elapsed_s: float, lat: Sequence[float]
) -> dict[str, Any]:
    elapsed_s = max(elapsed_s, 1e-9)
    return {
        "records": count,
        "seconds": round(elapsed_s, 3),
        "records_per_s": round(count / elapsed_s, 1),
        "mb_per_s": round(total_bytes / elapsed_s / 1e6, 2),
        "latency_ms": {k: round(v, 2) for k, v in percentiles(lat).items()},
    }


def _print_summary(summary: dict[str, Any], output: str) -> None:
    if output == "json":
        print_json(summary)
        return
    lat = summary["latency_ms"]
    print(
        f"{summary['records']} records in {summary['seconds']} s: "
        f"{summary['records_per_s']:.1f} records/s ({summary['mb_per_s']:.2f} MB/s), "
        f"latency avg {lat['avg']:.2f} ms, p50 {lat['p50']:.2f}, p95 {lat['p95']:.2f}, "
        f"p99 {lat['p99']:.2f}, p99.9 {lat['p999']:.2f}, max {lat['max']:.2f} ms"
        + (
            f"; group assignment after {summary['rebalance_ms']:.1f} ms, not counted"
            if "rebalance_ms" in summary
            else ""
        )
    )


# By position: a tuple's item is cheaper to get than a named field (~15% of the loop).
_KEY_INDEX = ConsumerRecord._fields.index("key")
_VALUE_INDEX = ConsumerRecord._fields.index("value")
_timestamp = operator.itemgetter(ConsumerRecord._fields.index("timestamp_ms"))

_CONSUME_LATENCY_EVERY = 16
"""``perf consume`` keeps the latency of one record in this many (the first of each poll's)."""

_PROGRESS_EVERY = 1000
"""``perf produce`` reads the clock for its progress line once per this many records."""


def _progress(total: int, count: int, nbytes: int, window_s: float) -> None:
    """One progress line on stderr: ``count`` records of ``nbytes`` in the last ``window_s``."""
    print(
        f"{total} records sent/read, {count / window_s:.1f} records/s "
        f"({nbytes / window_s / 1e6:.2f} MB/s)",
        file=sys.stderr,
        flush=True,
    )


def _produce(args: argparse.Namespace) -> int:
    if args.num_records <= 0 or args.record_size < 0:
        raise CliError("--num-records must be > 0 and --record-size >= 0", exit_code=2)
    if args.transactional_id is not None and args.transaction_duration_ms <= 0:
        raise CliError("--transaction-duration-ms must be > 0", exit_code=2)
    transactional = args.transactional_id is not None
    value = os.urandom(args.record_size)
    # Each record's latency, in whole ms as Kafka's ProducerPerformance measures it:
    # from its create timestamp (which send() stamps from the wall clock) to the
    # callback.  One shared callback for every record, not a closure per record,
    # which would be a third of the tool's own cost per record.
    latencies: list[int] = []
    errors_seen: list[BaseException] = []
    keep = latencies.append
    now_ns = time.time_ns

    def done(md: RecordMetadata | None, exc: BaseException | None) -> None:
        if md is not None:
            keep(now_ns() // 1_000_000 - md.timestamp_ms)
        elif exc is not None:
            errors_seen.append(exc)

    with client_errors():
        with admin_for(args) as admin:
            admin.describe_topics([args.topic])
        producer = Producer(
            args.bootstrap,
            security=security_for(args),
            acks="all" if transactional else args.acks,
            transactional_id=args.transactional_id,
            batch_size=args.batch_size,
            linger_ms=args.linger_ms,
            compression_type=args.compression,
            buffer_memory=max(64 * 1024 * 1024, 4 * args.batch_size),
        )
        try:
            send, topic = producer.send, args.topic
            if transactional:
                producer.init_transactions()
                producer.begin_transaction()
            txn_every_s = args.transaction_duration_ms / 1000.0
            start = window_start = txn_start = time.perf_counter()
            sent = window_sent = 0
            while sent < args.num_records:
                # Progress is looked at every _PROGRESS_EVERY records, not per record.
                for _ in range(min(_PROGRESS_EVERY, args.num_records - sent)):
                    send(topic, value, callback=done)
                sent += min(_PROGRESS_EVERY, args.num_records - sent)
                now = time.perf_counter()
                if transactional and now - txn_start >= txn_every_s:
                    producer.commit_transaction()
                    producer.begin_transaction()
                    txn_start = now
                if (now - window_start) * 1000 >= args.reporting_interval_ms:
                    window = sent - window_sent
                    _progress(sent, window, window * args.record_size, now - window_start)
                    window_start, window_sent = now, sent
            if transactional:
                producer.commit_transaction()
            else:
                producer.flush()
            elapsed = time.perf_counter() - start
        finally:
            producer.close(timeout=5.0)
    if errors_seen:
        raise CliError(f"{len(errors_seen)} records failed; first: {errors_seen[0]}")
    _print_summary(
        _summary(
            args.num_records,
            args.num_records * args.record_size,
            elapsed,
            latencies,
        ),
        args.output,
    )
    return 0


class _AssignedAt(ConsumerRebalanceListener):
    """When the group last assigned partitions to this member (``perf consume --group``)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.at = time.perf_counter()


def _consume(args: argparse.Namespace) -> int:
    if args.messages <= 0:
        raise CliError("--messages must be > 0", exit_code=2)
    if args.group is not None and not args.group:
        raise CliError("--group must not be empty", exit_code=2)
    latencies: list[float] = []
    count = nbytes = 0
    rebalance_s = 0.0
    with client_errors():
        with admin_for(args) as admin:
            desc = admin.describe_topics([args.topic])[args.topic]
        consumer = Consumer(
            bootstrap_servers=args.bootstrap,
            security=security_for(args),
            group_id=args.group,
            auto_offset_reset="earliest",
            max_poll_records=10000,
            default_api_timeout_ms=args.request_timeout_ms,
        )
        try:
            joined = _AssignedAt()
            if args.group is None:
                consumer.assign([TopicPartition(args.topic, p.partition) for p in desc.partitions])
            else:
                consumer.subscribe([args.topic], listener=joined)
            start = window_start = time.perf_counter()
            last_record = start
            window_bytes = window_start_count = 0
            while count < args.messages:
                recs = consumer.poll(500)
                now = time.perf_counter()
                if not recs:
                    if (now - last_record) * 1000 >= args.timeout_ms:
                        break
                    continue
                last_record = now
                if count == 0 and joined.at is not None:
                    window_start = joined.at  # the first progress line leaves the join out
                wall_ms = time.time() * 1000.0
                recs = recs[: args.messages - count]
                # Summed in C: even as maps and filters, counting in Python cost this
                # tool ~0.08 us per record, a fifth of the consumer's own CPU at 100 B.
                size = payload_bytes(recs, _KEY_INDEX, _VALUE_INDEX)
                nbytes += size
                window_bytes += size
                # Latency of a sample, every _CONSUME_LATENCY_EVERY-th record (Kafka's
                # perf tools sample too): a float per record cost ~0.09 us of the loop.
                latencies += map(wall_ms.__sub__, map(_timestamp, recs[::_CONSUME_LATENCY_EVERY]))
                count += len(recs)
                if (now - window_start) * 1000 >= args.reporting_interval_ms:
                    window = count - window_start_count
                    _progress(count, window, window_bytes, now - window_start)
                    window_start, window_bytes, window_start_count = now, 0, count
            elapsed = time.perf_counter() - start
            if joined.at is not None:
                # Kafka's ConsumerPerformance leaves the group join out of its fetch rates.
                rebalance_s = joined.at - start
                elapsed -= rebalance_s
        finally:
            consumer.close()
    if count < args.messages:
        raise CliError(
            f"only {count} of {args.messages} records arrived within --timeout-ms={args.timeout_ms}"
        )
    summary = _summary(count, nbytes, elapsed, latencies)
    if args.group is not None:
        summary["rebalance_ms"] = round(rebalance_s * 1000, 1)
    _print_summary(summary, args.output)
    return 0
