"""Moving data onto a new broker (issue 17): time, MB/s against the throttle, and what an
``acks=all`` producer feels, on a REAL local cluster (ZooKeeper + broker processes).

1. Three brokers; a topic of ``--partitions`` partitions, replication factor 2,
   ``min.insync.replicas=2``, filled with ``--gib`` GiB (``--record-bytes`` values).
2. **Unthrottled**: a fourth broker is added and one replica of every partition (the
   follower) moves onto it, through ``Admin.alter_partition_reassignments``; the move
   is timed from the request to the moment ``list_partition_reassignments`` is empty.
3. **Throttled**: a fifth broker is added and the same replicas move from the fourth onto
   it with Kafka's throttle (``leader/follower.replication.throttled.rate`` =
   ``--throttle-mb`` MB/s on the cluster default, the moving replicas listed in
   ``leader/follower.replication.throttled.replicas``), as ``kafka-reassign-partitions
   --throttle`` sets it; removed afterwards.
4. All along, a probe producer (``acks=all``, idempotent) sends ``--probe-rate`` small
   records per second to the same topic; its send-to-ack latency p50/p99 is printed
   for the quiet ``--before-s`` seconds before the first move and during each move.

MB/s is the bytes that arrived on the destination broker's disk divided by the move's
time (1 MB = 10^6 bytes, as Kafka's rates are in bytes/s).  Everything runs on one
machine: the figures include the producer, the brokers and ZooKeeper sharing its cores.

    .venv/bin/python bench/reassign.py [--gib 0.25] [--partitions 8] [--throttle-mb 20]
        [--record-bytes 4096] [--probe-rate 100] [--before-s 10]

Progress goes to stderr, figures to stdout.  Never asserts; every wait is bounded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import headwater
from headwater.client import NewTopic, TopicPartition
from headwater.client.producer.futures import RecordFuture
from headwater.testing import Cluster

TOPIC = "bench-reassign"


def note(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Probe:
    """An acks=all producer sending small records at a steady rate; keeps ack latencies."""

    def __init__(self, bootstrap: str, *, partitions: int, per_second: int) -> None:
        self.producer = headwater.Producer(
            bootstrap, acks="all", enable_idempotence=True, linger_ms=0
        )
        self.samples: list[tuple[float, float]] = []
        """(send time, latency ms), both from time.monotonic."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._partitions = partitions
        self._interval = 1.0 / per_second
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            sent = time.monotonic()

            def done(_f: RecordFuture, sent: float = sent) -> None:
                with self._lock:
                    self.samples.append((sent, (time.monotonic() - sent) * 1000.0))

            self.producer.send(
                TOPIC, b"probe-%d" % i, partition=i % self._partitions
            ).add_done_callback(done)
            i += 1
            next_at += self._interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    def window(self, start: float, end: float) -> list[float]:
        with self._lock:
            return [lat for t, lat in self.samples if start <= t < end]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.close(30)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fill(cluster: Cluster, *, partitions: int, gib: float, record_bytes: int) -> None:
    count = int(gib * (1 << 30) / record_bytes)
    value = os.urandom(record_bytes)
    started = time.monotonic()
    with headwater.Producer(cluster.bootstrap, acks="all", linger_ms=20) as p:
        for i in range(count):
            p.send(TOPIC, value, partition=i % partitions)
            if i % 20000 == 0 and i:
                note(f"filled {i * record_bytes / (1 << 20):.0f} MiB")
        p.flush(600)
    took = time.monotonic() - started
    note(f"filled {count} records ({gib:.2f} GiB) in {took:.0f} s")


def replica_bytes(cluster: Cluster, broker_id: int) -> int:
    logs = cluster.brokers[broker_id].log_dir
    return sum(f.stat().st_size for f in logs.glob(f"{TOPIC}-*/*.log"))


def wait_moved(admin: headwater.Admin, tps: Sequence[TopicPartition], *, timeout_s: float) -> float:
    started = time.monotonic()
    deadline = started + timeout_s
    last_note = started
    while time.monotonic() < deadline:
        if not admin.list_partition_reassignments(tps):
            return time.monotonic() - started
        if time.monotonic() - last_note > 10:
            last_note = time.monotonic()
            note(f"still moving after {last_note - started:.0f} s")
        time.sleep(0.2)
    raise TimeoutError(f"the move did not finish within {timeout_s:.0f} s")


def move(
    cluster: Cluster,
    admin: headwater.Admin,
    targets: Mapping[TopicPartition, list[int]],
    *,
    destination: int,
    timeout_s: float,
) -> tuple[float, float, float, int]:
    """Run one move; (start, end, seconds, bytes arrived on ``destination``)."""
    start = time.monotonic()
    answers = admin.alter_partition_reassignments(dict(targets))
    refused = {tp: e for tp, e in answers.items() if e is not None}
    if refused:
        raise RuntimeError(f"refused: {refused}")
    seconds = wait_moved(admin, list(targets), timeout_s=timeout_s)
    end = time.monotonic()
    return start, end, seconds, replica_bytes(cluster, destination)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gib", type=float, default=0.25, help="data in the topic (GiB)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--throttle-mb", type=float, default=20.0, help="MB/s (10^6 B/s)")
    parser.add_argument("--record-bytes", type=int, default=4096)
    parser.add_argument("--probe-rate", type=int, default=100, help="probe records/s")
    parser.add_argument("--before-s", type=float, default=10.0)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()

    overrides = {"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false"}
    rate = int(args.throttle_mb * 1_000_000)
    with Cluster(brokers=3, data_dir=args.data_dir, overrides=overrides) as cluster:
        admin = headwater.Admin(cluster.bootstrap, default_api_timeout_ms=120000)
        assignment = {p: [p % 3, (p + 1) % 3] for p in range(args.partitions)}
        admin.create_topics([NewTopic(TOPIC, replica_assignment=assignment)])
        time.sleep(2.0)
        fill(cluster, partitions=args.partitions, gib=args.gib, record_bytes=args.record_bytes)
        probe = Probe(cluster.bootstrap, partitions=args.partitions, per_second=args.probe_rate)
        quiet_start = time.monotonic()
        time.sleep(args.before_s)
        quiet_end = time.monotonic()
        timeout_s = max(600.0, args.gib * (1 << 30) / max(rate, 1) * 3)

        first = cluster.add_broker()
        note(f"broker {first} added; moving one replica of each partition onto it, unthrottled")
        onto_first = {TopicPartition(TOPIC, p): [reps[0], first] for p, reps in assignment.items()}
        a_start, a_end, a_s, a_bytes = move(
            cluster, admin, onto_first, destination=first, timeout_s=timeout_s
        )

        second = cluster.add_broker()
        note(f"broker {second} added; moving those replicas onto it at {args.throttle_mb} MB/s")
        admin.alter_broker_configs(
            None,
            {
                "leader.replication.throttled.rate": str(rate),
                "follower.replication.throttled.rate": str(rate),
            },
        )
        admin.alter_topic_configs(
            TOPIC,
            set_configs={
                "leader.replication.throttled.replicas": ",".join(
                    f"{tp.partition}:{b}" for tp, reps in onto_first.items() for b in reps
                ),
                "follower.replication.throttled.replicas": ",".join(
                    f"{tp.partition}:{second}" for tp in onto_first
                ),
            },
        )
        onto_second = {tp: [reps[0], second] for tp, reps in onto_first.items()}
        b_start, b_end, b_s, b_bytes = move(
            cluster, admin, onto_second, destination=second, timeout_s=timeout_s
        )
        admin.alter_broker_configs(
            None,
            {
                "leader.replication.throttled.rate": None,
                "follower.replication.throttled.rate": None,
            },
        )
        admin.alter_topic_configs(
            TOPIC,
            delete_configs=[
                "leader.replication.throttled.replicas",
                "follower.replication.throttled.replicas",
            ],
        )
        probe.close()
        admin.close()

        quiet = probe.window(quiet_start, quiet_end)
        during_a = probe.window(a_start, a_end)
        during_b = probe.window(b_start, b_end)
        print(f"Issue 17 reassignment bench: {args.gib:g} GiB in {args.partitions} partitions,")
        print(f"RF 2, min.insync.replicas=2, {args.record_bytes} B records, 3+2 brokers, one host")
        print()
        print(
            "move                        time s   MiB moved   MB/s    throttle MB/s   rate/throttle"
        )
        print(
            f"onto broker {first}, unthrottled   {a_s:7.1f}   {a_bytes / (1 << 20):9.0f}"
            f"   {a_bytes / 1e6 / a_s:6.1f}            -               -"
        )
        print(
            f"onto broker {second}, throttled     {b_s:7.1f}   {b_bytes / (1 << 20):9.0f}"
            f"   {b_bytes / 1e6 / b_s:6.1f}    {args.throttle_mb:10.1f}"
            f"          {b_bytes / 1e6 / b_s / args.throttle_mb:6.2f}"
        )
        print()
        print(f"acks=all probe ({args.probe_rate}/s)     samples   p50 ms   p99 ms   max ms")
        for label, values in (
            ("before any move", quiet),
            ("during the unthrottled move", during_a),
            ("during the throttled move", during_b),
        ):
            print(
                f"{label:<28} {len(values):8d} {percentile(values, 0.5):8.1f}"
                f" {percentile(values, 0.99):8.1f} {max(values, default=float('nan')):8.1f}"
            )
        if quiet:
            note(f"probe mean before: {statistics.fmean(quiet):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
