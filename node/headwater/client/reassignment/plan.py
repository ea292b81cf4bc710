"""kafka-reassign-partitions' JSON plans: parse, check against the cluster, write.

The plan file has Kafka's shape, so files carry over between the two tools::

    {"version": 1,
     "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2, 3],
                     "log_dirs": ["any", "any", "any"]}]}

``log_dirs`` is optional; Headwater brokers place a replica in their own log
directory, so only ``"any"`` is accepted there.  Checking happens in two
steps, as in Kafka's tool, and both happen before anything is sent: the
file alone (:func:`parse_plan`: shape, types, empty lists, a partition twice,
a broker twice in one replica list), then against the cluster
(:func:`check_plan`: unknown topic, unknown partition, unknown broker).  A
replica list of another length than today's is allowed: Kafka changes a
partition's replication factor this way.  Errors are Kafka's
(``InvalidReplicaAssignmentError``, ``UnknownTopicOrPartitionError``) with
Kafka's wording where Kafka has one.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any, NamedTuple

from headwater import errors
from headwater.values import TopicPartition

PLAN_VERSION = 1


class PartitionTarget(NamedTuple):
    """One entry of a plan: where ``topic``-``partition``'s replicas should be."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    log_dirs: tuple[str, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ReassignmentPlan(NamedTuple):
    """A parsed plan; invariant: no partition twice, no broker twice in one list."""

    partitions: tuple[PartitionTarget, ...]
    version: int = PLAN_VERSION

    @property
    def targets(self) -> dict[TopicPartition, tuple[int, ...]]:
        return {p.tp: p.replicas for p in self.partitions}

    @property
    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    @classmethod
    def of(cls, targets: Mapping[TopicPartition, Iterable[int]]) -> ReassignmentPlan:
        """A plan from ``{tp: replicas}``, in topic then partition order."""
        return cls(
            tuple(
                PartitionTarget(tp.topic, tp.partition, tuple(targets[tp]))
                for tp in sorted(targets, key=lambda t: (t.topic, t.partition))
            )
        )

    def to_json(self) -> dict[str, Any]:
        """Kafka's JSON (``log_dirs`` "any" for every replica)."""
        return {
            "version": self.version,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "replicas": list(p.replicas),
                    "log_dirs": list(p.log_dirs) or ["any"] * len(p.replicas),
                }
                for p in self.partitions
            ],
        }

    def dumps(self) -> str:
        """One line, as Kafka prints plans (keys in Kafka's order)."""
        return json.dumps(self.to_json(), separators=(",", ":"))


def _bad(message: str) -> errors.InvalidReplicaAssignmentError:
    return errors.InvalidReplicaAssignmentError(message)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(f"{what} must be an integer, got {json.dumps(value)}")
    return value


def _entry(raw: Any, index: int) -> PartitionTarget:
    where = f"partitions[{index}]"
    if not isinstance(raw, dict):
        raise _bad(f"{where} must be an object with topic, partition and replicas")
    unknown = sorted(set(raw) - {"topic", "partition", "replicas", "log_dirs"})
    if unknown:
        raise _bad(f"{where} has unknown field(s): {', '.join(unknown)}")
    for key in ("topic", "partition", "replicas"):
        if key not in raw:
            raise _bad(f"{where} is missing {key!r}")
    topic = raw["topic"]
    if not isinstance(topic, str) or not topic:
        raise _bad(f"{where}.topic must be a non-empty string")
    partition = _int(raw["partition"], f"{where}.partition")
    if partition < 0:
        raise _bad(f"{where}.partition must be >= 0, got {partition}")
    replicas_raw = raw["replicas"]
    if not isinstance(replicas_raw, list):
        raise _bad(f"{where}.replicas must be a list of broker ids")
    replicas = tuple(_int(b, f"{where}.replicas") for b in replicas_raw)
    tp = TopicPartition(topic, partition)
    if not replicas:
        raise _bad(f"Partition {tp} has an empty replica list")
    if any(b < 0 for b in replicas):
        raise _bad(f"Partition {tp} has a negative broker id: {_ids(replicas)}")
    if len(set(replicas)) != len(replicas):
        raise _bad(
            "Partition replica lists may not contain duplicate entries: "
            f"{tp} contains {_ids(replicas)}"
        )
    log_dirs: tuple[str, ...] = ()
    if "log_dirs" in raw:
        dirs = raw["log_dirs"]
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
            raise _bad(f"{where}.log_dirs must be a list of strings")
        if len(dirs) != len(replicas):
            raise _bad(f"Length of replicas and log directories must be equal for {tp}")
        if any(d != "any" for d in dirs):
            raise _bad(f'{tp}: only "any" log directories are supported (brokers choose their own)')
        log_dirs = tuple(dirs)
    return PartitionTarget(topic, partition, replicas, log_dirs)


def parse_plan(text: str) -> ReassignmentPlan:
    """Parse and check a plan file's text on its own (no cluster needed)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(f"the plan is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise _bad('the plan must be a JSON object {"version": 1, "partitions": [...]}')
    version = raw.get("version", PLAN_VERSION)
    if version != PLAN_VERSION:
        raise _bad(f"Not supported version field value {json.dumps(version)} (expected 1)")
    if "partitions" not in raw:
        raise _bad('the plan has no "partitions" list')
    if not isinstance(raw["partitions"], list):
        raise _bad('"partitions" must be a list')
    if not raw["partitions"]:
        raise _bad("Partition reassignment list cannot be empty")
    entries = tuple(_entry(p, i) for i, p in enumerate(raw["partitions"]))
    seen: set[TopicPartition] = set()
    dups = []
    for e in entries:
        if e.tp in seen:
            dups.append(str(e.tp))
        seen.add(e.tp)
    if dups:
        raise _bad(f"Partition reassignment contains duplicate topic partitions: {', '.join(dups)}")
    return ReassignmentPlan(entries, version)


def check_plan(
    plan: ReassignmentPlan,
    *,
    partition_counts: Mapping[str, int],
    broker_ids: Collection[int],
) -> None:
    """Check a parsed plan against the cluster: every topic, partition and broker must exist.

    ``partition_counts`` maps each existing topic to its number of partitions;
    ``broker_ids`` are the live brokers.  Raises the first problem found,
    naming all of its kind, so a fix-and-retry loop is short.
    """
    missing = sorted({p.topic for p in plan.partitions if p.topic not in partition_counts})
    if missing:
        raise errors.UnknownTopicOrPartitionError(
            f"Topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} not found"
        )
    beyond = [
        f"{p.tp} (topic {p.topic} has {partition_counts[p.topic]} partitions)"
        for p in plan.partitions
        if p.partition >= partition_counts[p.topic]
    ]
    if beyond:
        raise errors.UnknownTopicOrPartitionError(f"Unable to find partition: {', '.join(beyond)}")
    unknown = sorted({b for p in plan.partitions for b in p.replicas} - set(broker_ids))
    if unknown:
        raise errors.BrokerNotAvailableError(
            f"Unknown broker id(s): {_ids(tuple(unknown))} (live brokers: "
            f"{_ids(tuple(sorted(broker_ids)))})"
        )


class TopicsToMove(NamedTuple):
    topics: tuple[str, ...]


def parse_topics_to_move(text: str) -> TopicsToMove:
    """Kafka's ``--topics-to-move-json-file``: ``{"version":1,"topics":[{"topic":"a"}]}``."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(f"the topics file is not valid JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("topics"), list):
        raise _bad('the topics file must be {"version": 1, "topics": [{"topic": "name"}, ...]}')
    names = []
    for i, t in enumerate(raw["topics"]):
        if not isinstance(t, dict) or not isinstance(t.get("topic"), str) or not t["topic"]:
            raise _bad(f'topics[{i}] must be {{"topic": "name"}}')
        names.append(t["topic"])
    if not names:
        raise _bad("List of topics to reassign contains no topics")
    if len(set(names)) != len(names):
        raise _bad(f"List of topics to reassign contains duplicate entries: {', '.join(names)}")
    return TopicsToMove(tuple(names))


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids))
