"""Prometheus metrics of one broker, in its own registry.

A private ``CollectorRegistry`` (not the process-global default) lets tests
and in-process clusters create several brokers without name clashes.  Gauges
that are cheap to compute on demand (leader count, under-replicated and offline
partitions, log sizes) are filled by a collector callback at scrape time from
the replica manager, so the hot path only increments counters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import prometheus_client
from prometheus_client.core import GaugeMetricFamily


class PartitionSnapshot(NamedTuple):
    """What the scrape-time collector needs to know about one hosted partition."""

    topic: str
    partition: int
    is_leader: bool
    under_replicated: bool
    offline: bool
    size_bytes: int


class _StateCollector:
    def __init__(
        self,
        *,
        partitions: Callable[[], Iterable[PartitionSnapshot]],
        is_controller: Callable[[], bool],
    ) -> None:
        self._partitions = partitions
        self._is_controller = is_controller

    def collect(self) -> Iterator[Any]:
        snapshots = list(self._partitions())
        yield GaugeMetricFamily(
            "headwater_replica_manager_leader_count",
            "Partitions this broker leads.",
            value=sum(1 for s in snapshots if s.is_leader),
        )
        yield GaugeMetricFamily(
            "headwater_replica_manager_under_replicated_partitions",
            "Led partitions whose ISR is smaller than the replica set.",
            value=sum(1 for s in snapshots if s.under_replicated),
        )
        yield GaugeMetricFamily(
            "headwater_replica_manager_offline_partitions",
            "Hosted partitions without a leader.",
            value=sum(1 for s in snapshots if s.offline),
        )
        yield GaugeMetricFamily(
            "headwater_controller_active_controller_count",
            "1 if this broker is the active controller.",
            value=1 if self._is_controller() else 0,
        )
        sizes = GaugeMetricFamily(
            "headwater_log_size_bytes", "Bytes of a partition's log.", labels=["topic", "partition"]
        )
        for s in snapshots:
            sizes.add_metric([s.topic, str(s.partition)], s.size_bytes)
        yield sizes


class BrokerMetrics:
    """The broker's instruments; ``registry`` is what the HTTP endpoint serves."""

    def __init__(self) -> None:
        self.registry = prometheus_client.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.bytes_in = prometheus_client.Counter(
            "headwater_broker_topic_bytes_in", "Bytes appended by producers.", ["topic"], registry=r
        )
        self.bytes_out = prometheus_client.Counter(
            "headwater_broker_topic_bytes_out", "Bytes returned by fetches.", ["topic"], registry=r
        )
        self.messages_in = prometheus_client.Counter(
            "headwater_broker_topic_messages_in", "Records appended.", ["topic"], registry=r
        )
        self.requests = prometheus_client.Counter(
            "headwater_requests", "RPCs handled.", ["rpc", "outcome"], registry=r
        )
        self.latency = prometheus_client.Histogram(
            "headwater_request_latency_seconds",
            "RPC handling time.",
            ["rpc"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.isr_shrinks = prometheus_client.Counter(
            "headwater_replica_manager_isr_shrinks", "ISR shrinks committed.", registry=r
        )
        self.isr_expands = prometheus_client.Counter(
            "headwater_replica_manager_isr_expands", "ISR expansions committed.", registry=r
        )

    def register_state(
        self,
        *,
        partitions: Callable[[], Iterable[PartitionSnapshot]],
        is_controller: Callable[[], bool],
    ) -> None:
        self.registry.register(_StateCollector(partitions=partitions, is_controller=is_controller))

    def serve(self, port: int, host: str = "0.0.0.0") -> Any:  # pragma: no cover - network
        """Start the HTTP endpoint in a daemon thread; returns the server (or None)."""
        result = prometheus_client.start_http_server(port, addr=host, registry=self.registry)
        return result
