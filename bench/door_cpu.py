"""Broker CPU per MB: the Kafka door under Kafka's own perf tools against the gRPC door.

    .venv/bin/python bench/door_cpu.py [--brokers 1] [--records 200000] [--size 1024]
        [--acks 1] [--rounds 2] [--override KEY=VALUE ...]

Three brokers, RF=3, acks=all (the rows where the doors differ most):

    .venv/bin/python bench/door_cpu.py --brokers 3 --acks all --records 300000 --size 100

Starts ``headwater dev up`` (its brokers have a Kafka listener), then per round, on fresh
single-partition topics, alternating the doors so both see the same machine load:

* Kafka door: Kafka's ProducerPerformance (``linger.ms=5``, ``batch.size=1 MiB``), then
  ConsumerPerformance reading the records back;
* gRPC door: ``headwater perf produce`` with the same settings, then
  ``headwater perf consume``.

Around each run it reads the CPU time (user + system, from ``/proc``) of every broker's
process group and prints broker CPU seconds per MB of record payload
(records x size), also net of the brokers' idle CPU (measured for 10 s before the runs,
times the run's wall time: the JVM tools run longer), the client's CPU seconds, the
wall time and the client's own rate (under load: the machine is shared).

For the Kafka door it also prints how many requests the Java client sent (its own
``--print-metrics``: the producer's ``request-total`` and ``request-size-avg``, the
consumer's ``fetch-total``) and the broker CPU per request: at RF=3 each Produce
request costs a leader append and a replica fetch round per follower whatever its size,
so the request count, which the client decides, sets most of the cost per MB.
``--override`` passes broker configs to ``headwater dev up`` (e.g.
``group.initial.rebalance.delay.ms=0``, as Kafka's development ``server.properties``).
To measure another checkout's brokers, put its ``node`` directory first on
``PYTHONPATH``; the brokers inherit it.
Needs the Kafka jars that ``bench/kafka_side_by_side.sh`` copies to
``$KAFKA_ANCHOR_DIR/lib`` (default ``$TMPDIR/kafka-anchor/lib``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.proc_cpu import HW, group_cpu_s, hw

IDLE_S = 10.0
"""How long the brokers' CPU is read with no client running, before the timed runs."""


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's finished children (the clients)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def metric(out: str, group: str, name: str) -> float:
    """A metric of a Kafka perf tool's ``--print-metrics`` table (``group:name:{tags} : value``);
    0 when it is not there."""
    for line in out.splitlines():
        if line.startswith(f"{group}:{name}:"):
            return float(line.rsplit(":", 1)[1])
    return 0.0


def producer_rate(out: str) -> str:
    """``N records/sec (M MB/sec)`` of ProducerPerformance's summary line."""
    summary = next(line for line in out.splitlines() if " records sent, " in line)
    return summary.split(", ")[1]


def producer_requests(out: str) -> tuple[int, str]:
    count = int(metric(out, "producer-metrics", "request-total"))
    size = metric(out, "producer-metrics", "request-size-avg")
    return count, f"requests of {size / 1000:.0f} KB avg (Produce and the rest)"


def consumer_rate(out: str) -> str:
    """fetch.nMsg.sec of ConsumerPerformance's CSV line (the one after its header)."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("start.time"))
    return f"{float(lines[header + 1].split(', ')[9]):.0f} records/sec (fetch.nMsg.sec)"


def consumer_requests(out: str) -> tuple[int, str]:
    return int(metric(out, "consumer-fetch-manager-metrics", "fetch-total")), "Fetch requests"


def headwater_rate(out: str) -> str:
    return f"{json.loads(out.strip().splitlines()[-1])['records_per_s']:.0f} records/sec"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="broker config"
    )
    args = parser.parse_args()
    anchor = Path(
        os.environ.get("KAFKA_ANCHOR_DIR") or Path(tempfile.gettempdir()) / "kafka-anchor"
    )
    if not (anchor / "lib").is_dir():
        print(f"no Kafka jars in {anchor / 'lib'}: run bench/kafka_side_by_side.sh once")
        return 2
    classpath = str(anchor / "lib" / "*")
    data_dir = tempfile.mkdtemp(prefix="door-cpu-")
    rf = str(min(args.brokers, 3))
    overrides = [arg for kv in args.override for arg in ("--override", kv)]
    up = json.loads(
        hw(
            *("dev", "up", "--brokers", str(args.brokers), "--data-dir", data_dir),
            *overrides,
            *("--output", "json"),
        )
    )
    env_bootstrap = up["bootstrap"]
    os.environ["HEADWATER_BOOTSTRAP"] = env_bootstrap
    kafka_bootstrap = up["kafka_bootstrap"]
    pgids = {os.getpgid(b["pid"]) for b in up["brokers"]}
    mb = args.records * args.size / 1e6
    producer_props = [
        f"bootstrap.servers={kafka_bootstrap}",
        f"acks={args.acks}",
        "batch.size=1048576",
        "linger.ms=5",
        "max.request.size=2097152",
    ]

    def topic() -> str:
        name = f"cpu-{uuid.uuid4().hex[:8]}"
        hw("topics", "create", name, "--partitions", "1", "--replication-factor", rf)
        return name

    def measured(
        label: str,
        command: list[str],
        rate: Callable[[str], str],
        requests: Callable[[str], tuple[int, str]] | None = None,
    ) -> None:
        """Runs ``command`` and prints the broker CPU it cost; ``rate``: the client's rate
        from its output; ``requests``: the number of requests it sent (and what they
        were) from its output."""
        before, client_before, wall = group_cpu_s(pgids), children_cpu_s(), time.monotonic()
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        used = group_cpu_s(pgids) - before
        client = children_cpu_s() - client_before
        wall = time.monotonic() - wall
        net = used - idle_rate * wall
        sent = ""
        if requests is not None:
            count, what = requests(out)
            if count:
                sent = (
                    f" | {count} {what}, broker CPU {net / count * 1000:.2f} ms"
                    " per request net of idle"
                )
        print(
            f"{label:20s} broker CPU {used:6.2f} s {used / mb * 1000:6.1f} ms/MB"
            f" (net of idle {net / mb * 1000:6.1f}) | client CPU {client:6.2f} s"
            f" | wall {wall:5.1f} s | {rate(out)}{sent}"
        )
        sys.stdout.flush()

    kafka_tools = ["java", "-cp", classpath, "org.apache.kafka.tools."]
    n, size = str(args.records), str(args.size)

    def kafka_produce(topic: str, records: str) -> list[str]:
        return [
            *kafka_tools[:-1],
            kafka_tools[-1] + "ProducerPerformance",
            *("--topic", topic, "--num-records", records, "--record-size", size),
            *("--throughput", "-1", "--print-metrics", "--producer-props", *producer_props),
        ]

    def kafka_consume(topic: str, records: str) -> list[str]:
        return [
            *kafka_tools[:-1],
            kafka_tools[-1] + "ConsumerPerformance",
            *("--bootstrap-server", kafka_bootstrap, "--topic", topic, "--messages", records),
            "--print-metrics",
        ]

    try:
        # Not timed: the broker's first Kafka-protocol traffic and the first group, which
        # creates __consumer_offsets (50 partitions).
        warm = topic()
        subprocess.run(kafka_produce(warm, "50000"), check=True, capture_output=True)
        subprocess.run(kafka_consume(warm, "50000"), check=True, capture_output=True)
        idle_before = group_cpu_s(pgids)
        time.sleep(IDLE_S)
        idle_rate = (group_cpu_s(pgids) - idle_before) / IDLE_S
        print(
            f"idle brokers: {idle_rate * 1000:.1f} ms CPU per s (replica fetchers, coordinators);"
            " 'net of idle' subtracts that times each run's wall time"
        )
        print(
            f"{args.records} records of {args.size} B ({mb:.1f} MB), {args.brokers} broker(s),"
            f" acks={args.acks}"
        )
        for _ in range(args.rounds):
            door, grpc = topic(), topic()
            measured(
                "Kafka door produce",
                kafka_produce(door, n),
                producer_rate,
                producer_requests,
            )
            measured(
                "gRPC door produce",
                [
                    *(HW, "perf", "produce", "--topic", grpc, "--num-records", n),
                    *("--record-size", size, "--acks", args.acks, "--batch-size", "1048576"),
                    *("--linger-ms", "5", "--output", "json"),
                ],
                headwater_rate,
            )
            measured("Kafka door consume", kafka_consume(door, n), consumer_rate, consumer_requests)
            measured(
                "gRPC door consume",
                [HW, "perf", "consume", "--topic", grpc, "--messages", n, "--output", "json"],
                headwater_rate,
            )
    finally:
        subprocess.run([HW, "dev", "down", "--data-dir", data_dir], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
