"""Event-loop stalls of the brokers while topics of many partitions are created.

A LeaderAndIsr that creates many partitions (the 50 of ``__consumer_offsets``, say) has
disk work to do for each: open the log and, for a partition the broker is to lead, write
its leader-epoch checkpoint (two fsyncs).  What of it runs on the event loop stops the
broker: no Produce, Fetch or heartbeat is answered meanwhile.  This bench starts a
``headwater.testing.Cluster`` whose brokers run a loop-lag probe
(bench/loop_probe/sitecustomize.py), creates ``--topics`` topics of ``--partitions``
partitions one after another and prints, for each, every broker's longest event-loop
stall from the CreateTopics call until ``--settle-s`` after every partition has a leader;
then the same over a quiet window as long (the machine's own noise).  Wall-clock
figures: on a loaded machine, compare runs alternated in the same minutes.  Never asserts.

    .venv/bin/python bench/loop_stall.py [--brokers 3] [--partitions 50] [--topics 5]

To measure another checkout's brokers, put its ``node`` directory first on PYTHONPATH.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time
from pathlib import Path

from headwater import Admin
from headwater.testing import Cluster


def stalls(probe_dir: Path, brokers: int, start: float, end: float) -> list[float]:
    """Each broker's longest stall (ms) overlapping ``[start, end]`` (unix times)."""
    longest = []
    for broker in range(brokers):
        path = probe_dir / f"broker-{broker}.lag"
        found = [0.0]
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                at, ms = (float(field) for field in line.split())
                if at >= start and at - ms / 1000.0 <= end:
                    found.append(ms)
        longest.append(max(found))
    return longest


def all_led(cluster: Cluster, topic: str, partitions: int) -> bool:
    return all(cluster.leader_for(topic, p) is not None for p in range(partitions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--replication-factor", type=int, default=0, help="0: min(3, brokers)")
    parser.add_argument("--topics", type=int, default=5)
    parser.add_argument("--settle-s", type=float, default=2.0)
    args = parser.parse_args()
    rf = args.replication_factor or min(3, args.brokers)
    with tempfile.TemporaryDirectory(prefix="bench-loop-stall-") as tmp:
        probe_dir = Path(tmp) / "probe"
        probe_dir.mkdir()
        os.environ["HW_LOOP_PROBE_DIR"] = str(probe_dir)
        hook = str(Path(__file__).resolve().parent / "loop_probe")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (hook, os.environ.get("PYTHONPATH", "")) if p
        )
        with (
            Cluster(brokers=args.brokers, data_dir=Path(tmp) / "cluster") as cluster,
            Admin(cluster.bootstrap, default_api_timeout_ms=60000) as admin,
        ):
            time.sleep(args.settle_s)  # the start's own stalls out of the window
            worst: list[float] = []
            windows: list[float] = []
            for i in range(args.topics):
                topic = f"stall-{i}"
                start = time.time()
                admin.create_topic(topic, args.partitions, rf)
                cluster.wait_for(
                    functools.partial(all_led, cluster, topic, args.partitions),
                    timeout_s=120.0,
                    what=f"a leader for every partition of {topic}",
                )
                led = time.time()
                time.sleep(args.settle_s)
                end = time.time()
                longest = stalls(probe_dir, args.brokers, start, end)
                worst.append(max(longest))
                windows.append(end - start)
                print(
                    f"{topic}: {args.partitions} partitions x {rf} replicas led after "
                    f"{led - start:.2f} s; longest loop stall per broker: "
                    + ", ".join(f"{ms:.0f}" for ms in longest)
                    + " ms",
                    flush=True,
                )
            start = time.time()
            time.sleep(statistics.mean(windows))
            quiet = stalls(probe_dir, args.brokers, start, time.time())
        print(
            f"creating a topic: longest stall of any broker, median {statistics.median(worst):.0f}"
            f" ms, max {max(worst):.0f} ms ({args.topics} topics); quiet window of the same "
            f"length: {max(quiet):.0f} ms"
        )


if __name__ == "__main__":
    main()
