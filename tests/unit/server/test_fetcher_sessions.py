"""The replica fetcher in fetch sessions against a real leader: two ReplicaManagers over
real logs, the follower's fetcher calling the leader's Broker service in process (no
network).  Replication goes on across incremental fetches, an idle follower lists nothing
and stays fresh on the leader, and a leader that lost its sessions (a restart) makes the
follower fall back to a full fetch."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, PartitionState
from headwater.errors import ErrorCode
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.fetcher import ReplicaFetcherManager
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.services.broker_service import BrokerService, ProducerIdAllocator
from headwater.storage import LogManager
from headwater.v1 import broker_pb2

from .conftest import TP, FakeClock, FakeIsrStore, Harness
from .test_replica_manager import records

LEADER = BrokerRegistration(broker_id=1, host="leader.example", port=9093)


def state(*, leader: int, epoch: int) -> PartitionState:
    return PartitionState(
        TP.topic,
        TP.partition,
        LeaderAndIsr(leader, epoch, (0, 1), controller_epoch=1, zk_version=0),
        replicas=(0, 1),
    )


class Leader:
    """Broker 1 leading TP (epoch 1), with its Broker service; ``restart`` replaces the
    service (and so its fetch sessions), as a restarted broker has none."""

    def __init__(self, path: Path) -> None:
        self.store = FakeIsrStore()
        self.clock = FakeClock()
        self.logs = LogManager([path])
        self.manager = ReplicaManager(
            broker_id=1,
            log_manager=self.logs,
            isr_store=self.store,
            metrics=BrokerMetrics(),
            min_insync_replicas=1,
            replica_lag_time_max_ms=1000,
            default_log_properties={},
            is_known_partition=lambda tp: tp == TP,
            clock_ms=self.clock,
        )
        self.requests: list[broker_pb2.FetchRequest] = []
        self.answers: list[broker_pb2.FetchResponse] = []
        self.restart()

    def restart(self) -> None:
        self.service = BrokerService(
            replicas=self.manager,
            metadata=MetadataCache(),
            metrics=self.manager._metrics,
            producer_ids=ProducerIdAllocator(1, start_ms=0),
        )

    def connect(self, address: str) -> tuple[Any, Any]:
        return Channel(), Stub(self)


class Channel:
    async def close(self, grace: float | None) -> None:
        pass


class Stub:
    def __init__(self, leader: Leader) -> None:
        self._leader = leader

    async def Fetch(
        self, request: broker_pb2.FetchRequest, *, timeout: float, wait_for_ready: bool
    ) -> broker_pb2.FetchResponse:
        copy = broker_pb2.FetchRequest()
        copy.CopyFrom(request)
        self._leader.requests.append(copy)
        answer = await self._leader.service.Fetch(request, None)  # type: ignore[arg-type]
        self._leader.answers.append(answer)
        return answer

    async def OffsetsForLeaderEpoch(
        self, request: broker_pb2.OffsetsForLeaderEpochRequest, **_: Any
    ) -> broker_pb2.OffsetsForLeaderEpochResponse:
        return await self._leader.service.OffsetsForLeaderEpoch(request, None)  # type: ignore[arg-type]


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    leader = Leader(tmp_path / "leader")
    yield leader
    leader.logs.shutdown()


async def until(predicate: Any, what: str) -> None:
    for _ in range(500):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def replicating(harness: Harness, leader: Leader) -> ReplicaFetcherManager:
    await leader.manager.prepare_topics([TP.topic])
    leader.manager.become_leader_or_follower(controller_epoch=1, states=[state(leader=1, epoch=1)])
    m = harness.manager
    await m.prepare_topics([TP.topic])
    m.become_leader_or_follower(controller_epoch=1, states=[state(leader=1, epoch=1)])
    fetchers = ReplicaFetcherManager(
        manager=m,
        broker_id=0,
        max_bytes=1 << 20,
        max_wait_ms=50,
        backoff_ms=20,
        socket_timeout_ms=1500,
        max_message_bytes=1 << 20,
        connect=leader.connect,
        fetch_streams=False,  # the fake leader's stub has unary calls only
    )
    fetchers.add_partitions({TP: (1, 1)}, {1: LEADER})
    return fetchers


def follower_end(harness: Harness) -> int:
    return harness.manager.partitions[TP].log.log_end_offset


def test_replication_goes_on_in_a_session_and_an_idle_follower_lists_nothing(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        fetchers = await replicating(harness, leader)
        for n, payload in enumerate((b"a", b"b", b"c"), start=1):
            await leader.manager.append_records(
                acks=1, timeout_ms=100, entries=[(TP, records(payload))]
            )
            await until(lambda n=n: follower_end(harness) == n, f"the follower at {n}")
        quiet_from = len(leader.requests)
        await until(lambda: len(leader.requests) >= quiet_from + 3, "idle fetches")
        first = leader.requests[0]
        assert (first.session_epoch, len(first.partitions)) == (0, 1)
        sid = leader.answers[0].session_id
        assert sid > 0
        idle = leader.requests[quiet_from + 1 :]
        assert all(r.session_id == sid and r.session_epoch > 0 for r in idle)
        assert all(len(r.partitions) == 0 for r in idle)  # nothing changed: nothing listed
        assert all(len(a.partitions) == 0 for a in leader.answers[quiet_from + 1 :])
        epochs = [r.session_epoch for r in leader.requests]
        assert epochs == list(range(len(epochs)))  # one session, each epoch once
        # The leader still counts each idle fetch: the follower is caught up now.
        follower = leader.manager.partitions[TP].state.followers[0]
        assert follower.log_end_offset == 3
        leader.clock.now_ms += 900
        await until(
            lambda: leader.manager.partitions[TP].state.followers[0].last_caught_up_time_ms == 900,
            "a caught-up idle fetch at the new time",
        )
        assert harness.manager.partitions[TP].state.high_watermark == 3
        await fetchers.shutdown()

    asyncio.run(scenario())


def test_a_leader_without_the_session_gets_a_full_fetch_and_replication_goes_on(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        fetchers = await replicating(harness, leader)
        await leader.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        await until(lambda: follower_end(harness) == 1, "the follower at 1")
        leader.restart()
        restarted_at = len(leader.answers)

        def refused() -> list[int]:
            after = leader.answers[restarted_at:]
            return [i for i, a in enumerate(after) if a.error != ErrorCode.NONE]

        await until(lambda: refused() != [], "a fetch the restarted leader refuses")
        at = restarted_at + refused()[0]
        assert leader.answers[at].error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        await until(lambda: len(leader.answers) > at + 1, "the next fetch")
        full = leader.requests[at + 1]
        assert (full.session_id, full.session_epoch, len(full.partitions)) == (0, 0, 1)
        assert leader.answers[at + 1].session_id > 0
        assert len(refused()) == 1
        await leader.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"b"))])
        await until(lambda: follower_end(harness) == 2, "the follower at 2")
        assert len(refused()) == 1
        await fetchers.shutdown()

    asyncio.run(scenario())


def test_a_partition_leaving_and_joining_the_fetcher_restarts_the_session_whole(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        fetchers = await replicating(harness, leader)
        await leader.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        await until(lambda: follower_end(harness) == 1, "the follower at 1")
        fetchers.remove_partitions([TP])
        await asyncio.sleep(0.1)
        await leader.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"b"))])
        await asyncio.sleep(0.1)
        assert follower_end(harness) == 1  # no fetcher follows it now
        rejoined_at = len(leader.requests)
        fetchers.add_partitions({TP: (1, 1)}, {1: LEADER})
        await until(lambda: follower_end(harness) == 2, "the follower at 2")
        first = leader.requests[rejoined_at]
        assert (first.session_epoch, len(first.partitions)) == (0, 1)
        await fetchers.shutdown()

    asyncio.run(scenario())
