"""Leader CPU per acks=all Produce at RF=3, the replication rounds it causes included.

    .venv/bin/python bench/replica_rounds.py [--produces 400] [--batch-bytes 200000]
        [--idle-partitions 17] [--gap-ms 1] [--rounds 3]

In one process, with no network: a ``ReplicaManager`` leading one partition with
replicas (0, 1, 2) and ``--idle-partitions`` more (the ``__consumer_offsets``
partitions a follower fetches from the same leader, which never change), two follower
loops long-polling it as the replica fetchers do (every partition in every fetch, from
their log end), and a producer appending one batch of ``--batch-bytes`` at a time with
acks=all, waiting ``--gap-ms`` between an answer and the next append (the client's
round trip; 0 lets the next append land before the followers' wake-ups run, which
hides re-reads a real client's round trip exposes).  Prints CPU
(``time.process_time``) per Produce and the number of follower fetch reads (each reads
every partition of its fetch) per Produce.  To compare
checkouts, put the other checkout's ``node`` first on ``PYTHONPATH``.  CPU time, not
wall time, so it holds on a loaded machine; the gRPC hop of each round is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.records import Record, build_batch
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.hosted import FetchSpec
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.storage import LogManager
from headwater.values import TopicPartition

BUSY = TopicPartition("busy", 0)


class NoIsrChanges:
    """The ISR never changes here (every follower stays caught up)."""

    def update_isr(self, topic: str, partition: int, leader_and_isr: Any, version: int) -> int:
        return version + 1

    def get_topic_config(self, topic: str) -> Mapping[str, str]:
        return {}

    def watch_topic_config(
        self, topic: str, callback: Callable[[str, dict[str, str]], None]
    ) -> Callable[[], None]:
        return lambda: None


async def run(args: argparse.Namespace, data_dir: Path) -> tuple[float, float]:
    idle = [TopicPartition("idle", p) for p in range(args.idle_partitions)]
    logs = LogManager([data_dir])
    manager = ReplicaManager(
        broker_id=0,
        log_manager=logs,
        isr_store=NoIsrChanges(),
        metrics=BrokerMetrics(),
        min_insync_replicas=1,
        replica_lag_time_max_ms=30_000,
        default_log_properties={"max.message.bytes": str(4 << 20)},
        is_known_partition=lambda tp: True,
    )
    await manager.prepare_topics(["busy", "idle"])
    manager.become_leader_or_follower(
        controller_epoch=1,
        states=[
            PartitionState(
                tp.topic,
                tp.partition,
                LeaderAndIsr(0, 1, (0, 1, 2), controller_epoch=1, zk_version=0),
                replicas=(0, 1, 2),
            )
            for tp in (BUSY, *idle)
        ],
    )
    reads = 0
    read_all = manager._read_all

    def counting(**kwargs: Any) -> Any:
        nonlocal reads
        if kwargs["replica_id"] >= 0:
            reads += 1
        return read_all(**kwargs)

    manager._read_all = counting  # type: ignore[method-assign]

    stopping = False

    async def follower(replica: int) -> None:
        offsets = dict.fromkeys((BUSY, *idle), 0)
        while not stopping:
            results = await manager.fetch(
                replica_id=replica,
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=64 << 20,
                specs=[FetchSpec(tp, offset, 1, 8 << 20) for tp, offset in offsets.items()],
            )
            for r in results:
                if r.records:
                    offsets[r.topic_partition] = r.log_end_offset

    value = b"x" * 100
    batch = build_batch([Record(None, value) for _ in range(max(args.batch_bytes // 110, 1))])
    followers = [asyncio.ensure_future(follower(r)) for r in (1, 2)]
    await asyncio.sleep(0.05)
    reads = 0
    start = time.process_time()
    for _ in range(args.produces):
        [result] = await manager.append_records(acks=-1, timeout_ms=5_000, entries=[(BUSY, batch)])
        assert result.error == 0, result
        await asyncio.sleep(args.gap_ms / 1000)
    cpu = time.process_time() - start
    stopping = True  # a parked fetch returns within its max_wait_ms
    await asyncio.wait(followers)
    logs.shutdown()
    return cpu / args.produces * 1000, reads / args.produces


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--produces", type=int, default=400)
    parser.add_argument("--batch-bytes", type=int, default=200_000)
    parser.add_argument("--idle-partitions", type=int, default=17)
    parser.add_argument("--gap-ms", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{args.produces} acks=all produces of {args.batch_bytes} B, RF=3, "
        f"{args.idle_partitions} idle partitions in every follower fetch, "
        f"{args.gap_ms} ms between an answer and the next produce"
    )
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="replica-rounds-") as data_dir:
            ms, reads = asyncio.run(run(args, Path(data_dir)))
        print(
            f"leader+followers CPU {ms:.3f} ms per Produce | {reads:.2f} follower reads per Produce"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
