"""The roll engine's view of the cluster, read through :class:`headwater.Admin`.

Brokers' software and protocol versions travel in DescribeCluster's
``BrokerInfo`` (``version``, ``protocol_version``), which
:meth:`headwater.Admin.describe_cluster` does not surface yet, so
:class:`AdminProbe` sends that one request itself through the Admin's
retrying call path.  Everything else is public Admin API.
"""

from __future__ import annotations

from headwater import errors
from headwater.client import Admin
from headwater.v1 import admin_pb2

from headwater_operator.roll import BrokerVersion, ClusterState, PartitionState


class AdminProbe:
    """:class:`headwater_operator.roll.ClusterProbe` over an Admin client.

    Metadata comes from whichever broker answers, and a broker that has just
    restarted can answer before the controller has told it about any topic.
    Partitions missing from the answer would look "in sync" vacuously, so the
    probe remembers every topic it has seen and refuses (a retriable error,
    which the roll treats as "cannot check yet") an answer that lacks one that
    still exists.
    """

    def __init__(self, admin: Admin) -> None:
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
        # Admin.describe_cluster() drops BrokerInfo.version/protocol_version.
        resp = self.admin._admin_call("DescribeCluster", admin_pb2.DescribeClusterRequest())
        return int(resp.controller_id), {
            int(b.id): BrokerVersion(str(b.version), str(b.protocol_version)) for b in resp.brokers
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
