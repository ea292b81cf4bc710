"""Prometheus metrics of one broker, in its own registry.

A private ``CollectorRegistry`` (not the process-global default) lets tests
and in-process clusters create several brokers without name clashes.  Gauges
that are cheap to compute on demand (leader count, under-replicated and offline
partitions, log sizes) are filled by a collector callback at scrape time from
the replica manager, so the hot path only increments counters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import prometheus_client
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from headwater.quotas.rates import SensorFigures


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
        reassigning_partitions: Callable[[], int],
    ) -> None:
        self._partitions = partitions
        self._is_controller = is_controller
        self._reassigning_partitions = reassigning_partitions

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
        yield GaugeMetricFamily(
            "headwater_controller_reassigning_partitions",
            "Partitions being reassigned (Kafka's ReassigningPartitions); 0 off the controller.",
            value=self._reassigning_partitions(),
        )
        sizes = GaugeMetricFamily(
            "headwater_log_size_bytes", "Bytes of a partition's log.", labels=["topic", "partition"]
        )
        for s in snapshots:
            sizes.add_metric([s.topic, str(s.partition)], s.size_bytes)
        yield sizes


class LogDirUsage(NamedTuple):
    """The disk under one log directory (``log.dirs`` entry)."""

    log_dir: str
    total_bytes: int
    free_bytes: int


class CertificateExpiry(NamedTuple):
    """When the certificate a TLS listener serves stops being valid."""

    listener: str
    not_after_s: float


class _HostCollector:
    """The broker's disks and certificates, read at scrape time."""

    def __init__(
        self,
        *,
        disks: Callable[[], Iterable[LogDirUsage]],
        certificates: Callable[[], Iterable[CertificateExpiry]],
    ) -> None:
        self._disks = disks
        self._certificates = certificates

    def collect(self) -> Iterator[Any]:
        total = GaugeMetricFamily(
            "headwater_log_dir_total_bytes",
            "Size of the filesystem holding a log directory.",
            labels=["log_dir"],
        )
        free = GaugeMetricFamily(
            "headwater_log_dir_free_bytes",
            "Bytes available to the broker on the filesystem of a log directory.",
            labels=["log_dir"],
        )
        for d in self._disks():
            total.add_metric([d.log_dir], d.total_bytes)
            free.add_metric([d.log_dir], d.free_bytes)
        yield total
        yield free
        expiry = GaugeMetricFamily(
            "headwater_tls_certificate_expiry_timestamp_seconds",
            "When the certificate a TLS listener serves expires (its notAfter, Unix time).",
            labels=["listener"],
        )
        for c in self._certificates():
            expiry.add_metric([c.listener], c.not_after_s)
        yield expiry


class GroupOffset(NamedTuple):
    """One committed offset of a group this broker coordinates."""

    group: str
    topic: str
    partition: int
    committed_offset: int


class RebalanceFigures(NamedTuple):
    """A group's completed rebalances on this coordinator (reset when it moves)."""

    rebalances: int
    last_duration_ms: int
    total_duration_ms: int


class _GroupCollector:
    """Consumer-group figures of the groups this broker coordinates.

    Lag is the partition's end offset minus the committed offset: the high watermark of
    this broker's replica, or for a partition with no replica here the one its leader
    last reported (:mod:`headwater.server.group_lag`; a scrape does no network I/O).
    A partition whose end offset is not known yet has no lag sample.
    """

    def __init__(
        self,
        *,
        committed: Callable[[], Iterable[GroupOffset]],
        end_offset: Callable[[str, int], int | None],
        rebalances: Callable[[], Mapping[str, RebalanceFigures]],
    ) -> None:
        self._committed = committed
        self._end_offset = end_offset
        self._rebalances = rebalances

    def collect(self) -> Iterator[Any]:
        labels = ["group", "topic", "partition"]
        offsets = GaugeMetricFamily(
            "headwater_group_committed_offset", "A group's committed offset.", labels=labels
        )
        lag = GaugeMetricFamily(
            "headwater_group_lag",
            "High watermark minus the committed offset (records not yet consumed).",
            labels=labels,
        )
        for g in self._committed():
            key = [g.group, g.topic, str(g.partition)]
            offsets.add_metric(key, g.committed_offset)
            end = self._end_offset(g.topic, g.partition)
            if end is not None:
                lag.add_metric(key, max(0, end - g.committed_offset))
        yield offsets
        yield lag
        stats = dict(self._rebalances())
        count = CounterMetricFamily(
            "headwater_group_rebalances", "Rebalances completed.", labels=["group"]
        )
        total = CounterMetricFamily(
            "headwater_group_rebalance_time_seconds",
            "Time spent rebalancing (from PreparingRebalance to Stable).",
            labels=["group"],
        )
        last = GaugeMetricFamily(
            "headwater_group_last_rebalance_seconds",
            "Duration of the latest completed rebalance.",
            labels=["group"],
        )
        for group, s in sorted(stats.items()):
            count.add_metric([group], s.rebalances)
            total.add_metric([group], s.total_duration_ms / 1000.0)
            last.add_metric([group], s.last_duration_ms / 1000.0)
        yield count
        yield total
        yield last


class _ClientQuotaCollector:
    """Per-entity client quota figures (Kafka's ``kafka.server:type=Produce|Fetch|Request,
    user=..,client-id=..`` ``byte-rate``, ``request-time`` and ``throttle-time``), one
    series per budget recorded against: only entities with a quota have one, labelled by
    the budget's tags ("" for a tag its quota does not name), so the label values are
    bounded by the stored quotas and the users and client ids they apply to."""

    def __init__(self, figures: Callable[[], Iterable[tuple[str, str, str, SensorFigures]]]):
        self._figures = figures

    def collect(self) -> Iterator[Any]:
        labels = ["quota", "user", "client_id"]
        rate = GaugeMetricFamily(
            "headwater_client_quota_rate",
            "A quota entity's measured rate as of its latest request: bytes/s for"
            " producer_byte_rate and consumer_byte_rate, percent of one thread's time for"
            " request_percentage.",
            labels=labels,
        )
        bound = GaugeMetricFamily(
            "headwater_client_quota_bound", "The quota the entity is held to.", labels=labels
        )
        recorded = CounterMetricFamily(
            "headwater_client_quota_recorded",
            "Recorded against the quota: bytes, or percent-seconds of one thread's time.",
            labels=labels,
        )
        throttle = CounterMetricFamily(
            "headwater_client_quota_throttle_time_ms",
            "Throttle time handed to the entity's requests, in ms.",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            "headwater_client_quota_throttled_requests",
            "The entity's requests answered with a throttle time.",
            labels=labels,
        )
        for quota, user, client_id, f in self._figures():
            key = [quota, user, client_id]
            rate.add_metric(key, f.rate)
            bound.add_metric(key, f.bound)
            recorded.add_metric(key, f.recorded_total)
            throttle.add_metric(key, f.throttle_ms_total)
            throttled.add_metric(key, f.throttled)
        yield from (rate, bound, recorded, throttle, throttled)


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
        self.replication_throttled_bytes = prometheus_client.Counter(
            "headwater_replication_throttled_bytes",
            "Replication bytes counted against leader.replication.throttled.rate (side=leader)"
            " or follower.replication.throttled.rate (side=follower).",
            ["side"],
            registry=r,
        )
        self.messages_in = prometheus_client.Counter(
            "headwater_broker_topic_messages_in", "Records appended.", ["topic"], registry=r
        )
        self.requests = prometheus_client.Counter(
            "headwater_requests", "RPCs handled.", ["rpc", "outcome"], registry=r
        )
        self.kafka_requests = prometheus_client.Counter(
            "headwater_kafka_requests",
            "Requests received on a Kafka listener, by API and version (Kafka's RequestsPerSec).",
            ["listener", "request", "version"],
            registry=r,
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
        reassigning_partitions: Callable[[], int] = lambda: 0,
    ) -> None:
        self.registry.register(
            _StateCollector(
                partitions=partitions,
                is_controller=is_controller,
                reassigning_partitions=reassigning_partitions,
            )
        )

    def register_host(
        self,
        *,
        disks: Callable[[], Iterable[LogDirUsage]],
        certificates: Callable[[], Iterable[CertificateExpiry]] = tuple,
    ) -> None:
        """Export the log directories' disk usage and the listeners' certificate expiry
        at scrape time."""
        self.registry.register(_HostCollector(disks=disks, certificates=certificates))

    def register_groups(
        self,
        *,
        committed: Callable[[], Iterable[GroupOffset]],
        end_offset: Callable[[str, int], int | None],
        rebalances: Callable[[], Mapping[str, RebalanceFigures]],
    ) -> None:
        """Export the coordinated groups' offsets, lag and rebalance figures at scrape time."""
        self.registry.register(
            _GroupCollector(committed=committed, end_offset=end_offset, rebalances=rebalances)
        )

    def register_client_quotas(
        self, figures: Callable[[], Iterable[tuple[str, str, str, SensorFigures]]]
    ) -> None:
        """Export each quota entity's ``(quota, user, client_id, figures)`` at scrape time."""
        self.registry.register(_ClientQuotaCollector(figures))

    def serve(self, port: int, host: str = "0.0.0.0") -> Any:  # pragma: no cover - network
        """Start the HTTP endpoint in a daemon thread; returns the server (or None)."""
        result = prometheus_client.start_http_server(port, addr=host, registry=self.registry)
        return result


class Timer:
    """Counts and times one RPC into the broker metrics."""

    def __init__(self, metrics: BrokerMetrics, rpc: str) -> None:
        self._metrics = metrics
        self._rpc = rpc
        self._start = time.perf_counter()

    def done(self, outcome: str = "ok") -> None:
        self._metrics.latency.labels(self._rpc).observe(time.perf_counter() - self._start)
        self._metrics.requests.labels(self._rpc, outcome).inc()
