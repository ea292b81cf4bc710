"""A Controller over in-memory ZooKeeper, driven event by event on the test's thread, with
a manual clock."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from headwater.coordination.controller import Controller
from headwater.coordination.model import BrokerRegistration, PartitionState
from headwater.coordination.settings import CoordinationSettings

from .fakes import FakeZk


@dataclasses.dataclass
class ManualClock:
    """Monotonic milliseconds that move only when a test says so."""

    now_ms: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now_ms


class Channel:
    """A ControllerChannel that records what the sender threads deliver (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered: list[tuple[str, int]] = []

    def _note(self, kind: str, broker: BrokerRegistration) -> None:
        with self.lock:
            self.delivered.append((kind, broker.broker_id))

    def send_leader_and_isr(self, broker: BrokerRegistration, **_: Any) -> None:
        self._note("LeaderAndIsr", broker)

    def send_update_metadata(self, broker: BrokerRegistration, **_: Any) -> None:
        self._note("UpdateMetadata", broker)

    def send_stop_replica(
        self, broker: BrokerRegistration, *, partitions: Sequence[tuple[str, int]], **_: Any
    ) -> None:
        self._note("StopReplica", broker)


def unused(_: Sequence[PartitionState]) -> None:
    return None


def controller(
    zk: FakeZk,
    *,
    broker_id: int = 1,
    clock: ManualClock | None = None,
    on_reconnect: Any = None,
    **settings: Any,
) -> Controller:
    base: dict[str, Any] = {"leader_imbalance_check_interval_s": 300.0}
    base.update(settings)
    return Controller(
        zk,  # type: ignore[arg-type]
        broker_id=broker_id,
        channel=Channel(),
        settings=CoordinationSettings(**base),
        clock=clock or ManualClock(),
        now_ms=lambda: 42,
        on_reconnect=on_reconnect,
    )
