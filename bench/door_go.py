"""The Kafka door against the gRPC door, with a compiled Kafka client (franz-go) on the
Kafka side, so that door/gRPC measures the doors and not a JVM client's CPU.

The quiet measurement (about 5 minutes on 2 cores; run nothing else meanwhile)::

    .venv/bin/python bench/door_go.py --rounds 3

runs the issue-27 workloads, each in its own cluster (``headwater.testing.Cluster``, every
broker with a Kafka listener):

* 1 broker, acks=1: produce then consume 5,000,000 records of 100 B, and 2,000,000 of
  1 KiB;
* 3 brokers, RF=3, acks=all, ``min.insync.replicas=2``: produce then consume 1,000,000
  records of 1 KiB.

``--brokers N`` runs one cluster only (sizes 100 B and 1 KiB at 1 broker, 1 KiB at more;
acks 1 at 1 broker, all at more), ``--size``, ``--acks`` and ``--records`` replace the
defaults, ``--group`` consumes as a member of a (fresh) consumer group on both doors
instead of assigning the partition, ``--output json`` prints one JSON object.  A smoke
test: ``--records 20000 --rounds 1``.

Each round, for each workload, on a fresh single-partition topic per door (the door that
goes first alternates by round):

* Kafka door: ``door-go produce`` then ``door-go consume`` (bench/door_go/, franz-go's kgo:
  linger 5 ms, record batches of up to 1 MiB, no compression, 5 requests in flight;
  consume from the earliest offset, fetches of up to 50 MiB, 1 MiB per partition as
  ``headwater perf consume``'s, ``--partition-fetch-bytes`` to change that; run with
  ``GOGC=400``, ``--gogc`` to change that: at Go's default of 100 the client took twice
  the CPU to consume 100 B records);
* gRPC door: ``headwater perf produce`` (``--batch-size 1048576 --linger-ms 5``, the same
  acks) then ``headwater perf consume``, as bench/kafka_side_by_side.sh calls them.

Rates are each client's own (its JSON line; MB = 1e6 B).  Around each client run the
brokers' CPU (user + system of their process groups, from /proc) is read: broker CPU
per MB of payload, also net of the brokers' idle CPU (measured for 5 s per cluster,
times the run's wall time: the Python CLI starts slower than the Go binary).  The table
gives per workload and door the median and range of the rounds, and door/gRPC of the
medians.  The rates compare door plus client: where door/gRPC is above 1 the gRPC
side's client (Python with C speedups) is the slower one, and the broker CPU per MB is
the doors' own cost.  Before the timed rounds a small produce and consume through each
door is run untimed (each door's first traffic).  ``door-go`` is built once into
``.tools/door-go/`` (``go build``; rebuilt when bench/door_go/ changes; Go from ``$GO``,
``PATH`` or /usr/local/go/bin/go; the first build downloads franz-go from the Go module
proxy).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from headwater.client import Admin, Consumer, NewTopic, TopicPartition
from headwater.testing import Cluster

from bench.proc_cpu import HW, PROJECT, group_cpu_s

SOURCE = PROJECT / "bench" / "door_go"
BINARY = PROJECT / ".tools" / "door-go" / "door-go"
IDLE_S = 5.0
"""How long each cluster's brokers' CPU is read with no client running."""
WARM_RECORDS = 20_000
"""Records each door produces and consumes untimed before a cluster's rounds."""
RUN_TIMEOUT_S = 1800.0
DELETE_SETTLE_S = 1.0
DEFAULT_RECORDS = {
    (1, 100): 5_000_000,
    (1, 1024): 2_000_000,
    (3, 1024): 1_000_000,
    (3, 100): 3_000_000,
}
"""Records per run by (replication factor, record size): more than
bench/kafka_side_by_side.sh's N100, N1K, NRF and NRF100 (2,000,000, 500,000, 300,000 and
1,000,000; sized for Kafka's JVM tools), which door-go sends in a second or two (under
load), so that each run lasts a few seconds."""


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# -- the Go client -------------------------------------------------------------------------


def go_tool() -> str:
    for candidate in (os.environ.get("GO"), shutil.which("go"), "/usr/local/go/bin/go"):
        if candidate and Path(candidate).exists():
            return candidate
    raise SystemExit("no Go toolchain: set $GO or put go on PATH")


def build() -> Path:
    """``go build`` bench/door_go into .tools/door-go/ unless the binary is newer than
    every source file."""
    sources = [SOURCE / name for name in ("main.go", "go.mod", "go.sum")]
    newest = max(p.stat().st_mtime for p in sources)
    if BINARY.exists() and BINARY.stat().st_mtime >= newest:
        progress(f"door-go: up to date ({BINARY.relative_to(PROJECT)})")
        return BINARY
    BINARY.parent.mkdir(parents=True, exist_ok=True)
    progress(
        f"door-go: building {BINARY.relative_to(PROJECT)} (go build; the first build downloads "
        "franz-go from the Go module proxy)..."
    )
    started = time.monotonic()
    subprocess.run(
        [go_tool(), "build", "-v", "-trimpath", "-buildvcs=false", "-o", str(BINARY), "."],
        cwd=SOURCE,
        check=True,
        timeout=900,
    )
    progress(f"door-go: built in {time.monotonic() - started:.0f} s")
    return BINARY


# -- workloads and figures -----------------------------------------------------------------


@dataclass
class Workload:
    brokers: int
    size: int
    acks: str
    records: int

    @property
    def rf(self) -> int:
        return min(self.brokers, 3)

    def label(self, kind: str) -> str:
        size = (
            f"{self.size // 1024} KiB" if self.size % 1024 == 0 and self.size else f"{self.size} B"
        )
        setup = f"{self.brokers} broker" + ("s" if self.brokers > 1 else "")
        if self.rf > 1:
            setup += f" RF={self.rf}"
        return f"{setup} acks={self.acks}, {kind} {size}"


@dataclass
class Runs:
    """One door's runs of one workload and kind (produce or consume)."""

    records_per_s: list[float] = field(default_factory=list)
    mb_per_s: list[float] = field(default_factory=list)
    broker_cpu_ms_per_mb: list[float] = field(default_factory=list)
    broker_cpu_net_ms_per_mb: list[float] = field(default_factory=list)
    client_cpu_s: list[float] = field(default_factory=list)
    wall_s: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, values in vars(self).items():
            out[name] = {
                "median": round(statistics.median(values), 3),
                "min": round(min(values), 3),
                "max": round(max(values), 3),
                "rounds": [round(v, 3) for v in values],
            }
        return out


def workloads(args: argparse.Namespace) -> list[Workload]:
    out = []
    for brokers in [args.brokers] if args.brokers else [1, 3]:
        sizes = [args.size] if args.size is not None else ([100, 1024] if brokers == 1 else [1024])
        acks = args.acks or ("1" if brokers == 1 else "all")
        for size in sizes:
            rf = min(brokers, 3)
            default = DEFAULT_RECORDS.get(
                (rf, size), max(10_000, (512 if rf == 1 else 300) * 1024 * 1024 // max(size, 1))
            )
            out.append(Workload(brokers, size, acks, args.records or default))
    return out


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class Bench:
    """One cluster's runs."""

    def __init__(
        self, cluster: Cluster, kafka: str, binary: Path, args: argparse.Namespace
    ) -> None:
        self.cluster = cluster
        self.kafka = kafka
        self.binary = str(binary)
        self.group: bool = args.group
        self.partition_fetch_bytes: int = args.partition_fetch_bytes
        self.gogc: int = args.gogc
        self.pgids = {os.getpgid(b.pid) for b in cluster.brokers.values() if b.pid is not None}
        self.idle_rate = 0.0

    def measure_idle(self) -> float:
        before = group_cpu_s(self.pgids)
        time.sleep(IDLE_S)
        self.idle_rate = (group_cpu_s(self.pgids) - before) / IDLE_S
        return self.idle_rate

    def topic(self, w: Workload) -> str:
        name = f"door-go-{uuid.uuid4().hex[:8]}"
        configs = {"min.insync.replicas": "2"} if w.rf >= 3 else {}
        with Admin(self.cluster.bootstrap) as admin:
            admin.create_topics([NewTopic(name, 1, w.rf, configs)], timeout_ms=30000)
        self.cluster.wait_for(
            lambda: len(self.cluster.isr_for(name, 0)) == w.rf, what=f"{name}'s full ISR"
        )
        return name

    def delete(self, topic: str) -> None:
        """Deletes a measured topic (its disk and page cache: 2 GB at 1 KiB), and waits a
        second for the brokers to remove its files before the next run is measured."""
        with Admin(self.cluster.bootstrap) as admin:
            admin.delete_topics([topic], timeout_ms=30000)
        time.sleep(DELETE_SETTLE_S)

    def end_offset(self, topic: str) -> int:
        consumer = Consumer(bootstrap_servers=self.cluster.bootstrap)
        try:
            tp = TopicPartition(topic, 0)
            return int(consumer.end_offsets([tp])[tp])
        finally:
            consumer.close()

    def command(self, door: str, kind: str, w: Workload, topic: str, records: int) -> list[str]:
        group = ["--group", f"g-{uuid.uuid4().hex[:8]}"] if self.group and kind == "consume" else []
        if door == "kafka":
            cmd = [self.binary, kind, "--bootstrap", self.kafka, "--topic", topic]
            cmd += ["--records", str(records), "--size", str(w.size), *group]
            if kind == "produce":
                return [*cmd, "--acks", w.acks]
            return [*cmd, "--partition-fetch-bytes", str(self.partition_fetch_bytes)]
        if kind == "produce":
            return [
                *(HW, "perf", "produce", "--bootstrap", self.cluster.bootstrap, "--topic", topic),
                *("--num-records", str(records), "--record-size", str(w.size), "--acks", w.acks),
                *("--batch-size", "1048576", "--linger-ms", "5", "--output", "json"),
            ]
        return [
            *(HW, "perf", "consume", "--bootstrap", self.cluster.bootstrap, "--topic", topic),
            *("--messages", str(records), *group, "--output", "json"),
        ]

    def run(self, door: str, kind: str, w: Workload, topic: str, records: int) -> dict[str, Any]:
        """Runs one client; its JSON summary plus the CPU it cost the brokers."""
        cmd = self.command(door, kind, w, topic, records)
        broker0, client0, wall0 = group_cpu_s(self.pgids), children_cpu_s(), time.monotonic()
        env = {**os.environ, "GOGC": str(self.gogc)} if door == "kafka" else None
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=env)
        wall = time.monotonic() - wall0
        broker = group_cpu_s(self.pgids) - broker0
        client = children_cpu_s() - client0
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"{door} {kind} failed ({done.returncode}): {reason}")
        summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        if summary["records"] != records:
            raise RuntimeError(f"{door} {kind}: {summary['records']} of {records} records")
        if kind == "produce":
            landed = self.end_offset(topic)
            if landed != records:
                raise RuntimeError(f"{door} produce: {landed} of {records} records landed")
        mb = records * w.size / 1e6
        summary.update(
            broker_cpu_ms_per_mb=broker / mb * 1000,
            broker_cpu_net_ms_per_mb=(broker - self.idle_rate * wall) / mb * 1000,
            client_cpu_s=client,
            wall_s=wall,
        )
        return summary

    def warm(self, w: Workload) -> None:
        for door in ("kafka", "grpc"):
            topic = self.topic(w)
            for kind in ("produce", "consume"):
                self.run(door, kind, w, topic, min(WARM_RECORDS, w.records))
            self.delete(topic)


def record(runs: Runs, summary: dict[str, Any]) -> None:
    runs.records_per_s.append(summary["records_per_s"])
    runs.mb_per_s.append(summary["mb_per_s"])
    runs.broker_cpu_ms_per_mb.append(summary["broker_cpu_ms_per_mb"])
    runs.broker_cpu_net_ms_per_mb.append(summary["broker_cpu_net_ms_per_mb"])
    runs.client_cpu_s.append(summary["client_cpu_s"])
    runs.wall_s.append(summary["wall_s"])


def bench_cluster(
    brokers: int, loads: list[Workload], binary: Path, args: argparse.Namespace
) -> tuple[float, list[dict[str, Any]]]:
    """Starts a cluster of ``brokers`` and runs ``loads`` in it; the idle brokers' CPU
    rate and one result per workload and kind."""
    progress(f"starting {brokers} broker(s) with Kafka listeners...")
    with Cluster(brokers=brokers, kafka_listener=True) as cluster:
        bench = Bench(cluster, cluster.kafka_bootstrap, binary, args)
        progress("warming up both doors (untimed)...")
        for w in loads:
            bench.warm(w)
        idle = bench.measure_idle()
        progress(f"idle brokers: {idle * 1000:.1f} ms CPU per s")
        runs: dict[tuple[int, str, str], Runs] = {}
        rounds = args.rounds
        for r in range(rounds):
            for i, w in enumerate(loads):
                doors = ("kafka", "grpc") if r % 2 == 0 else ("grpc", "kafka")
                for door in doors:
                    topic = bench.topic(w)
                    for kind in ("produce", "consume"):
                        s = bench.run(door, kind, w, topic, w.records)
                        record(runs.setdefault((i, kind, door), Runs()), s)
                        if kind == "consume":
                            bench.delete(topic)
                        progress(
                            f"round {r + 1}/{rounds} {w.label(kind)} {door}: "
                            f"{s['records_per_s']:,.0f} rec/s, {s['mb_per_s']:.1f} MB/s, broker "
                            f"CPU {s['broker_cpu_ms_per_mb']:.1f} ms/MB"
                        )
    results = []
    for i, w in enumerate(loads):
        for kind in ("produce", "consume"):
            kafka, grpc = runs[(i, kind, "kafka")].summary(), runs[(i, kind, "grpc")].summary()
            results.append(
                {
                    "workload": w.label(kind),
                    "brokers": w.brokers,
                    "replication_factor": w.rf,
                    "acks": w.acks,
                    "size": w.size,
                    "records": w.records,
                    "kind": kind,
                    "group": args.group,
                    "partition_fetch_bytes": args.partition_fetch_bytes,
                    "gogc": args.gogc,
                    "kafka_door_go": kafka,
                    "grpc_door_perf": grpc,
                    "door_over_grpc": ratio(kafka, grpc, "records_per_s"),
                    "broker_cpu_per_mb_door_over_grpc": ratio(kafka, grpc, "broker_cpu_ms_per_mb"),
                }
            )
    return idle, results


def ratio(kafka: dict[str, Any], grpc: dict[str, Any], key: str) -> float | None:
    """Kafka door's median over the gRPC door's; None when the latter is 0 (CPU is read in
    clock ticks, 10 ms: a short run can cost the brokers none)."""
    below = grpc[key]["median"]
    return round(kafka[key]["median"] / below, 3) if below else None


def table(results: list[dict[str, Any]], idle: dict[int, float]) -> str:
    def rng(s: dict[str, Any], key: str, fmt: str) -> str:
        v = s[key]
        return f"{v['median']:{fmt}} ({v['min']:{fmt}}-{v['max']:{fmt}})"

    lines = [
        f"{'workload':34s} {'door':16s} {'rec/s median (range)':>30s} {'MB/s':>7s} "
        f"{'broker CPU ms/MB (net of idle)':>31s} {'client CPU s':>12s}"
    ]
    for r in results:
        for key, name in (("kafka_door_go", "Kafka (franz-go)"), ("grpc_door_perf", "gRPC (perf)")):
            s = r[key]
            cpu = s["broker_cpu_ms_per_mb"]["median"]
            net = s["broker_cpu_net_ms_per_mb"]["median"]
            lines.append(
                f"{r['workload'] if key == 'kafka_door_go' else '':34s} {name:16s} "
                f"{rng(s, 'records_per_s', ',.0f'):>30s} {s['mb_per_s']['median']:7.1f} "
                f"{cpu:22.1f} ({net:6.1f}) {s['client_cpu_s']['median']:12.2f}"
            )
        cpu_ratio = r["broker_cpu_per_mb_door_over_grpc"]
        lines.append(
            f"{'':34s} {'door/gRPC':16s} {r['door_over_grpc']:>30.2f} {'':7s} "
            + (f"{cpu_ratio:22.2f}" if cpu_ratio is not None else f"{'-':>22s}")
        )
    lines.append(
        "idle brokers' CPU: "
        + ", ".join(f"{b} broker(s) {v * 1000:.1f} ms/s" for b, v in idle.items())
        + "; rates are the clients' own, MB = 1e6 B; door/gRPC of the medians; "
        + f"door-go ran with GOGC={results[0]['gogc'] if results else '-'}"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brokers", type=int, help="one cluster of this many brokers only")
    parser.add_argument("--records", type=int, help="records per run (default: per workload)")
    parser.add_argument("--size", type=int, help="value bytes per record")
    parser.add_argument("--acks", choices=("1", "all"), help="default: 1 at 1 broker, else all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--group", action="store_true", help="consume as a member of a fresh consumer group"
    )
    parser.add_argument(
        "--partition-fetch-bytes",
        type=int,
        default=1024 * 1024,
        help="door-go consume's max bytes per partition in a fetch (default 1 MiB, as "
        "headwater perf consume's and Kafka's consumer's max.partition.fetch.bytes)",
    )
    parser.add_argument(
        "--gogc",
        type=int,
        default=400,
        help="door-go's GOGC (Go's garbage collector target; Go's default is 100): franz-go "
        "allocates per record, and at GOGC=100 it took twice the CPU to consume 100 B "
        "records (default 400)",
    )
    parser.add_argument("--output", choices=("text", "json"), default="text")
    args = parser.parse_args()
    if args.rounds < 1 or (args.records is not None and args.records < 1):
        parser.error("--rounds and --records must be >= 1")
    if args.gogc < 1:
        parser.error("--gogc must be >= 1")

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")  # the cluster's `with` cleans up

    signal.signal(signal.SIGTERM, stop)
    binary = build()
    loads = workloads(args)
    load_before = os.getloadavg()
    results: list[dict[str, Any]] = []
    idle: dict[int, float] = {}
    for brokers in dict.fromkeys(w.brokers for w in loads):
        mine = [w for w in loads if w.brokers == brokers]
        idle[brokers], found = bench_cluster(brokers, mine, binary, args)
        results += found
    load_after = os.getloadavg()
    if args.output == "json":
        print(
            json.dumps(
                {
                    "rounds": args.rounds,
                    "loadavg_1m_before_after": [load_before[0], load_after[0]],
                    "idle_broker_cpu_ms_per_s": {str(b): v * 1000 for b, v in idle.items()},
                    "results": results,
                },
                indent=2,
            )
        )
    else:
        print(
            f"{args.rounds} round(s); load average (1 min) {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after"
        )
        print(table(results, idle))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
