"""Idle broker CPU: what a quiet dev cluster with ``__consumer_offsets`` burns per second.

    .venv/bin/python bench/idle_brokers.py [--brokers 3] [--seconds 30] [--rounds 3]

Starts ``headwater dev up --brokers N``, creates a topic (RF = min(N, 3)), produces a
few records and reads them back in a consumer group (which creates
``__consumer_offsets``, 50 partitions at RF = min(N, 3)), waits 10 s for the group to
settle, then reads the CPU time (user + system, from ``/proc``) of every broker's
process group over ``--seconds``, ``--rounds`` times, and prints milliseconds of broker
CPU per second of wall time.  With nothing produced, that is the replica fetchers'
long polls (each follower's fetch of every partition it follows from a leader) and the
brokers' timers.  CPU time, not wall time: it holds on a loaded machine.  To measure
another checkout's brokers, put its ``node`` directory first on ``PYTHONPATH``; the
brokers inherit it.
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data_dir = tempfile.mkdtemp(prefix="idle-brokers-")
    rf = str(min(args.brokers, 3))
    up = json.loads(
        hw("dev", "up", "--brokers", str(args.brokers), "--data-dir", data_dir, "--output", "json")
    )
    os.environ["HEADWATER_BOOTSTRAP"] = up["bootstrap"]
    pgids = {os.getpgid(b["pid"]) for b in up["brokers"]}
    try:
        hw("topics", "create", "idle", "--partitions", "1", "--replication-factor", rf)
        hw("perf", "produce", "--topic", "idle", "--num-records", "100", "--record-size", "100")
        hw("perf", "consume", "--topic", "idle", "--messages", "100", "--group", "idle-bench")
        time.sleep(10.0)
        for _ in range(args.rounds):
            before, wall = group_cpu_s(pgids), time.monotonic()
            time.sleep(args.seconds)
            used = group_cpu_s(pgids) - before
            wall = time.monotonic() - wall
            print(
                f"idle {args.brokers} brokers: {used / wall * 1000:6.1f} ms CPU per s", flush=True
            )
    finally:
        subprocess.run([HW, "dev", "down", "--data-dir", data_dir], capture_output=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
