"""Client workloads the Kubernetes tier runs in pods (mounted from a ConfigMap into the
Headwater image), each until ``/tmp/stop`` exists or its time runs out, then printing one
JSON summary line (prefixed ``SUMMARY ``) for the test to read from the pod's log.

    python workload.py produce --topic T        # acks=all, one record at a time
    python workload.py consume --topic T --group G
    python workload.py watch-isr --topic T --min-isr 2
    python workload.py txn-produce --topic T    # transactions of --per-txn records

produce: values are ``<prefix>-<n>`` with n counting up; the summary lists the n acknowledged
(as ranges), the send latencies (p50, p99, max) and the failed sends.  consume: a group
member that commits after every poll, stopping once idle for ``--idle-s`` after the stop
file appears or ``--count`` records came; the summary lists every (partition, offset, value)
once, the offsets delivered more than once, and the values seen.  watch-isr: describes the
topic every 0.25 s; the summary counts samples in which a partition had fewer in-sync
replicas than ``--min-isr`` or no leader.  txn-produce: transaction n writes the values
``<prefix>-<n>-<i>`` (i < ``--per-txn``, keyed apart so they spread over the partitions)
and commits, except every ``--abort-every``-th, which it aborts; the summary lists the
committed n, the aborted n and the *uncertain* n (a call of the transaction failed: its
producer is closed and a new one's init_transactions finishes or aborts it, so it is all
or nothing, but which one the client cannot know).  Consume with
``--isolation-level read_committed`` to check them.

Stdlib and the ``headwater`` package only: it runs in the Headwater image, not the repo.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable

from headwater import Admin, Consumer, Producer

STOP_FILE = "/tmp/stop"


def security() -> dict[str, str]:
    """The client security options the pod's environment gives (kafka-python's names):
    HEADWATER_SECURITY_PROTOCOL and HEADWATER_SSL_CAFILE/CERTFILE/KEYFILE; none: PLAINTEXT."""
    names = ("security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile")
    return {
        n: os.environ[f"HEADWATER_{n.upper()}"]
        for n in names
        if f"HEADWATER_{n.upper()}" in os.environ
    }


def stopping(deadline: float) -> bool:
    return os.path.exists(STOP_FILE) or time.monotonic() >= deadline


def ranges(numbers: Iterable[int]) -> list[list[int]]:
    """``[0, 1, 2, 5, 6]`` -> ``[[0, 2], [5, 6]]`` (inclusive)."""
    out: list[list[int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def summary(payload: dict[str, object]) -> None:
    print("SUMMARY " + json.dumps(payload, separators=(",", ":")), flush=True)


def produce(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.max_seconds
    acked: list[int] = []
    latencies_ms: list[float] = []
    failures: list[str] = []
    started = time.time()
    first_acked_at = 0.0
    with Producer(
        args.bootstrap, acks="all", linger_ms=0, delivery_timeout_ms=120000, **security()
    ) as p:
        n = 0
        while not stopping(deadline) and (args.count <= 0 or n < args.count):
            t0 = time.perf_counter()
            try:
                p.send(args.topic, value=f"{args.prefix}-{n}".encode(), key=str(n).encode()).result(
                    150
                )
            except Exception as exc:  # every failure is reported, none hidden
                failures.append(f"{n}: {type(exc).__name__}: {exc}"[:200])
            else:
                acked.append(n)
                latencies_ms.append((time.perf_counter() - t0) * 1000)
                if len(acked) == 1:
                    first_acked_at = time.time()
            n += 1
            if args.interval_ms:
                time.sleep(args.interval_ms / 1000)
    summary(
        {
            "sent": n,
            "acked": ranges(acked),
            "acked_count": len(acked),
            "failures": failures[:20],
            "failure_count": len(failures),
            "p50_ms": round(percentile(latencies_ms, 0.50), 1),
            "p99_ms": round(percentile(latencies_ms, 0.99), 1),
            "max_ms": round(max(latencies_ms, default=0.0), 1),
            "started_at": started,
            "first_acked_at": first_acked_at,
        }
    )


def txn_produce(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.max_seconds
    committed: list[int] = []
    aborted: list[int] = []
    uncertain: list[int] = []
    failures: list[str] = []
    latencies_ms: list[float] = []
    producer: Producer | None = None
    n = 0

    def new_producer() -> Producer | None:
        """A producer whose init_transactions answered (which settles the transactional
        id's previous transaction), or None after a failure (reported)."""
        p = Producer(
            args.bootstrap, transactional_id=args.transactional_id, linger_ms=0,
            delivery_timeout_ms=120000, max_block_ms=60000, **security(),
        )  # fmt: skip
        try:
            p.init_transactions()
        except Exception as exc:  # reported; the caller tries again while time is left
            failures.append(f"init: {type(exc).__name__}: {exc}"[:200])
            p.close(5)
            return None
        return p

    while not stopping(deadline) and (args.count <= 0 or n < args.count):
        if producer is None:
            producer = new_producer()
            if producer is None:
                time.sleep(1)
                continue
        abort = args.abort_every > 0 and n % args.abort_every == args.abort_every - 1
        t0 = time.perf_counter()
        try:
            producer.begin_transaction()
            for i in range(args.per_txn):
                producer.send(args.topic, value=f"{args.prefix}-{n}-{i}".encode(),
                              key=f"{n}-{i}".encode())  # fmt: skip
            if abort:
                producer.abort_transaction()
            else:
                producer.commit_transaction()
        except Exception as exc:  # the transaction's outcome is unknown: a new producer
            failures.append(f"{n}: {type(exc).__name__}: {exc}"[:200])
            uncertain.append(n)
            producer.close(5)
            producer = None
        else:
            (aborted if abort else committed).append(n)
            latencies_ms.append((time.perf_counter() - t0) * 1000)
        n += 1
    # The last transaction must be settled before a read_committed consumer can pass it.
    settle_deadline = time.monotonic() + 300
    while producer is None and time.monotonic() < settle_deadline:
        producer = new_producer()
        if producer is None:
            time.sleep(1)
    settled = producer is not None
    if producer is not None:
        producer.close(10)
    summary(
        {
            "transactions": n,
            "committed": ranges(committed),
            "committed_count": len(committed),
            "aborted": aborted,
            "uncertain": uncertain,
            "settled": settled,
            "failures": failures[:20],
            "failure_count": len(failures),
            "p50_ms": round(percentile(latencies_ms, 0.50), 1),
            "p99_ms": round(percentile(latencies_ms, 0.99), 1),
            "max_ms": round(max(latencies_ms, default=0.0), 1),
        }
    )


def consume(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.max_seconds
    seen: dict[tuple[int, int], str] = {}
    redelivered: list[list[int]] = []
    commit_failures = 0
    idle_since = time.monotonic()
    with Consumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=args.isolation_level,
        **security(),
    ) as consumer:
        while True:
            records = consumer.poll(500)
            for r in records:
                key = (r.partition, r.offset)
                if key in seen:
                    redelivered.append([r.partition, r.offset])
                seen[key] = (r.value or b"").decode()
            if records:
                idle_since = time.monotonic()
                try:
                    consumer.commit()
                except Exception as exc:  # counted; the next commit covers it
                    commit_failures += 1
                    print(f"commit failed: {type(exc).__name__}: {exc}", flush=True)
            idle = time.monotonic() - idle_since
            stop_asked = os.path.exists(STOP_FILE) or (args.count > 0 and len(seen) >= args.count)
            if time.monotonic() >= deadline or (stop_asked and idle > args.idle_s):
                break
    values = Counter(seen.values())
    summary(
        {
            "records": len(seen),
            "values": sorted(values),
            "duplicate_values": sorted(v for v, c in values.items() if c > 1),
            "redelivered": redelivered[:50],
            "redelivered_count": len(redelivered),
            "commit_failures": commit_failures,
        }
    )


def watch_isr(args: argparse.Namespace) -> None:
    deadline = time.monotonic() + args.max_seconds
    samples = below = leaderless = errors = 0
    worst: list[str] = []
    with Admin(args.bootstrap, default_api_timeout_ms=5000, **security()) as admin:
        while not stopping(deadline):
            try:
                parts = admin.describe_topics([args.topic])[args.topic].partitions
            except Exception:  # a broker restarting may not answer; counted
                errors += 1
                time.sleep(0.25)
                continue
            samples += 1
            short = [p for p in parts if len(p.isr) < args.min_isr]
            if short:
                below += 1
                worst.append(
                    f"{time.time():.1f}: "
                    + ", ".join(f"p{p.partition} isr={list(p.isr)}" for p in short)
                )
            if any(p.leader < 0 for p in parts):
                leaderless += 1
            time.sleep(0.25)
    summary(
        {
            "samples": samples,
            "below_min_isr": below,
            "leaderless": leaderless,
            "errors": errors,
            "examples": worst[:10],
        }
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=["produce", "consume", "watch-isr", "txn-produce"])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--bootstrap", default=os.environ.get("HEADWATER_BOOTSTRAP", ""))
    parser.add_argument("--group", default="k8s-e2e")
    parser.add_argument("--prefix", default="rec")
    parser.add_argument(
        "--count", type=int, default=0, help="stop after N records (consume: then idle)"
    )
    parser.add_argument("--interval-ms", type=float, default=0)
    parser.add_argument("--min-isr", type=int, default=2)
    parser.add_argument("--idle-s", type=float, default=10.0)
    parser.add_argument("--max-seconds", type=float, default=1800)
    parser.add_argument(
        "--isolation-level", default="read_uncommitted",
        choices=["read_uncommitted", "read_committed"],
    )  # fmt: skip
    parser.add_argument("--transactional-id", default="k8s-e2e-txn")
    parser.add_argument("--per-txn", type=int, default=3, help="records per transaction")
    parser.add_argument("--abort-every", type=int, default=5, help="abort every N-th; 0: none")
    args = parser.parse_args(argv)
    if not args.bootstrap:
        parser.error("--bootstrap (or HEADWATER_BOOTSTRAP) is required")
    modes = {"produce": produce, "consume": consume, "watch-isr": watch_isr,
             "txn-produce": txn_produce}  # fmt: skip
    modes[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
