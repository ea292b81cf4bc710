"""``headwater perf end-to-end``: the time from ``send`` until ``poll`` returns the record,
the counterpart of Kafka's ``org.apache.kafka.tools.EndToEndLatency``.

Two ways to drive it:

* one record at a time (the default, and all Kafka's tool does): send a record,
  wait for its acknowledgement, poll until the consumer returns it, check it is
  the record sent, and time the whole round trip.  The rate is whatever the
  round trip allows.
* ``--throughput N``: send ``N`` records per second, paced, from this thread,
  while a second thread polls; each value carries its send time
  (``time.perf_counter_ns``, the first 8 bytes), so the latency is measured per
  record at a fixed load, as with ``perf produce --throughput`` in Kafka's tools.

Both exchange ``--warmup-records`` records first, not timed (metadata, producer
id, connections, the first fetch), then print a progress line every
``--reporting-interval-ms`` on stderr and the average and percentiles on
stdout, or one JSON object with ``--output json``.  The producer sends with
``linger_ms=0`` and the consumer reads from the end of every partition of the
topic (assigned, no group), as Kafka's tool does; unlike Kafka's, the consumer
long-polls (``--fetch-max-wait-ms``, the broker answers as soon as a record
arrives) rather than polling in a busy loop.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from typing import Any

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
from headwater.client.consumer import Consumer
from headwater.client.producer import Producer
from headwater.client.types import TopicPartition

STAMP_BYTES = 8
"""``--throughput`` values start with the send time: 8 bytes, big-endian nanoseconds."""


def register(psub: Any) -> None:
    """Add ``end-to-end`` to ``headwater perf``'s sub-commands."""
    p = psub.add_parser(
        "end-to-end",
        help="end-to-end latency, send to poll (Kafka's EndToEndLatency)",
        description=(__doc__ or "").split("\n\n")[0],
    )
    p.add_argument("--topic", required=True, help="an existing topic")
    p.add_argument("--num-records", type=int, default=10000, help="timed records")
    p.add_argument("--record-size", type=int, default=100, help="value bytes")
    p.add_argument("--acks", default="1", choices=("all", "-1", "0", "1"), help="not 0")
    p.add_argument(
        "--throughput",
        type=float,
        default=-1,
        help="records/s to send, paced; -1 (default): one at a time, each round trip timed",
    )
    p.add_argument("--warmup-records", type=int, default=100, help="exchanged first, untimed")
    p.add_argument("--fetch-max-wait-ms", type=int, default=500)
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=60000,
        help="give up when a record takes longer than this to come back",
    )
    p.add_argument("--reporting-interval-ms", type=int, default=1000)
    add_bootstrap_option(p)
    add_output_option(p)
    p.set_defaults(func=_end_to_end)


def _end_to_end(args: argparse.Namespace) -> int:
    if args.num_records <= 0 or args.warmup_records < 0:
        raise CliError("--num-records must be > 0 and --warmup-records >= 0", exit_code=2)
    if args.record_size < 1 or (args.throughput > 0 and args.record_size < STAMP_BYTES):
        raise CliError(
            f"--record-size must be >= 1 (>= {STAMP_BYTES} with --throughput: the value "
            "carries its send time)",
            exit_code=2,
        )
    if args.acks == "0":  # Kafka's tool refuses it with these words
        raise CliError(
            "Latency testing requires synchronous acknowledgement. Please use 1 or all",
            exit_code=2,
        )
    if args.throughput == 0 or args.throughput < -1:
        raise CliError("--throughput must be > 0, or -1 for one record at a time", exit_code=2)
    with client_errors():
        with admin_for(args) as admin:
            desc = admin.describe_topics([args.topic])[args.topic]
        tps = [TopicPartition(args.topic, p.partition) for p in desc.partitions]
        consumer = Consumer(
            bootstrap_servers=args.bootstrap,
            security=security_for(args),
            auto_offset_reset="latest",
            fetch_max_wait_ms=args.fetch_max_wait_ms,
            default_api_timeout_ms=args.request_timeout_ms,
        )
        try:
            consumer.assign(tps)
            for tp in tps:  # pin the end now: only what is sent from here on is read
                consumer.position(tp)
            with Producer(
                args.bootstrap, acks=args.acks, linger_ms=0, security=security_for(args)
            ) as producer:
                if args.throughput > 0:
                    latencies, elapsed = _at_rate(args, producer, consumer)
                else:
                    latencies, elapsed = _one_at_a_time(args, producer, consumer)
        finally:
            consumer.close()
    lat = {k: round(v, 3) for k, v in percentiles(latencies).items()}
    summary: dict[str, Any] = {
        "mode": "throughput" if args.throughput > 0 else "one-at-a-time",
        "records": len(latencies),
        "seconds": round(elapsed, 3),
        "records_per_s": round(len(latencies) / max(elapsed, 1e-9), 1),
        "target_records_per_s": args.throughput if args.throughput > 0 else None,
        "latency_ms": lat,
    }
    if args.output == "json":
        print_json(summary)
    else:
        print(
            f"{summary['records']} records end to end ({summary['mode']}, "
            f"{summary['records_per_s']:.1f} records/s): avg latency {lat['avg']:.3f} ms, "
            f"p50 {lat['p50']:.3f}, p99 {lat['p99']:.3f}, p99.9 {lat['p999']:.3f}, "
            f"max {lat['max']:.3f} ms"
        )
    return 0


def _poll_for(consumer: Consumer, deadline: float) -> list[Any]:
    """Poll until something arrives or ``deadline`` (perf_counter seconds) passes."""
    while True:
        left_ms = (deadline - time.perf_counter()) * 1000.0
        if left_ms <= 0:
            return []
        recs = consumer.poll(min(left_ms, 1000.0))
        if recs:
            return recs


def _one_at_a_time(
    args: argparse.Namespace, producer: Producer, consumer: Consumer
) -> tuple[list[float], float]:
    """Kafka's EndToEndLatency loop: send, wait for the ack, poll it back, time it."""
    latencies: list[float] = []
    timeout_s = args.timeout_ms / 1000.0
    total = args.warmup_records + args.num_records
    start = window_start = 0.0
    for i in range(total):
        if i == args.warmup_records:
            start = window_start = time.perf_counter()
        value = os.urandom(args.record_size)
        begin = time.perf_counter()
        producer.send(args.topic, value).result(timeout_s)
        recs = _poll_for(consumer, begin + timeout_s)
        elapsed = time.perf_counter() - begin
        if not recs:
            raise CliError(f"record {i} did not come back within --timeout-ms={args.timeout_ms}")
        if len(recs) != 1 or recs[0].value != value:
            raise CliError(
                f"record {i}: read {len(recs)} record(s), not the one record sent "
                "(is another producer writing to the topic?)"
            )
        if i >= args.warmup_records:
            latencies.append(elapsed * 1000.0)
            now = time.perf_counter()
            if (now - window_start) * 1000 >= args.reporting_interval_ms:
                _progress(i + 1 - args.warmup_records, latencies[-1])
                window_start = now
    return latencies, time.perf_counter() - start


def _at_rate(
    args: argparse.Namespace, producer: Producer, consumer: Consumer
) -> tuple[list[float], float]:
    """``--throughput``: paced sends on this thread, a reader thread timing arrivals."""
    n = args.num_records
    latencies: list[float] = []
    warm = threading.Event()
    stop = threading.Event()
    failure: list[BaseException] = []

    def reader() -> None:
        try:
            while len(latencies) < n and not stop.is_set():
                for r in consumer.poll(200):
                    sent = int.from_bytes((r.value or b"")[:STAMP_BYTES], "big")
                    if sent == 0:
                        warm.set()  # a warm-up record: not timed
                    else:
                        latencies.append((time.perf_counter_ns() - sent) / 1e6)
        except BaseException as exc:  # reported by the main thread
            failure.append(exc)

    padding = b"x" * (args.record_size - STAMP_BYTES)
    zero = bytes(STAMP_BYTES) + padding
    thread = threading.Thread(target=reader, name="headwater-perf-e2e-reader", daemon=True)
    thread.start()
    try:
        timeout_s = args.timeout_ms / 1000.0
        deadline = time.perf_counter() + timeout_s
        for _ in range(max(1, args.warmup_records)):  # until the reader has seen one
            producer.send(args.topic, zero).result(timeout_s)
            if warm.wait(0.05) or time.perf_counter() > deadline:
                break
        if not warm.wait(max(0.0, deadline - time.perf_counter())):
            raise CliError(f"warm-up records did not come back within {args.timeout_ms} ms")
        start = window_start = time.perf_counter()
        for i in range(n):
            # One sleep to the due time (a spin loop would take the GIL from the reader).
            delay = start + i / args.throughput - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            producer.send(args.topic, time.perf_counter_ns().to_bytes(STAMP_BYTES, "big") + padding)
            now = time.perf_counter()
            if (now - window_start) * 1000 >= args.reporting_interval_ms and latencies:
                _progress(len(latencies), latencies[-1])
                window_start = now
        producer.flush(timeout_s)
        thread.join(timeout_s)
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        thread.join(5.0)
    if failure:
        raise failure[0]
    if len(latencies) < n:
        raise CliError(
            f"only {len(latencies)} of {n} records came back within --timeout-ms={args.timeout_ms}"
        )
    return latencies[:n], elapsed


def _progress(count: int, last_ms: float) -> None:
    print(f"{count} records, last latency {last_ms:.3f} ms", file=sys.stderr, flush=True)
