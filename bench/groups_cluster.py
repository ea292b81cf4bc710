"""Consumer-group figures on a REAL local 3-broker cluster (``headwater.testing.Cluster``):
rebalance time for a 10-member group on 100 partitions when one member leaves (eager
``range`` vs ``cooperative-sticky``), and synchronous commit throughput and p99 latency
(each commit an acks=all append to the replicated ``__consumer_offsets``).

Rebalance time is measured from the leaving member's ``close()`` (its LeaveGroup) until
the coordinator reports the group Stable with 9 members and every remaining consumer
holds exactly what the coordinator says (for cooperative-sticky: after the follow-up
round).  Members poll on threads; the machine's cores are shared with the brokers.

    .venv/bin/python bench/groups_cluster.py [--commits 500]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable

import headwater
from headwater.testing import Cluster

MEMBERS, PARTITIONS = 10, 100
OVERRIDES = {
    "offsets.topic.num.partitions": "10",
    "group.initial.rebalance.delay.ms": "0",
    "log.cleaner.backoff.ms": "60000",
}


class Member:
    def __init__(self, bootstrap: str, group: str, topic: str, strategy: str) -> None:
        self.consumer = headwater.Consumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=strategy,
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
            enable_auto_commit=False,
        )
        self.assignment: set[headwater.TopicPartition] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(100)
            self.assignment = set(self.consumer.assignment())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.consumer.close()


def settled(admin: headwater.Admin, group: str, ms: list[Member]) -> bool:
    d = admin.describe_groups([group])[group]
    if d.state != "Stable" or len(d.members) != len(ms):
        return False
    by_group = sorted(sorted(m.assignment) for m in d.members)
    return by_group == sorted(sorted(m.assignment) for m in ms) and (
        sum(len(a) for a in by_group) == PARTITIONS
    )


def wait(pred: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("the group did not settle")
        time.sleep(0.02)


def bench_rebalance(c: Cluster, admin: headwater.Admin, topic: str, strategy: str) -> float:
    group = f"bench-{strategy}-{uuid.uuid4().hex[:6]}"
    ms = [Member(c.bootstrap, group, topic, strategy) for _ in range(MEMBERS)]
    try:
        wait(lambda: settled(admin, group, ms))
        leaving = ms.pop()
        started = time.monotonic()
        leaving.close()
        wait(lambda: settled(admin, group, ms))
        return time.monotonic() - started
    finally:
        for m in ms:
            m.close()


def bench_commits(c: Cluster, topic: str, n: int) -> tuple[float, float, float]:
    group = f"bench-commit-{uuid.uuid4().hex[:6]}"
    with headwater.Consumer(
        topic, bootstrap_servers=c.bootstrap, group_id=group, enable_auto_commit=False
    ) as consumer:
        for _ in range(200):
            consumer.poll(100)
            if consumer.assignment():
                break
        tp = sorted(consumer.assignment())[0]
        consumer.commit({tp: 0})  # warm up: coordinator found, channel open
        latencies = []
        started = time.perf_counter()
        for i in range(n):
            t0 = time.perf_counter()
            consumer.commit({tp: i + 1})
            latencies.append(time.perf_counter() - t0)
        elapsed = time.perf_counter() - started
    q = statistics.quantiles(latencies, n=100)
    return n / elapsed, q[49] * 1000, q[98] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--commits", type=int, default=500)
    args = parser.parse_args()
    with Cluster(brokers=3, overrides=OVERRIDES) as c, headwater.Admin(c.bootstrap) as admin:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        admin.create_topic(topic, PARTITIONS, 3)
        wait(
            lambda: (
                all(p.leader >= 0 for p in admin.describe_topics([topic])[topic].partitions)
                and len(admin.describe_topics([topic])[topic].partitions) == PARTITIONS
            )
        )
        for strategy in ("range", "cooperative-sticky"):
            secs = bench_rebalance(c, admin, topic, strategy)
            kind = "eager" if strategy == "range" else "cooperative"
            print(
                f"rebalance, {MEMBERS} members on {PARTITIONS} partitions, one leaves "
                f"({kind}, {strategy}): {secs * 1000:.0f} ms"
            )
        rate, p50, p99 = bench_commits(c, topic, args.commits)
        print(
            f"commit (sync, 1 partition, acks=all on 3 replicas): {rate:.0f} commits/s, "
            f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"
        )


if __name__ == "__main__":
    main()
