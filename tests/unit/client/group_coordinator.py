"""The broker's real group coordinator, in-process, for the consumer's group-client tests.

Runs :class:`headwater.server.services.group.GroupService` over a real
:class:`headwater.groups.coordinator_runtime.GroupCoordinatorRuntime` (one ``__consumer_offsets``
partition kept in memory) on a gRPC server on 127.0.0.1, on an event loop of its own
thread.  Only discovery is simplified: FindCoordinator names this server, since there is
no ZooKeeper or metadata cache behind it.  Pair it with
:class:`tests.unit.client.fake_broker.FakeBroker` for metadata and fetches: consumers
get ``bootstrap_servers=(broker.bootstrap, coordinator.address)``, ask the fake broker
for FindCoordinator first (it does not serve the Group service) and then this server.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.values import GroupConfig
from headwater.records import read_batches, set_base_offset
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.scheduler import PeriodicJob, PeriodicScheduler
from headwater.server.services.group import GroupService
from headwater.v1 import group_pb2, group_pb2_grpc


class _Log:
    """One in-memory __consumer_offsets partition (used on the server's loop only)."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.next_offset = 0

    async def append(self, partition: int, data: bytes) -> None:
        buf = bytearray(data)
        set_base_offset(buf, 0, self.next_offset)
        self.next_offset = next(read_batches(bytes(buf))).next_offset
        self.batches.append(bytes(buf))

    async def read(self, partition: int, offset: int) -> bytes:
        return b"".join(b for b in self.batches if next(read_batches(b)).base_offset >= offset)


async def _call(fn: Any) -> None:
    fn()


class _Service(GroupService):
    port = 0

    async def FindCoordinator(self, request: Any, context: Any) -> Any:
        return group_pb2.FindCoordinatorResponse(node_id=1, host="127.0.0.1", port=self.port)


class InProcessCoordinator:
    """Start with the constructor, stop with :meth:`stop`."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self.metadata = MetadataCache()
        self.port = 0
        self._thread = threading.Thread(target=self._run, name="test-coordinator", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the in-process group coordinator did not start")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        log = _Log()
        runtime = GroupCoordinatorRuntime(
            num_partitions=1,
            partition_counts=self.metadata.partition_counts,
            append=log.append,
            read=log.read,
            config=GroupConfig(
                group_initial_rebalance_delay_ms=0,
                group_min_session_timeout_ms=500,
                consumer_heartbeat_interval_ms=200,
                consumer_session_timeout_ms=3000,
            ),
        )
        await runtime.on_become_leader(0, 0)
        scheduler = PeriodicScheduler()  # the broker's group-timers job, ticking faster

        async def group_timers(_now_ms: int) -> None:
            await runtime.tick()

        scheduler.start(PeriodicJob("group-timers", 50, group_timers))
        service = _Service(runtime=runtime, metadata=self.metadata, coordinator=lambda: None)
        server = grpc.aio.server()
        group_pb2_grpc.add_GroupServicer_to_server(service, server)
        self.port = service.port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        self._stopping = asyncio.Event()
        self._ready.set()
        await self._stopping.wait()
        await server.stop(0)
        await scheduler.close()
        await runtime.close()

    def create_topic(self, topic: str, partitions: int) -> None:
        """Add ``topic`` to the coordinator's metadata cache (on its loop, and wait)."""
        states = [
            PartitionState(
                topic, p, LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,), controller_epoch=0), (1,)
            )
            for p in range(partitions)
        ]

        def update() -> None:
            self.metadata.update(
                controller_id=1, controller_epoch=0, states=states, live_brokers=None
            )

        asyncio.run_coroutine_threadsafe(_call(update), self._loop).result(10)

    def stop(self) -> None:
        stopping = self._stopping
        if stopping is not None:
            self._loop.call_soon_threadsafe(stopping.set)
        self._thread.join(10)
