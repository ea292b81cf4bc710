"""Topic-level log configuration with Kafka's names, defaults and checks.

A user coming from Kafka sets ``retention.ms`` or ``segment.bytes`` on a topic
and expects the same meaning here, so :class:`LogConfig` keeps Kafka's keys and
defaults.  Python code reads typed fields with the unit in the name
(``retention_ms``); :meth:`LogConfig.from_properties` is the one place where the
string form (a CreateTopics request, ``/config/topics/<topic>`` in ZooKeeper) is
parsed and checked, raising :class:`~headwater.errors.InvalidConfigError` that
names the offending key.  :data:`TOPIC_CONFIG_KEYS` is the set of keys accepted
on a topic; other layers validate CreateTopics/AlterConfigs requests with it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from headwater.errors import InvalidConfigError

__all__ = [
    "CLEANUP_POLICIES",
    "DEFAULT_LOG_CONFIG",
    "TIMESTAMP_TYPES",
    "TOPIC_CONFIG_KEYS",
    "LogConfig",
]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

CLEANUP_POLICIES = frozenset({"delete", "compact", "compact,delete"})
"""Accepted ``cleanup.policy`` values (``delete,compact`` is normalised to ``compact,delete``)."""
TIMESTAMP_TYPES = frozenset({"CreateTime", "LogAppendTime"})
"""Accepted ``message.timestamp.type`` values."""


@dataclasses.dataclass(frozen=True)
class LogConfig:
    """The per-topic settings a :class:`~headwater.storage.log.Log` obeys.

    Each field carries the Kafka topic key it comes from in ``metadata["key"]``.
    Instances are immutable; change a topic's config by building a new one and
    handing it to ``Log.update_config``.
    """

    segment_bytes: int = dataclasses.field(default=1 << 30, metadata={"key": "segment.bytes"})
    """Roll the active segment before it would exceed this size."""
    segment_ms: int = dataclasses.field(
        default=7 * 24 * 3600 * 1000, metadata={"key": "segment.ms"}
    )
    """Roll the active segment once its first batch is this old."""
    segment_index_bytes: int = dataclasses.field(
        default=10 * 1024 * 1024, metadata={"key": "segment.index.bytes"}
    )
    """Maximum size of each offset/time index file; a full index rolls the segment."""
    index_interval_bytes: int = dataclasses.field(
        default=4096, metadata={"key": "index.interval.bytes"}
    )
    """Add an offset/time index entry after at least this many log bytes."""
    retention_ms: int = dataclasses.field(
        default=7 * 24 * 3600 * 1000, metadata={"key": "retention.ms"}
    )
    """Delete a closed segment whose newest timestamp is older than this; -1 = keep forever."""
    retention_bytes: int = dataclasses.field(default=-1, metadata={"key": "retention.bytes"})
    """Delete the oldest closed segments while the partition is larger; -1 = no limit."""
    max_message_bytes: int = dataclasses.field(
        default=1048588, metadata={"key": "max.message.bytes"}
    )
    """Largest record batch accepted on append (batch header included)."""
    flush_messages: int = dataclasses.field(default=_INT64_MAX, metadata={"key": "flush.messages"})
    """fsync after this many unflushed messages (default: never, rely on replication)."""
    flush_ms: int = dataclasses.field(default=_INT64_MAX, metadata={"key": "flush.ms"})
    """fsync when the last flush is this old (checked by the log manager's scheduler)."""
    cleanup_policy: str = dataclasses.field(default="delete", metadata={"key": "cleanup.policy"})
    """``delete``, ``compact`` or ``compact,delete``; retention runs only with ``delete``."""
    message_timestamp_type: str = dataclasses.field(
        default="CreateTime", metadata={"key": "message.timestamp.type"}
    )
    """``CreateTime`` keeps the producer's timestamps; ``LogAppendTime`` stamps the broker's."""
    min_insync_replicas: int = dataclasses.field(default=1, metadata={"key": "min.insync.replicas"})
    """Smallest ISR that may acknowledge an ``acks=all`` produce (read by replication)."""
    delete_retention_ms: int = dataclasses.field(
        default=24 * 3600 * 1000, metadata={"key": "delete.retention.ms"}
    )
    """How long compaction keeps tombstones (counted from the tombstone's timestamp)."""
    file_delete_delay_ms: int = dataclasses.field(
        default=60000, metadata={"key": "file.delete.delay.ms"}
    )
    """Kafka delays file deletion this long; Headwater deletes under the log lock at once."""
    unclean_leader_election_enable: bool = dataclasses.field(
        default=False, metadata={"key": "unclean.leader.election.enable"}
    )
    """Whether a replica outside the ISR may become leader (read by the controller)."""
    leader_replication_throttled_replicas: str = dataclasses.field(
        default="", metadata={"key": "leader.replication.throttled.replicas"}
    )
    """Replicas throttled on the leader side: ``partition:broker,...`` or ``*`` (Kafka's)."""
    follower_replication_throttled_replicas: str = dataclasses.field(
        default="", metadata={"key": "follower.replication.throttled.replicas"}
    )
    """Replicas throttled on the follower side: ``partition:broker,...`` or ``*``."""

    @property
    def deletes(self) -> bool:
        """True if time/size retention applies (``cleanup.policy`` contains ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, defaults: LogConfig | None = None
    ) -> LogConfig:
        """Build a config from Kafka-style string properties over ``defaults``.

        Raises InvalidConfigError naming the key for an unknown key or a bad value.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is None:
                raise InvalidConfigError(f"unknown topic config {key!r}")
            name, parse = spec
            try:
                changes[name] = parse(str(raw).strip())
            except (ValueError, TypeError) as exc:
                raise InvalidConfigError(f"invalid value {raw!r} for {key!r}: {exc}") from None
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, str]:
        """The Kafka-style string form of every setting (for DescribeConfigs)."""
        out: dict[str, str] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            out[field.metadata["key"]] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
        return out


def _int(low: int, high: int = _INT64_MAX) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"


def _cleanup_policy(raw: str) -> str:
    parts = sorted({p.strip().lower() for p in raw.split(",") if p.strip()})
    value = ",".join(parts)
    if value not in CLEANUP_POLICIES:
        raise ValueError(f"must be one of {sorted(CLEANUP_POLICIES)}")
    return value


def _throttled_replicas(raw: str) -> str:
    """Kafka's ``ThrottledReplicaListValidator``: ``*``, empty, or ``partition:broker`` pairs."""
    value = raw.strip()
    if value in ("", "*"):
        return value
    pairs = []
    for item in value.split(","):
        parts = item.strip().split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(
                "must be the wildcard (*) or a list of replicas in the form"
                " [PartitionId]:[BrokerId],[PartitionId]:[BrokerId],..."
            )
        pairs.append(f"{int(parts[0])}:{int(parts[1])}")
    return ",".join(pairs)


def _timestamp_type(raw: str) -> str:
    if raw not in TIMESTAMP_TYPES:
        raise ValueError(f"must be one of {sorted(TIMESTAMP_TYPES)}")
    return raw


_SPECS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "segment.bytes": ("segment_bytes", _int(14, _INT32_MAX)),
    "segment.ms": ("segment_ms", _int(1)),
    "segment.index.bytes": ("segment_index_bytes", _int(12, _INT32_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _int(0, _INT32_MAX)),
    "retention.ms": ("retention_ms", _int(-1)),
    "retention.bytes": ("retention_bytes", _int(-1)),
    "max.message.bytes": ("max_message_bytes", _int(0, _INT32_MAX)),
    "flush.messages": ("flush_messages", _int(1)),
    "flush.ms": ("flush_ms", _int(0)),
    "cleanup.policy": ("cleanup_policy", _cleanup_policy),
    "message.timestamp.type": ("message_timestamp_type", _timestamp_type),
    "min.insync.replicas": ("min_insync_replicas", _int(1, _INT32_MAX)),
    "leader.replication.throttled.replicas": (
        "leader_replication_throttled_replicas",
        _throttled_replicas,
    ),
    "follower.replication.throttled.replicas": (
        "follower_replication_throttled_replicas",
        _throttled_replicas,
    ),
    "delete.retention.ms": ("delete_retention_ms", _int(0)),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int(0)),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
}

TOPIC_CONFIG_KEYS: frozenset[str] = frozenset(_SPECS)
"""Every key accepted as a topic-level config (CreateTopics, AlterConfigs)."""

assert {f.metadata["key"] for f in dataclasses.fields(LogConfig)} == TOPIC_CONFIG_KEYS

DEFAULT_LOG_CONFIG = LogConfig()
"""Kafka's defaults."""
