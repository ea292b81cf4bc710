"""Values kept in ZooKeeper, and their JSON codecs (Kafka ZK mode's formats).

Every znode Headwater writes holds JSON in the shape Kafka's ZooKeeper mode
uses (``/brokers/ids/<id>``, ``/brokers/topics/<topic>``, ``.../state``), so
an operator who knows Kafka's layout can read a Headwater ensemble with
``zkCli.sh``.  The codecs are pure functions from values to bytes and back;
the ZooKeeper-facing store (:mod:`headwater.coordination.store`) adds what only
the znode's stat knows: a broker's epoch (its registration's ``czxid``) and a
partition state's ``zk_version``.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from headwater import errors

NO_LEADER = -1
"""Kafka's ``LeaderAndIsr.NoLeader``: the partition is offline."""

INITIAL_LEADER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH = 0

_RESERVED_TOPIC_IDS = (uuid.UUID(int=0), uuid.UUID(int=1))
"""Kafka's ``Uuid.ZERO_UUID`` (no id) and ``METADATA_TOPIC_ID`` (``AAAAAAAAAAAAAAAAAAAAAQ``)."""


def encode_topic_id(tid: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: the 16 bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(tid.bytes).rstrip(b"=").decode("ascii")


def decode_topic_id(text: str) -> uuid.UUID | None:
    """The id ``text`` names (:func:`encode_topic_id`'s form); None for "" or a malformed one."""
    if len(text) != 22:
        return None
    try:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    except (ValueError, TypeError):
        return None


def new_topic_id() -> str:
    """A topic's id, drawn once when the topic is created (Kafka's ``Uuid.randomUuid``).

    Random (version 4), never a reserved id, never starting with ``-`` (Kafka avoids ids
    that would read as a command-line option).
    """
    while True:
        tid = uuid.uuid4()
        text = encode_topic_id(tid)
        if tid not in _RESERVED_TOPIC_IDS and not text.startswith("-"):
            return text


@dataclasses.dataclass(frozen=True)
class ControllerEpochZk:
    """The controller epoch this controller won, and ``/controller_epoch``'s znode version then.

    The znode version fences every write the controller makes (see
    :mod:`headwater.coordination.store`).
    """

    epoch: int
    zk_version: int


@dataclasses.dataclass(frozen=True)
class BrokerRegistration:
    """A live broker as registered under ``/brokers/ids/<id>``.

    ``epoch`` is the registration znode's ``czxid``: it changes every time the
    broker registers again (a restart or a session expiry), which is how the
    controller notices a bounce even when it missed the deletion.

    ``host``/``port`` are where other brokers reach this one (its inter-broker
    listener).  ``endpoints`` are every advertised listener as Kafka writes them
    (``CLIENT://host:9092``), with ``security_protocol_map`` naming each one's
    protocol; both are empty for a broker registered by a version without named
    listeners, which is one ``PLAINTEXT://host:port``.
    """

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    version: str = ""
    protocol_version: str = ""
    epoch: int = -1
    endpoints: tuple[str, ...] = ()
    security_protocol_map: tuple[tuple[str, str], ...] = ()

    @property
    def listeners(self) -> list[str]:
        return list(self.endpoints) or [f"PLAINTEXT://{self.host}:{self.port}"]

    def endpoint_for(self, listener: str) -> tuple[str, int] | None:
        """``(host, port)`` of the named listener, or None when the broker has none.

        A broker without named endpoints answers for any listener (a classic setup).
        """
        if not self.endpoints:
            return (self.host, self.port)
        prefix = f"{listener}://"
        for endpoint in self.endpoints:
            if endpoint.startswith(prefix):
                host, _, port = endpoint[len(prefix) :].rpartition(":")
                return (host, int(port))
        return None


@dataclasses.dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader, leader epoch and in-sync replicas, as in its ``state`` znode.

    ``zk_version`` is the state znode's version when it was read (Kafka's
    "partition epoch"); conditional writes pass it back.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1

    def new_leader(self, leader: int, isr: Sequence[int]) -> LeaderAndIsr:
        """A copy with a new leader and ISR and the leader epoch bumped."""
        return dataclasses.replace(
            self, leader=leader, isr=tuple(isr), leader_epoch=self.leader_epoch + 1
        )

    def with_isr(self, isr: Sequence[int]) -> LeaderAndIsr:
        """A copy with a new ISR (same leader and leader epoch, as Kafka's ISR shrink/expand)."""
        return dataclasses.replace(self, isr=tuple(isr))


@dataclasses.dataclass(frozen=True)
class PartitionState:
    """What the controller tells brokers about one partition."""

    topic: str
    partition: int
    leader_and_isr: LeaderAndIsr
    replicas: tuple[int, ...]
    topic_id: str = ""
    """The topic's id (:func:`encode_topic_id` form); "" from a controller that has none."""

    @property
    def leader(self) -> int:
        return self.leader_and_isr.leader

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclasses.dataclass(frozen=True)
class ReplicaReassignment:
    """A partition's move in progress (KIP-455): the replicas being added and removed.

    Kept beside the replica set in the topic's assignment znode
    (``adding_replicas`` / ``removing_replicas``, Kafka's TopicZNode version 2).
    Invariants: ``adding`` and ``removing`` are disjoint, and while a move is
    in progress the partition's replicas are the union of the target
    (replicas minus ``removing``) and the origin (replicas minus ``adding``).
    """

    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def origin(self, replicas: Sequence[int]) -> tuple[int, ...]:
        """The replica set before the move (Kafka's ``originReplicas``)."""
        return tuple(b for b in replicas if b not in self.adding)

    def target(self, replicas: Sequence[int]) -> tuple[int, ...]:
        """The replica set after the move (Kafka's ``targetReplicas``)."""
        return tuple(b for b in replicas if b not in self.removing)


@dataclasses.dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment: partition -> replicas, preferred leader first.

    ``reassignments`` holds the partitions being moved (absent: not moving).
    ``topic_id`` is the id drawn when the topic was created (:func:`new_topic_id`); ""
    for a topic written before ids existed, until the controller gives it one.
    """

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    reassignments: Mapping[int, ReplicaReassignment] = dataclasses.field(default_factory=dict)
    topic_id: str = ""

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        return len(next(iter(self.partitions.values()))) if self.partitions else 0


def _loads(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise errors.UnknownServerError(f"corrupt {what} znode: {e}") from e
    if not isinstance(value, dict):
        raise errors.UnknownServerError(f"corrupt {what} znode: not a JSON object")
    return value


def _dumps(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def encode_broker(reg: BrokerRegistration) -> bytes:
    return _dumps(
        {
            "version": 5,
            "host": reg.host,
            "port": reg.port,
            "rack": reg.rack,
            "listeners": reg.listeners,
            "endpoints": reg.listeners,
            "listener_security_protocol_map": dict(reg.security_protocol_map)
            or {"PLAINTEXT": "PLAINTEXT"},
            "software_version": reg.version,
            "protocol_version": reg.protocol_version,
            "jmx_port": -1,
        }
    )


def decode_broker(broker_id: int, data: bytes, *, epoch: int) -> BrokerRegistration:
    v = _loads(data, "broker registration")
    host, port = str(v["host"]), int(v["port"])
    endpoints = tuple(str(e) for e in v.get("endpoints") or ())
    protocols = dict(v.get("listener_security_protocol_map") or {})
    protocol_map = tuple(sorted((str(k), str(p)) for k, p in protocols.items()))
    if endpoints == (f"PLAINTEXT://{host}:{port}",) and protocol_map == (
        ("PLAINTEXT", "PLAINTEXT"),
    ):
        endpoints, protocol_map = (), ()  # a classic single-listener broker
    return BrokerRegistration(
        broker_id=broker_id,
        host=host,
        port=port,
        rack=v.get("rack"),
        version=str(v.get("software_version", "")),
        protocol_version=str(v.get("protocol_version", "")),
        epoch=epoch,
        endpoints=endpoints,
        security_protocol_map=protocol_map,
    )


def encode_leader_and_isr(lai: LeaderAndIsr) -> bytes:
    return _dumps(
        {
            "version": 1,
            "leader": lai.leader,
            "leader_epoch": lai.leader_epoch,
            "isr": list(lai.isr),
            "controller_epoch": lai.controller_epoch,
        }
    )


def decode_leader_and_isr(data: bytes, *, zk_version: int) -> LeaderAndIsr:
    v = _loads(data, "partition state")
    return LeaderAndIsr(
        leader=int(v["leader"]),
        leader_epoch=int(v["leader_epoch"]),
        isr=tuple(int(b) for b in v["isr"]),
        controller_epoch=int(v["controller_epoch"]),
        zk_version=zk_version,
    )


def encode_assignment(
    partitions: Mapping[int, Sequence[int]],
    reassignments: Mapping[int, ReplicaReassignment] | None = None,
    *,
    topic_id: str = "",
) -> bytes:
    """Kafka's TopicZNode: only partitions being moved have adding/removing entries.

    Version 3 (Kafka 2.8+) with a ``topic_id``; version 2 without one.
    """
    moving = reassignments or {}
    extra = {"topic_id": topic_id} if topic_id else {}
    return _dumps(
        {
            **extra,
            "version": 3 if topic_id else 2,
            "partitions": {str(p): list(r) for p, r in sorted(partitions.items())},
            "adding_replicas": {
                str(p): list(m.adding) for p, m in sorted(moving.items()) if m.adding
            },
            "removing_replicas": {
                str(p): list(m.removing) for p, m in sorted(moving.items()) if m.removing
            },
        }
    )


def decode_assignment(topic: str, data: bytes) -> TopicAssignment:
    v = _loads(data, "topic assignment")
    parts = v.get("partitions", {})
    adding = {
        int(p): tuple(int(b) for b in r) for p, r in dict(v.get("adding_replicas") or {}).items()
    }
    removing = {
        int(p): tuple(int(b) for b in r) for p, r in dict(v.get("removing_replicas") or {}).items()
    }
    moving = {
        p: ReplicaReassignment(adding.get(p, ()), removing.get(p, ()))
        for p in sorted(set(adding) | set(removing))
        if adding.get(p) or removing.get(p)
    }
    tid = v.get("topic_id")
    return TopicAssignment(
        topic=topic,
        partitions={int(p): tuple(int(b) for b in r) for p, r in sorted(parts.items(), key=_pkey)},
        reassignments=moving,
        topic_id=tid if isinstance(tid, str) and decode_topic_id(tid) is not None else "",
    )


def _pkey(item: tuple[str, Any]) -> int:
    return int(item[0])


def encode_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


def decode_config(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    v = _loads(data, "config")
    return {str(k): str(val) for k, val in dict(v.get("config", {})).items()}


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes) -> int:
    return int(_loads(data, "controller")["brokerid"])


def encode_int(value: int) -> bytes:
    return str(value).encode("ascii")


def decode_int(data: bytes) -> int:
    try:
        return int(data.decode("ascii"))
    except (UnicodeDecodeError, ValueError) as e:
        raise errors.UnknownServerError(f"corrupt integer znode: {data!r}") from e


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data, "cluster id")["id"])


def encode_partitions_list(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _dumps(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_partitions_list(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    v = _loads(data, "partition list")
    return [(str(e["topic"]), int(e["partition"])) for e in v.get("partitions", [])]
