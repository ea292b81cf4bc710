"""A broker's client quotas: the :class:`~headwater.quotas.manager.ClientQuotas` both
front doors enforce, kept equal to ZooKeeper by a
:class:`~headwater.coordination.client_quotas.ClientQuotaWatcher`, and the store the
admin APIs (Kafka's AlterClientQuotas and DescribeClientQuotas, the gRPC
ClientQuotaAdmin RPCs) read and write.  Until :meth:`start` there are no quotas and
no store (the admin APIs answer BROKER_NOT_AVAILABLE)."""

from __future__ import annotations

from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.client_quotas import ClientQuotaStore, ClientQuotaWatcher
from headwater.quotas.manager import ClientQuotas
from headwater.quotas.rates import WindowConfig
from headwater.server.config import BrokerConfig


class BrokerClientQuotas:
    def __init__(self, config: BrokerConfig) -> None:
        self.quotas = ClientQuotas(
            WindowConfig(num=config.quota_window_num, size_seconds=config.quota_window_size_seconds)
        )
        self._watcher: ClientQuotaWatcher | None = None
        self._store: ClientQuotaStore | None = None

    @property
    def store(self) -> ClientQuotaStore | None:
        return self._store

    def start(self, coordinator: BrokerCoordinator) -> None:
        """Load the stored quotas and follow their changes (blocking: a worker thread)."""
        client = coordinator.store.client
        watcher = ClientQuotaWatcher(client, self.quotas)
        watcher.start()
        self._watcher, self._store = watcher, ClientQuotaStore(client)

    def stop(self) -> None:
        watcher, self._watcher, self._store = self._watcher, None, None
        if watcher is not None:
            watcher.stop()
