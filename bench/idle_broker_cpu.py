"""One idle broker's CPU per second, before and after ``__consumer_offsets`` exists.

    .venv/bin/python bench/idle_broker_cpu.py [--seconds 20] [--rounds 2] [--keep]

Starts ``headwater dev up --brokers 1``, creates a topic and produces 100 records,
then reads the broker's CPU time (user + system, from ``/proc``, its whole process
group) over ``--seconds``, ``--rounds`` times.  Then it reads the topic in three
consumer groups one after another (the first creates ``__consumer_offsets``, 50
partitions), prints the CPU each group read cost the broker, waits 10 s and measures
the idle CPU again.  One broker, so no replica fetchers: what is left is the broker's
timers.  CPU time, not wall time: it holds on a loaded machine.  ``--keep`` leaves
the cluster up and prints its pids (for py-spy).  To measure another checkout, put
its ``node`` directory first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.proc_cpu import HW, group_cpu_s, hw


def idle(label: str, pgids: set[int], seconds: float, rounds: int) -> None:
    for _ in range(rounds):
        before, wall = group_cpu_s(pgids), time.monotonic()
        time.sleep(seconds)
        used = group_cpu_s(pgids) - before
        wall = time.monotonic() - wall
        print(f"{label}: {used / wall * 1000:6.1f} ms CPU per s", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="idle-broker-")
    up = json.loads(hw("dev", "up", "--brokers", "1", "--data-dir", data_dir, "--output", "json"))
    os.environ["HEADWATER_BOOTSTRAP"] = up["bootstrap"]
    pgids = {os.getpgid(b["pid"]) for b in up["brokers"]}
    try:
        hw("topics", "create", "idle", "--partitions", "1", "--replication-factor", "1")
        hw("perf", "produce", "--topic", "idle", "--num-records", "100", "--record-size", "100")
        time.sleep(5.0)
        idle("idle, no __consumer_offsets", pgids, args.seconds, args.rounds)
        for group in ("idle-bench-1", "idle-bench-2", "idle-bench-3"):
            before = group_cpu_s(pgids)
            hw("perf", "consume", "--topic", "idle", "--messages", "100", "--group", group)
            used = (group_cpu_s(pgids) - before) * 1000
            print(f"group read {group}: broker CPU {used:.0f} ms", flush=True)
        time.sleep(10.0)
        idle("idle, __consumer_offsets (50 partitions)", pgids, args.seconds, args.rounds)
        if args.keep:
            print(json.dumps({"data_dir": data_dir, "pids": [b["pid"] for b in up["brokers"]]}))
    finally:
        if not args.keep:
            subprocess.run([HW, "dev", "down", "--data-dir", data_dir], capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
