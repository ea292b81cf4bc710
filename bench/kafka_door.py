"""Throughput through the Kafka door against the gRPC door, on the same brokers.

    .venv/bin/python bench/kafka_door.py [--brokers 1] [--records 200000] [--size 100]
        [--acks all] [--rounds 3]

Starts a ``headwater.testing.Cluster`` whose brokers have a Kafka listener
(``kafka.listeners``), then for each round, on a fresh single-partition topic each:

* Kafka door, produce: confluent-kafka (librdkafka) ``Producer`` with ``linger.ms=5``,
  ``batch.size=1 MiB`` and the given ``acks``, every record delivered (the delivery
  callbacks are counted and the topic's end offset checked);
* Kafka door, consume: a confluent-kafka ``Consumer`` assigned to the partition reads
  them all back;
* Kafka door, consume with kcat (librdkafka in C, process start included): the broker's
  side without confluent-kafka's Python cost per record;
* gRPC door, produce and consume: Headwater's own ``Producer`` and ``Consumer`` with the
  same settings, the same record count and size.

Prints records/s and MB/s per row (median of ``--rounds`` with the range) and the Kafka
door as a fraction of the gRPC door.  Both clients run in this process, one at a time; on
a shared machine compare the ratio, not the absolute rates.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka as ck
from headwater.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from headwater.testing import Cluster

MIB = 1024 * 1024


def new_topic(cluster: Cluster, replication_factor: int) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, replication_factor)], timeout_ms=30000)
    cluster.wait_for(lambda: cluster.leader_for(name, 0) is not None, what="a leader")
    return name


def kafka_produce(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> float:
    delivered = 0

    def on_delivery(err: object, _msg: object) -> None:
        nonlocal delivered
        if err is not None:
            raise RuntimeError(f"delivery failed: {err}")
        delivered += 1

    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": MIB,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2 * 1024 * 1024,
        }
    )
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                producer.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0 or delivered != n:
        raise RuntimeError(f"only {delivered} of {n} records delivered")
    return time.perf_counter() - start


def kafka_consume(bootstrap: str, topic: str, n: int) -> float:
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * MIB,
            "max.partition.fetch.bytes": 8 * MIB,
        }
    )
    consumer.assign([ck.TopicPartition(topic, 0, 0)])
    start = time.perf_counter()
    got = 0
    try:
        while got < n:
            for m in consumer.consume(10_000, 1.0):
                if m.error() is not None:
                    raise RuntimeError(str(m.error()))
                got += 1
    finally:
        elapsed = time.perf_counter() - start
        consumer.close()
    return elapsed


def kcat_consume(bootstrap: str, topic: str, n: int) -> float:
    """kcat (librdkafka in C, no Python per record) reads the partition to its end."""
    start = time.perf_counter()
    done = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o\n",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    elapsed = time.perf_counter() - start
    if len(done.stdout.splitlines()) != n:
        raise RuntimeError(f"kcat read {len(done.stdout.splitlines())} of {n} records")
    return elapsed


def grpc_produce(bootstrap: str, topic: str, n: int, value: bytes, acks: str) -> float:
    producer = Producer(bootstrap, acks=acks, linger_ms=5, batch_size=MIB)
    start = time.perf_counter()
    try:
        for _ in range(n):
            producer.send(topic, value, partition=0)
        producer.flush()
    finally:
        elapsed = time.perf_counter() - start
        producer.close()
    return elapsed


def grpc_consume(bootstrap: str, topic: str, n: int) -> float:
    consumer = Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=8 * MIB
    )
    consumer.assign([TopicPartition(topic, 0)])
    start = time.perf_counter()
    got = 0
    try:
        while got < n:
            got += len(consumer.poll(1000, max_records=100_000))
    finally:
        elapsed = time.perf_counter() - start
        consumer.close()
    return elapsed


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def show(name: str, seconds: list[float], n: int, size: int) -> float:
    rates = sorted(n / s for s in seconds)
    median = statistics.median(rates)
    print(
        f"{name:<28} {median:>12,.0f} records/s {median * size / MIB:>8.1f} MB/s "
        f"(range {rates[0]:,.0f}-{rates[-1]:,.0f})"
    )
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes per record")
    parser.add_argument("--acks", default="all", choices=("0", "1", "all"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    value = b"x" * args.size
    with Cluster(brokers=args.brokers, kafka_listener=True) as cluster:
        kafka = cluster.kafka_bootstrap
        rf = min(args.brokers, 3)
        print(
            f"{args.brokers} broker(s), RF={rf}, acks={args.acks}, {args.records:,} records "
            f"of {args.size} B, {args.rounds} rounds"
        )
        times: dict[str, list[float]] = {}

        def measure(
            row: str, produce: Callable[[str], float], consume: Callable[[str], float]
        ) -> None:
            topic = new_topic(cluster, rf)
            times.setdefault(f"{row} produce", []).append(produce(topic))
            landed = end_offset(cluster.bootstrap, topic)
            if landed != args.records:
                raise RuntimeError(f"{row}: {landed} of {args.records} records landed")
            times.setdefault(f"{row} consume", []).append(consume(topic))

        for _ in range(args.rounds):
            measure(
                "kafka door",
                lambda t: kafka_produce(kafka, t, args.records, value, args.acks),
                lambda t: kafka_consume(kafka, t, args.records),
            )
            if shutil.which("kcat"):
                topic = new_topic(cluster, rf)
                kafka_produce(kafka, topic, args.records, value, args.acks)
                times.setdefault("kafka door consume (kcat)", []).append(
                    kcat_consume(kafka, topic, args.records)
                )
            measure(
                "grpc door",
                lambda t: grpc_produce(cluster.bootstrap, t, args.records, value, args.acks),
                lambda t: grpc_consume(cluster.bootstrap, t, args.records),
            )
        medians = {row: show(row, s, args.records, args.size) for row, s in times.items()}
        for kind in ("produce", "consume"):
            ratio = medians[f"kafka door {kind}"] / medians[f"grpc door {kind}"]
            print(f"kafka door / grpc door, {kind}: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
