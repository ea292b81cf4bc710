"""This broker's replication throttles: the two quotas and the dynamic rates that set them.

Kafka's ``ReplicationQuotaManager`` pair (leader and follower) and the part of
its ``DynamicConfigManager`` that reads ``/config/brokers/<id>`` and
``/config/brokers/<default>``: a change to either znode (AlterConfigs on a
BROKER resource) takes effect at once, without a restart.  The decisions are
:mod:`headwater.replication.quota` (pure); this module holds the state and
the watches.

Thread model: every method runs on the broker's event loop; ZooKeeper watches
fire on kazoo's thread and are handed to the loop with ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from headwater import errors
from headwater.clock import Clock, monotonic_ms
from headwater.replication import quota
from headwater.replication.quota import ReplicationQuota
from headwater.server.runtime.offload import run_blocking
from headwater.storage import LogConfig

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"


class WatchBrokerConfig(Protocol):
    """Watches ``/config/brokers/<entity>`` (``reassignment_admin.watch_broker_config``)."""

    def __call__(
        self, entity: str, callback: Callable[[str, dict[str, str]], None]
    ) -> Callable[[], None]: ...


class ReplicationQuotas:
    """The leader-side and follower-side quotas of one broker.

    Invariant: each quota's rate is :func:`~headwater.replication.quota.effective_rate`
    of the dynamic configs last seen for this broker and for ``<default>``.
    """

    def __init__(self, *, broker_id: int, clock: Clock = monotonic_ms) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.leader = ReplicationQuota()
        self.follower = ReplicationQuota()
        self._configs: dict[str, dict[str, str]] = {str(broker_id): {}, DEFAULT_ENTITY: {}}
        self._cancels: list[Callable[[], None]] = []

    def apply(self, entity: str, config: Mapping[str, str]) -> None:
        """New dynamic configs for ``entity`` (this broker's id or ``<default>``)."""
        if entity not in self._configs:
            return
        self._configs[entity] = dict(config)
        mine, default = self._configs[str(self.broker_id)], self._configs[DEFAULT_ENTITY]
        for key, bucket in ((quota.LEADER_RATE, self.leader), (quota.FOLLOWER_RATE, self.follower)):
            rate = quota.effective_rate(key, broker=mine, default=default)
            if rate != bucket.rate_bytes_per_s:
                log.info("%s is now %s", key, "unlimited" if rate >= quota.UNLIMITED else rate)
                bucket.set_rate(rate)

    def dynamic_config(self, entity: str) -> dict[str, str]:
        return dict(self._configs.get(entity, {}))

    def leader_throttled(self, config: LogConfig, *, partition: int, in_sync: bool) -> bool:
        """Kafka's ``shouldLeaderThrottle`` without the "exceeded" half."""
        return (
            not in_sync
            and not self.leader.unlimited
            and quota.is_throttled(
                config.leader_replication_throttled_replicas,
                partition=partition,
                broker_id=self.broker_id,
            )
        )

    def follower_throttled(self, config: LogConfig, *, partition: int, in_sync: bool) -> bool:
        """Kafka's ``shouldFollowerThrottle`` without the "exceeded" half."""
        return (
            not in_sync
            and not self.follower.unlimited
            and quota.is_throttled(
                config.follower_replication_throttled_replicas,
                partition=partition,
                broker_id=self.broker_id,
            )
        )

    async def watch(self, watch_config: WatchBrokerConfig) -> None:
        """Read and watch ``/config/brokers/<id>`` and ``<default>`` (ZooKeeper, in a thread)."""
        loop = asyncio.get_running_loop()

        def on_change(entity: str, config: dict[str, str]) -> None:  # kazoo's thread
            loop.call_soon_threadsafe(self.apply, entity, config)

        for entity in (str(self.broker_id), DEFAULT_ENTITY):
            try:
                self._cancels.append(await run_blocking(watch_config, entity, on_change))
            except Exception as exc:  # unthrottled until the next start
                log.warning(
                    "cannot watch the dynamic configs of %s: %s", entity, errors.describe(exc)
                )

    def shutdown(self) -> None:
        for cancel in self._cancels:
            cancel()
        self._cancels.clear()
