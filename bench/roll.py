"""Rolling-restart benchmark: time to roll a 3-broker local cluster under load, and the
longest produce stall a client sees while it happens.

A producer writes acks=all (RF=3, min.insync.replicas=2), one record at a time, so each
send's latency is what an application waits; the roll engine (``headwater.roll.engine``,
local backend) restarts the brokers one by one.  Prints the roll's duration and the send
latencies during it (p50, p99, max); never asserts.

    .venv/bin/python bench/roll.py [--rounds 3] [--partitions 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from headwater import Admin, Producer
from headwater.roll.engine import Roller, RollSettings, RollState
from headwater.roll.local import LocalBackend
from headwater.roll.probe import AdminProbe
from headwater.testing import Cluster, is_healthy

TAIL = int(os.environ.get("BENCH_LOG_TAIL", "15"))
"""Broker log lines printed when a roll fails."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def wait_in_sync(admin: Admin, topic: str) -> None:
    for _ in range(600):
        try:
            parts = admin.describe_topics([topic])[topic].partitions
        except Exception:
            parts = ()
        if parts and all(len(p.isr) == len(p.replicas) and p.leader >= 0 for p in parts):
            return
        time.sleep(0.1)
    raise RuntimeError(f"{topic} never got in sync")


def one_round(partitions: int) -> dict[str, float]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-roll-") as tmp,
        Cluster(brokers=3, data_dir=Path(tmp), overrides={"min.insync.replicas": "2"}) as cluster,
        Admin(cluster.bootstrap, default_api_timeout_ms=30000) as admin,
    ):
        admin.create_topic("bench-roll", partitions, 3)
        wait_in_sync(admin, "bench-roll")
        latencies: list[float] = []
        failures = 0
        stop = threading.Event()

        def produce() -> None:
            nonlocal failures
            with Producer(cluster.bootstrap, acks="all", linger_ms=0) as producer:
                i = 0
                while not stop.is_set():
                    start = time.perf_counter()
                    try:
                        producer.send("bench-roll", value=b"x" * 100, key=str(i).encode()).result(
                            60
                        )
                        latencies.append(time.perf_counter() - start)
                    except Exception:
                        failures += 1
                    i += 1

        writer = threading.Thread(target=produce)
        writer.start()
        time.sleep(1.0)  # steady state first
        baseline = len(latencies)
        started = time.perf_counter()
        result = Roller(
            LocalBackend(cluster, healthy=is_healthy),  # type: ignore[arg-type]
            AdminProbe(admin),
            settings=RollSettings(operation_timeout_s=120, backoff_initial_s=0.2, backoff_max_s=1),
        ).run()
        roll_s = time.perf_counter() - started
        during = latencies[baseline:]
        stop.set()
        writer.join(120)
        if result.state != RollState.FINISHED:
            tails = "\n".join(
                f"--- broker {i} ---\n{b.log_tail(TAIL)}" for i, b in cluster.brokers.items()
            )
            raise RuntimeError(f"roll did not finish: {result.message}\n{tails}")
        return {
            "roll_s": roll_s,
            "sends": float(len(during)),
            "failures": float(failures),
            "p50_ms": percentile(during, 0.50) * 1000,
            "p99_ms": percentile(during, 0.99) * 1000,
            "max_ms": max(during, default=float("nan")) * 1000,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    rounds = [one_round(args.partitions) for _ in range(args.rounds)]
    for i, r in enumerate(rounds, 1):
        print(
            f"round {i}: roll {r['roll_s']:.2f} s, {r['sends']:.0f} acks=all sends during it "
            f"({r['failures']:.0f} failed), latency p50 {r['p50_ms']:.1f} ms, "
            f"p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms"
        )
    print(
        f"median of {len(rounds)}: roll {statistics.median(r['roll_s'] for r in rounds):.2f} s, "
        f"p99 send {statistics.median(r['p99_ms'] for r in rounds):.1f} ms, "
        f"longest stall {max(r['max_ms'] for r in rounds):.1f} ms"
    )


if __name__ == "__main__":
    main()
