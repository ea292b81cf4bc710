"""Topic resources: from a Topic's spec and the topic the cluster has, to what to do.

This module is pure: no Kubernetes, no Admin client, no clock.  A reconcile
is *desired* (:class:`TopicSpec`, parsed from the resource) against *actual*
(:class:`ActualTopic`, read through the Admin API) giving either a list of
actions (create, add partitions, alter configs) or a :class:`Refusal` naming
why nothing may be done.  Refusals are decided before any action runs, so a
refused spec changes nothing — the contract users rely on when they compare
us with Strimzi's Topic Operator:

* partitions never shrink, the replication factor does not change (until
  reassignment exists) and ``topicName`` never changes: ``NotSupported``;
* two Topics naming one topic: the oldest (creation time, then namespace and
  name) owns it, the others get ``ResourceConflict``;
* unknown or invalid configs (``InvalidConfig``) and anything else the broker
  refuses (``BrokerError``) are found by the I/O layer, which asks the broker
  to validate first (see :mod:`headwater_operator.topic_reconciler`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple


class Reason(enum.StrEnum):
    """``reason`` of the Topic's Ready condition."""

    RECONCILED = "Reconciled"
    NOT_SUPPORTED = "NotSupported"
    INVALID_CONFIG = "InvalidConfig"
    RESOURCE_CONFLICT = "ResourceConflict"
    BROKER_ERROR = "BrokerError"


class TopicSpec(NamedTuple):
    """The desired topic; ``None`` partitions/replicas mean the cluster's default."""

    topic_name: str
    partitions: int | None
    replicas: int | None
    config: Mapping[str, str]


class ActualTopic(NamedTuple):
    """The topic as the cluster has it."""

    name: str
    partitions: int
    replicas: int
    config: Mapping[str, str]
    """Every config's effective value."""
    dynamic_config: Mapping[str, str]
    """The configs set on the topic itself (source DYNAMIC_TOPIC_CONFIG)."""


class Refusal(NamedTuple):
    reason: Reason
    message: str


class CreateTopic(NamedTuple):
    name: str
    partitions: int
    replicas: int
    config: Mapping[str, str]

    def describe(self) -> str:
        parts = "default" if self.partitions < 0 else str(self.partitions)
        rf = "default" if self.replicas < 0 else str(self.replicas)
        return f"created topic {self.name} (partitions: {parts}, replicas: {rf})"


class CreatePartitions(NamedTuple):
    name: str
    old_total: int
    new_total: int

    def describe(self) -> str:
        return f"increased partitions of {self.name} from {self.old_total} to {self.new_total}"


class AlterConfigs(NamedTuple):
    name: str
    set_configs: Mapping[str, str]
    delete_configs: tuple[str, ...]

    def describe(self) -> str:
        changes = [f"{k}={v}" for k, v in sorted(self.set_configs.items())]
        changes += [f"{k} reset to default" for k in self.delete_configs]
        return f"changed configs of {self.name}: {', '.join(changes)}"


Action = CreateTopic | CreatePartitions | AlterConfigs


class Claim(NamedTuple):
    """One Topic resource naming a topic, as the operator's index holds it."""

    created: str
    """metadata.creationTimestamp (RFC 3339, so it sorts as text)."""
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def config_value(key: str, value: Any) -> str:
    """A spec.config value as the broker takes it: a string (integers are allowed)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    raise ValueError(f"config {key!r} must be a string or an integer, not {type(value).__name__}")


def parse_spec(name: str, spec: Mapping[str, Any]) -> TopicSpec | Refusal:
    """The desired topic of a Topic named ``name``; a Refusal for values no schema caught."""
    topic_name = spec.get("topicName") or name
    config: dict[str, str] = {}
    try:
        for key, value in (spec.get("config") or {}).items():
            config[str(key)] = config_value(str(key), value)
    except ValueError as exc:
        return Refusal(Reason.INVALID_CONFIG, str(exc))
    partitions = spec.get("partitions")
    replicas = spec.get("replicas")
    for field, value in (("partitions", partitions), ("replicas", replicas)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or value < 1
        ):
            return Refusal(Reason.NOT_SUPPORTED, f"spec.{field} must be an integer >= 1")
    return TopicSpec(str(topic_name), partitions, replicas, config)


def owner(claims: Iterable[Claim]) -> Claim | None:
    """The Topic that owns a topic name: the oldest (then by namespace and name)."""
    return min(claims, default=None)


def conflict(me: Claim, claims: Iterable[Claim]) -> Refusal | None:
    """ResourceConflict unless ``me`` is the oldest Topic naming its topic."""
    first = owner([*claims, me])
    if first is None or first[1:] == me[1:]:
        return None
    return Refusal(
        Reason.RESOURCE_CONFLICT,
        f"topic is already managed by Topic {first}, the oldest resource naming it",
    )


def plan(
    desired: TopicSpec, actual: ActualTopic | None, *, managed_name: str | None
) -> list[Action] | Refusal:
    """What to do to bring ``actual`` to ``desired``, or why nothing may be done.

    ``managed_name`` is the topic this resource managed so far (status.topicName),
    so a changed ``topicName`` is caught even if the API server's rule is bypassed.
    """
    if managed_name and managed_name != desired.topic_name:
        return Refusal(
            Reason.NOT_SUPPORTED,
            f"topicName cannot change from {managed_name!r} to {desired.topic_name!r}; "
            "create a new Topic instead",
        )
    if actual is None:
        return [
            CreateTopic(
                desired.topic_name,
                desired.partitions if desired.partitions is not None else -1,
                desired.replicas if desired.replicas is not None else -1,
                dict(desired.config),
            )
        ]
    if desired.partitions is not None and desired.partitions < actual.partitions:
        return Refusal(
            Reason.NOT_SUPPORTED,
            f"partitions cannot decrease from {actual.partitions} to {desired.partitions}",
        )
    if desired.replicas is not None and desired.replicas != actual.replicas:
        return Refusal(
            Reason.NOT_SUPPORTED,
            f"replication factor cannot change from {actual.replicas} to {desired.replicas} "
            "(reassignment is not supported)",
        )
    actions: list[Action] = []
    if desired.partitions is not None and desired.partitions > actual.partitions:
        actions.append(CreatePartitions(actual.name, actual.partitions, desired.partitions))
    to_set = {k: v for k, v in desired.config.items() if actual.dynamic_config.get(k) != v}
    to_delete = tuple(sorted(k for k in actual.dynamic_config if k not in desired.config))
    if to_set or to_delete:
        actions.append(AlterConfigs(actual.name, to_set, to_delete))
    return actions


def after(actual: ActualTopic | None, actions: Sequence[Action]) -> tuple[int | None, int | None]:
    """(partitions, replicas) once ``actions`` succeeded; None where the broker chose."""
    partitions = actual.partitions if actual else None
    replicas = actual.replicas if actual else None
    for action in actions:
        if isinstance(action, CreateTopic):
            partitions = action.partitions if action.partitions > 0 else None
            replicas = action.replicas if action.replicas > 0 else None
        elif isinstance(action, CreatePartitions):
            partitions = action.new_total
    return partitions, replicas
