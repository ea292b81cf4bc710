"""The values the admin client takes and returns (Kafka's admin value types).

One module for all of them, so the admin areas (:mod:`.acls`, :mod:`.log_dirs`,
:mod:`.reassignments`, :mod:`.rebalance`, :mod:`.scram`) and
:mod:`.client` share them without importing one another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from headwater import errors
from headwater.client.types import PartitionMetadata, TopicPartition

__all__ = [
    "BrokerDescription",
    "ClusterDescription",
    "ConfigEntry",
    "LogDirDescription",
    "LogDirs",
    "NewTopic",
    "OffsetSpec",
    "PartitionReassignment",
    "ReplicaInfo",
    "ScramCredentialInfo",
    "ScramDeletion",
    "ScramUpsertion",
    "TopicDescription",
    "UserScramCredentialsDescription",
]


class NewTopic(NamedTuple):
    """A topic to create; -1 means the broker's default (num.partitions, ...)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = {}
    replica_assignment: Mapping[int, Sequence[int]] | None = None


class TopicDescription(NamedTuple):
    name: str
    internal: bool
    partitions: tuple[PartitionMetadata, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class ConfigEntry(NamedTuple):
    name: str
    value: str
    read_only: bool = False
    source: str = "SOURCE_UNKNOWN"
    is_sensitive: bool = False
    documentation: str = ""

    @property
    def is_default(self) -> bool:
        return self.source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


class BrokerDescription(NamedTuple):
    """A live broker as DescribeCluster reports it, with the versions it runs.

    ``version`` is the broker's software version and ``protocol_version`` the
    ``inter.broker.protocol.version`` in force on it (rolling upgrades check
    both); either is ``""`` when the broker did not report it.
    """

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    version: str = ""
    protocol_version: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class ClusterDescription(NamedTuple):
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerDescription, ...]


OffsetSpec = int | str
"""``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a timestamp in milliseconds."""


# -- log dirs ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ReplicaInfo:
    """A replica in a log dir (Kafka's ``ReplicaInfo``): its bytes on disk and offset lag."""

    size: int
    offset_lag: int
    is_future: bool = False


@dataclasses.dataclass(frozen=True)
class LogDirDescription:
    """A broker's log dir (Kafka's ``LogDirDescription``); ``error`` None when it is online.

    ``total_bytes`` / ``usable_bytes`` are the dir's file system's (-1: unknown).
    """

    error: errors.HeadwaterError | None
    replica_infos: Mapping[TopicPartition, ReplicaInfo]
    total_bytes: int = -1
    usable_bytes: int = -1


LogDirs = dict[str, LogDirDescription]
"""One broker's log dirs, by path."""


# -- reassignments ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PartitionReassignment:
    """A move in progress: the current replica set and the replicas being added and removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where the partition is going (Kafka's ``targetReplicas``)."""
        return tuple(b for b in self.replicas if b not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """Where it came from (Kafka's ``originReplicas``)."""
        return tuple(b for b in self.replicas if b not in self.adding_replicas)


# -- SCRAM credentials ---------------------------------------------------------


class ScramUpsertion(NamedTuple):
    """Set ``user``'s credential for ``mechanism`` (Kafka's ``UserScramCredentialUpsertion``)."""

    user: str
    mechanism: str
    iterations: int
    password: str

    def __repr__(self) -> str:
        return (
            f"ScramUpsertion({self.user!r}, {self.mechanism!r}, {self.iterations}, "
            "password=<hidden>)"
        )


class ScramDeletion(NamedTuple):
    """Delete ``user``'s credential for ``mechanism`` (``UserScramCredentialDeletion``)."""

    user: str
    mechanism: str


class ScramCredentialInfo(NamedTuple):
    mechanism: str
    iterations: int


class UserScramCredentialsDescription(NamedTuple):
    user: str
    credential_infos: tuple[ScramCredentialInfo, ...]
