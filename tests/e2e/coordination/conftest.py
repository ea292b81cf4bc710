"""Coordination e2e fixtures: a recording controller channel and a cluster of coordinators.

The coordinators are real (real ZooKeeper sessions, real controller threads);
only the controller -> broker channel is a recorder, since the gRPC path is
tested with real brokers elsewhere.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import BrokerRegistration, PartitionState
from headwater.coordination.settings import CoordinationSettings

SESSION_TIMEOUT_MS = 2000


@dataclass
class Sent:
    kind: str
    broker_id: int
    controller_epoch: int
    states: tuple[PartitionState, ...] = ()
    partitions: tuple[tuple[str, int], ...] = ()
    deleted_topics: tuple[str, ...] = ()
    delete: bool = False


@dataclass
class RecordingChannel:
    """A ControllerChannel that records every request (thread-safe)."""

    sent: list[Sent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send_leader_and_isr(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        states: Sequence[PartitionState],
        live_leaders: Sequence[BrokerRegistration],
    ) -> None:
        with self.lock:
            self.sent.append(
                Sent("LeaderAndIsr", broker.broker_id, controller_epoch, tuple(states))
            )

    def send_stop_replica(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        partitions: Sequence[tuple[str, int]],
        delete: bool,
    ) -> None:
        with self.lock:
            self.sent.append(
                Sent(
                    "StopReplica",
                    broker.broker_id,
                    controller_epoch,
                    partitions=tuple(partitions),
                    delete=delete,
                )
            )

    def send_update_metadata(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        states: Sequence[PartitionState],
        live_brokers: Sequence[BrokerRegistration],
        deleted_topics: Sequence[str],
    ) -> None:
        with self.lock:
            self.sent.append(
                Sent(
                    "UpdateMetadata",
                    broker.broker_id,
                    controller_epoch,
                    tuple(states),
                    deleted_topics=tuple(deleted_topics),
                )
            )

    def of(self, kind: str) -> list[Sent]:
        with self.lock:
            return [s for s in self.sent if s.kind == kind]


def wait_until(predicate: Callable[[], object], *, timeout_s: float = 15.0, what: str = "") -> None:
    """Poll ``predicate`` every 50 ms until truthy; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout_s}s waiting for {what or predicate}")


@dataclass
class Cluster:
    connect: str
    channel: RecordingChannel
    brokers: dict[int, BrokerCoordinator] = field(default_factory=dict)
    racks: dict[int, str] = field(default_factory=dict)

    def settings(self, **overrides: object) -> CoordinationSettings:
        base: dict[str, object] = dict(
            zookeeper_connect=self.connect,
            zookeeper_session_timeout_ms=SESSION_TIMEOUT_MS,
            zookeeper_connection_timeout_ms=10000,
            auto_leader_rebalance_enable=False,
        )
        base.update(overrides)
        return CoordinationSettings(**base)  # type: ignore[arg-type]

    def start(self, broker_id: int, **overrides: object) -> BrokerCoordinator:
        reg = BrokerRegistration(
            broker_id, "127.0.0.1", 9000 + broker_id, rack=self.racks.get(broker_id), version="t"
        )
        coordinator = BrokerCoordinator(
            self.settings(**overrides),
            broker=reg,
            channel=self.channel,
            rng=random.Random(broker_id),
        )
        coordinator.start()
        self.brokers[broker_id] = coordinator
        return coordinator

    def stop(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).stop()

    def controller(self) -> BrokerCoordinator:
        wait_until(lambda: any(b.is_controller for b in self.brokers.values()), what="a controller")
        return next(b for b in self.brokers.values() if b.is_controller)

    def any(self) -> BrokerCoordinator:
        return next(iter(self.brokers.values()))

    def stop_all(self) -> None:
        for broker_id in list(self.brokers):
            self.stop(broker_id)


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    c = Cluster(zk_connect, RecordingChannel())
    try:
        yield c
    finally:
        c.stop_all()
