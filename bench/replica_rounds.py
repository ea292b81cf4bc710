"""Leader CPU per acks=all Produce at RF=3, the replication rounds it causes included.

    .venv/bin/python bench/replica_rounds.py [--produces 400] [--batch-bytes 200000]
        [--idle-partitions 17] [--gap-ms 1] [--rounds 3] [--fetchers]

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

With ``--fetchers`` the two followers are real: each a ``ReplicaManager`` over its own
logs with the broker's ``ReplicaFetcherManager``, whose calls go to the leader's Broker
service in process through protobuf bytes (the request serialized and parsed, the
service's encoded answer parsed), as over gRPC minus the transport.  So the CPU includes
the followers' request building, response parsing and appends, and the leader's Fetch
servicer: what fetch sessions change.

With ``--grpc unary`` or ``--grpc stream`` (implies ``--fetchers``) the leader's Broker
service is served by a real ``grpc.aio`` server on the loopback, in the same process and
event loop, and the fetchers call it over real channels: each fetch a unary ``Fetch``
call, or a message on one ``FetchStream`` per follower.  The CPU then includes both ends
of every gRPC call.
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

import grpc
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, PartitionState
from headwater.records import Record, build_batch
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.channels import replica_channel_options, server_options
from headwater.server.runtime.fetcher import ReplicaFetcherManager, grpc_connect
from headwater.server.runtime.hosted import FetchSpec
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.services.broker_service import (
    BrokerService,
    ProducerIdAllocator,
    add_broker_service,
)
from headwater.storage import LogManager
from headwater.v1 import broker_pb2
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


class InProcessChannel:
    async def close(self, grace: float | None) -> None:
        pass


class InProcessStub:
    """A follower's Broker stub calling the leader's service in process, through bytes."""

    def __init__(self, service: BrokerService) -> None:
        self._service = service

    async def Fetch(self, request: Any, **_: Any) -> Any:
        parsed = broker_pb2.FetchRequest.FromString(request.SerializeToString())
        answer = await self._service.fetch_encoded(parsed, None)  # type: ignore[arg-type]
        return broker_pb2.FetchResponse.FromString(answer)

    async def OffsetsForLeaderEpoch(self, request: Any, **_: Any) -> Any:
        return await self._service.OffsetsForLeaderEpoch(request, None)  # type: ignore[arg-type]


def states(leader: int, tps: list[TopicPartition]) -> list[PartitionState]:
    return [
        PartitionState(
            tp.topic,
            tp.partition,
            LeaderAndIsr(leader, 1, (0, 1, 2), controller_epoch=1, zk_version=0),
            replicas=(0, 1, 2),
        )
        for tp in tps
    ]


def replica_manager(broker_id: int, log_manager: LogManager) -> ReplicaManager:
    """A broker's ReplicaManager with no ZooKeeper (ISR changes dropped), every topic known."""
    return ReplicaManager(
        broker_id=broker_id,
        log_manager=log_manager,
        isr_store=NoIsrChanges(),
        metrics=BrokerMetrics(),
        min_insync_replicas=1,
        replica_lag_time_max_ms=30_000,
        default_log_properties={"max.message.bytes": str(4 << 20)},
        is_known_partition=lambda tp: True,
    )


async def start_fetchers(
    manager: ReplicaManager, tps: list[TopicPartition], data_dir: Path, transport: str | None
) -> tuple[list[ReplicaFetcherManager], list[LogManager], Any]:
    """Brokers 1 and 2 following ``tps`` on ``manager`` (broker 0) with real fetchers, in
    process or (``transport``: ``unary``, ``stream``) over gRPC; and the gRPC server."""
    service = BrokerService(
        replicas=manager,
        metadata=MetadataCache(),
        metrics=BrokerMetrics(),
        producer_ids=ProducerIdAllocator(0, start_ms=0),
    )
    server = None
    if transport is None:
        leader = BrokerRegistration(broker_id=0, host="leader", port=1)
        connect: Any = lambda _address: (InProcessChannel(), InProcessStub(service))  # noqa: E731
    else:
        server = grpc.aio.server(options=server_options(8 << 20))
        add_broker_service(service, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        leader = BrokerRegistration(broker_id=0, host="127.0.0.1", port=port)
        connect = grpc_connect(replica_channel_options(8 << 20, backoff_ms=100))
    fetchers, logs = [], []
    for broker in (1, 2):
        log_manager = LogManager([data_dir / f"follower-{broker}"])
        follower = replica_manager(broker, log_manager)
        await follower.prepare_topics(sorted({tp.topic for tp in tps}))
        follower.become_leader_or_follower(controller_epoch=1, states=states(0, tps))
        fetcher = ReplicaFetcherManager(
            manager=follower,
            broker_id=broker,
            max_bytes=8 << 20,
            max_wait_ms=500,
            backoff_ms=100,
            socket_timeout_ms=30_000,
            max_message_bytes=8 << 20,
            connect=connect,
            fetch_streams=transport == "stream",
        )
        fetcher.add_partitions(dict.fromkeys(tps, (0, 1)), {0: leader})
        fetchers.append(fetcher)
        logs.append(log_manager)
    return fetchers, logs, server


async def run(args: argparse.Namespace, data_dir: Path) -> tuple[float, float, float]:
    idle = [TopicPartition("idle", p) for p in range(args.idle_partitions)]
    logs = LogManager([data_dir / "leader"])
    manager = replica_manager(0, logs)
    await manager.prepare_topics(["busy", "idle"])
    manager.become_leader_or_follower(controller_epoch=1, states=states(0, [BUSY, *idle]))
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
    if args.fetchers:
        fetchers, follower_logs, server = await start_fetchers(
            manager, [BUSY, *idle], data_dir, args.grpc
        )
        followers = []
        await asyncio.sleep(0.5)  # truncation, then the first (full) fetches
    else:
        followers = [asyncio.ensure_future(follower(r)) for r in (1, 2)]
        await asyncio.sleep(0.05)
    reads = 0
    start, started = time.process_time(), time.perf_counter()
    for _ in range(args.produces):
        [result] = await manager.append_records(acks=-1, timeout_ms=5_000, entries=[(BUSY, batch)])
        assert result.error == 0, result
        await asyncio.sleep(args.gap_ms / 1000)
    cpu, wall = time.process_time() - start, time.perf_counter() - started
    stopping = True  # a parked fetch returns within its max_wait_ms
    if args.fetchers:
        for fetcher in fetchers:
            await fetcher.shutdown()
        for log_manager in follower_logs:
            log_manager.shutdown()
        if server is not None:
            await server.stop(None)
    else:
        await asyncio.wait(followers)
    logs.shutdown()
    return cpu / args.produces * 1000, reads / args.produces, wall / args.produces * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--produces", type=int, default=400)
    parser.add_argument("--batch-bytes", type=int, default=200_000)
    parser.add_argument("--idle-partitions", type=int, default=17)
    parser.add_argument("--gap-ms", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--fetchers", action="store_true", help="real replica fetchers (see the docstring)"
    )
    parser.add_argument(
        "--grpc",
        choices=("unary", "stream"),
        help="the real fetchers over gRPC on the loopback, each fetch a unary call or a "
        "message on a FetchStream (implies --fetchers)",
    )
    args = parser.parse_args()
    args.fetchers = args.fetchers or args.grpc is not None
    print(
        f"{args.produces} acks=all produces of {args.batch_bytes} B, RF=3, "
        f"{args.idle_partitions} idle partitions in every follower fetch, "
        f"{args.gap_ms} ms between an answer and the next produce"
        + (", real replica fetchers" if args.fetchers else "")
        + (f" over gRPC ({args.grpc})" if args.grpc else "")
    )
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="replica-rounds-") as data_dir:
            ms, reads, wall_ms = asyncio.run(run(args, Path(data_dir)))
        print(
            f"leader+followers CPU {ms:.3f} ms per Produce | {reads:.2f} follower reads per "
            f"Produce | wall {wall_ms:.2f} ms per Produce (under load)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
