"""The ZooKeeper seam of the replica runtime: ISR writes and topic-config reads.

:class:`IsrStore` is what the ``ReplicaManager`` (ISR changes) and
:class:`~headwater.server.runtime.topic_configs.TopicConfigs` (overrides) need from
ZooKeeper, and nothing more; tests pass an in-memory implementation.
:class:`ZooKeeperIsrStore` is the production adapter over the broker's
:class:`~headwater.coordination.broker.BrokerCoordinator`, which connects
only after the logs are open (and is replaced when the session is re-created),
so the adapter resolves it at each call.

Thread model: every method blocks on ZooKeeper; callers run them in a worker
thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from headwater import errors
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import LeaderAndIsr

ConfigCallback = Callable[[str, dict[str, str]], None]
"""Called as ``callback(topic, overrides)``, on kazoo's thread."""


class IsrStore(Protocol):
    def update_isr(
        self, topic: str, partition: int, leader_and_isr: LeaderAndIsr, expected_zk_version: int
    ) -> int | None:
        """Conditional ISR write: the new znode version, or None if ``expected_zk_version``
        is stale."""

    def get_topic_config(self, topic: str) -> Mapping[str, str]:
        """The topic's config overrides (empty when it has none)."""

    def watch_topic_config(self, topic: str, callback: ConfigCallback) -> Callable[[], None]:
        """Call ``callback`` now and on every change; returns a function that cancels."""


class ZooKeeperIsrStore:
    """:class:`IsrStore` over the current ``BrokerCoordinator`` (see module docstring)."""

    def __init__(self, coordinator: Callable[[], BrokerCoordinator | None]) -> None:
        self._coordinator = coordinator

    def _get(self) -> BrokerCoordinator:
        coordinator = self._coordinator()
        if coordinator is None:
            raise errors.BrokerNotAvailableError("not connected to ZooKeeper yet")
        return coordinator

    def update_isr(
        self, topic: str, partition: int, leader_and_isr: LeaderAndIsr, expected_zk_version: int
    ) -> int | None:
        return self._get().update_isr(topic, partition, leader_and_isr, expected_zk_version)

    def get_topic_config(self, topic: str) -> Mapping[str, str]:
        coordinator = self._coordinator()
        return coordinator.get_topic_config(topic) if coordinator is not None else {}

    def watch_topic_config(self, topic: str, callback: ConfigCallback) -> Callable[[], None]:
        return self._get().watch_topic_config(topic, callback)
