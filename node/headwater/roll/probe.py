"""The roll engine's view of the cluster, read through :class:`headwater.Admin`.

Brokers' software and protocol versions come from
:meth:`headwater.Admin.describe_cluster` (each broker's ``version`` and
``protocol_version``); partitions, their ISR and ``min.insync.replicas`` from
the topic and config calls.  Only public Admin API is used.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from headwater import errors
from headwater.client.admin.values import ClusterDescription, ConfigEntry, TopicDescription
from headwater.roll.engine import BrokerVersion, ClusterState, PartitionState


class ProbeAdmin(Protocol):
    """The read-only part of :class:`headwater.Admin` the probe uses."""

    def describe_cluster(self) -> ClusterDescription: ...
    def describe_topics(
        self, names: Iterable[str] | None = None
    ) -> dict[str, TopicDescription]: ...
    def describe_configs(
        self, topics: Iterable[str] = (), *, brokers: Iterable[int] = ()
    ) -> dict[str, dict[str, ConfigEntry]]: ...


class AdminProbe:
    """:class:`headwater.roll.engine.ClusterProbe` over an Admin client.

    Metadata comes from whichever broker answers, and a broker that has just
    restarted can answer before the controller has told it about any topic.
    Partitions missing from the answer would look "in sync" vacuously, so the
    probe remembers every topic it has seen and refuses (a retriable error,
    which the roll treats as "cannot check yet") an answer that lacks one that
    still exists.
    """

    def __init__(self, admin: ProbeAdmin) -> None:
        self.admin = admin
        self.known_topics: set[str] | None = None

    def _check_complete(self, names: set[str]) -> None:
        if self.known_topics is None:
            self.known_topics = set(names)
            return
        for missing in sorted(self.known_topics - names):
            try:
                self.admin.describe_configs([missing])
            except errors.UnknownTopicOrPartitionError:
                self.known_topics.discard(missing)  # really deleted
                continue
            raise errors.LeaderNotAvailableError(
                f"metadata lacks topic {missing!r}: a broker is still loading its metadata"
            )
        self.known_topics |= names

    def brokers(self) -> tuple[int, dict[int, BrokerVersion]]:
        cluster = self.admin.describe_cluster()
        return cluster.controller_id, {
            b.broker_id: BrokerVersion(b.version, b.protocol_version) for b in cluster.brokers
        }

    def state(self) -> ClusterState:
        controller_id, brokers = self.brokers()
        described = self.admin.describe_topics(None)
        self._check_complete(set(described))
        partitions = [
            PartitionState(p.topic, p.partition, tuple(p.replicas), tuple(p.isr))
            for desc in described.values()
            for p in desc.partitions
        ]
        min_isr: dict[str, int] = {}
        if described:
            configs = self.admin.describe_configs(list(described))
            for topic, entries in configs.items():
                entry = entries.get("min.insync.replicas")
                if entry is not None and entry.value.strip().isdigit():
                    min_isr[topic] = int(entry.value)
        return ClusterState(controller_id, brokers, partitions, min_isr)
