"""A ReplicaManager over real logs in a temporary directory, with a fake ISR store."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.storage import LogManager
from headwater.values import TopicPartition

TP = TopicPartition("orders", 0)


class FakeIsrStore:
    """An in-memory IsrStore: accepts every conditional ISR write and remembers it."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, int, LeaderAndIsr, int]] = []
        self.watched: list[str] = []

    def update_isr(
        self, topic: str, partition: int, leader_and_isr: LeaderAndIsr, expected_zk_version: int
    ) -> int | None:
        self.writes.append((topic, partition, leader_and_isr, expected_zk_version))
        return expected_zk_version + 1

    def get_topic_config(self, topic: str) -> Mapping[str, str]:
        return {"max.message.bytes": "10000"}

    def watch_topic_config(
        self, topic: str, callback: Callable[[str, dict[str, str]], None]
    ) -> Callable[[], None]:
        self.watched.append(topic)
        return lambda: self.watched.remove(topic)


class FakeClock:
    def __init__(self) -> None:
        self.now_ms = 0.0

    def __call__(self) -> float:
        return self.now_ms


class Harness:
    def __init__(self, tmp_path: Path) -> None:
        self.store = FakeIsrStore()
        self.clock = FakeClock()
        self.logs = LogManager([tmp_path / "logs"])
        self.manager = ReplicaManager(
            broker_id=0,
            log_manager=self.logs,
            isr_store=self.store,
            metrics=BrokerMetrics(),
            min_insync_replicas=2,
            replica_lag_time_max_ms=1000,
            default_log_properties={"min.insync.replicas": "2"},
            is_known_partition=lambda tp: tp == TP,
            clock_ms=self.clock,
        )

    def state(
        self, *, leader: int, isr: tuple[int, ...], epoch: int = 1, zk_version: int = 0
    ) -> PartitionState:
        return PartitionState(
            TP.topic,
            TP.partition,
            LeaderAndIsr(leader, epoch, isr, controller_epoch=1, zk_version=zk_version),
            replicas=(0, 1),
        )


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.logs.shutdown()
