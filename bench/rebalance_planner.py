"""Rebalance planner benchmark: planning time, moves and bytes for clusters of growing size.

Pure planning (:mod:`headwater.client.reassignment`), no cluster: topics placed with
Kafka's rack-aware algorithm over N brokers in 3 racks, replication factor 3, random
partition sizes (1 MB to 1 GB), then a rebalance onto N+3 brokers, with and without the
bytes goal, and a drain of broker 0.  Prints one line per case; never asserts.

    .venv/bin/python bench/rebalance_planner.py [--sizes 6:300,12:1000,12:3000]
"""

from __future__ import annotations

import argparse
import random
import time

from headwater.client.reassignment import BrokerInfo, RebalanceGoals, plan_drain, plan_rebalance
from headwater.client.reassignment.generate import assign_replicas
from headwater.values import TopicPartition

GIB = 2**30


def _brokers(n: int) -> list[BrokerInfo]:
    return [BrokerInfo(i, f"r{i % 3}") for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6:300,12:1000,12:3000", help="BROKERS:PARTITIONS,...")
    args = parser.parse_args()
    for case in args.sizes.split(","):
        n, parts = (int(x) for x in case.split(":"))
        rng = random.Random(1)
        layout = {
            TopicPartition("a", p): r
            for p, r in assign_replicas(
                _brokers(n), num_partitions=parts, replication_factor=3, rng=rng
            ).items()
        }
        sizes = {tp: rng.randrange(10**6, 10**9) for tp in layout}
        total = sum(sizes.values()) * 3 / GIB
        for goals in (RebalanceGoals(), RebalanceGoals(bytes_tolerance=None)):
            started = time.perf_counter()
            plan = plan_rebalance(layout, brokers=_brokers(n + 3), sizes=sizes, goals=goals)
            seconds = time.perf_counter() - started
            loads = [b.size_bytes / GIB for b in plan.after]
            print(
                f"rebalance {n}->{n + 3} brokers, {parts} partitions, "
                f"bytes_tolerance={goals.bytes_tolerance}: {seconds:.2f} s to plan, "
                f"{len(plan.moves)} moves, {plan.bytes_to_move / GIB:.1f} of {total:.1f} GiB, "
                f"broker bytes {min(loads):.1f}..{max(loads):.1f} GiB",
                flush=True,
            )
        started = time.perf_counter()
        drain = plan_drain(layout, brokers=_brokers(n), drain=[0], sizes=sizes)
        print(
            f"drain broker 0 of {n}: {time.perf_counter() - started:.2f} s to plan, "
            f"{len(drain.moves)} moves, {drain.bytes_to_move / GIB:.1f} GiB",
            flush=True,
        )


if __name__ == "__main__":
    main()
