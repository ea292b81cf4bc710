"""The Topic reconciler: one Topic resource in, the cluster changed and a status out.

This is the part of a Topic handler that talks to the cluster (through the
:class:`TopicAdmin` seam, implemented over :class:`headwater.Admin` by
:class:`AdminTopics`) but knows nothing of kopf: it takes the resource as a
plain mapping and returns an :class:`Outcome` — the status to write and the
Kubernetes Events to post — which the kopf layer (:mod:`handlers`) applies.
Tests drive it with a real cluster and keep the Kubernetes side in memory.

Order matters for "a refusal changes nothing": the spec is parsed, conflicts
and unsupported changes are refused by :func:`topics.plan`, then every action
is validated by the broker (``validate_only``) before the first one is
applied.  Only a broker failing between validation and application can leave
a change half done, and the next resync finishes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from headwater import errors
from headwater.client import Admin, NewTopic

from headwater_operator import conditions, topics
from headwater_operator.topics import Action, ActualTopic, Claim, Reason, Refusal

READY = "Ready"


Event = conditions.Event
Outcome = conditions.Outcome[Action, Refusal]


class TopicResource(NamedTuple):
    """The parts of a Topic the reconciler reads."""

    namespace: str
    name: str
    created: str
    generation: int | None
    spec: Mapping[str, Any]
    status: Mapping[str, Any]

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> TopicResource:
        meta = body.get("metadata") or {}
        return cls(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            created=str(meta.get("creationTimestamp") or ""),
            generation=meta.get("generation"),
            spec=body.get("spec") or {},
            status=body.get("status") or {},
        )

    @property
    def claim(self) -> Claim:
        return Claim(self.created, self.namespace, self.name)

    @property
    def topic_name(self) -> str:
        """The topic this resource names (or managed, once it has a status)."""
        managed = self.status.get("topicName")
        return str(managed or self.spec.get("topicName") or self.name)


class TopicAdmin(Protocol):
    """The cluster side of reconciling; raises :class:`headwater.errors.HeadwaterError`."""

    def describe(self, name: str) -> ActualTopic | None: ...
    def validate(self, action: Action) -> None: ...
    def apply(self, action: Action) -> None: ...
    def delete(self, name: str) -> bool: ...


class AdminTopics:
    """:class:`TopicAdmin` over a :class:`headwater.Admin` (thread-safe, as Admin is)."""

    def __init__(
        self,
        admin: Admin,
        *,
        metadata_attempts: int = 50,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.admin = admin
        self.metadata_attempts = metadata_attempts
        self.sleep = sleep

    def describe(self, name: str) -> ActualTopic | None:
        # Configs come from the controller's store, so they say whether the topic
        # exists; brokers' metadata can lag a just-created topic by a moment.
        try:
            configs = self.admin.describe_configs([name])[name]
        except (errors.UnknownTopicOrPartitionError, KeyError):
            return None
        for attempt in range(self.metadata_attempts):
            try:
                desc = self.admin.describe_topics([name])[name]
                if desc.partitions:
                    break
            except (errors.UnknownTopicOrPartitionError, KeyError):
                if attempt == self.metadata_attempts - 1:
                    raise errors.LeaderNotAvailableError(
                        f"topic {name!r} exists but no broker has its metadata yet"
                    ) from None
            self.sleep(0.1)
        return ActualTopic(
            name=name,
            partitions=len(desc.partitions),
            replicas=desc.replication_factor,
            config={k: e.value for k, e in configs.items()},
            dynamic_config={
                k: e.value for k, e in configs.items() if e.source == "DYNAMIC_TOPIC_CONFIG"
            },
        )

    def _run(self, action: Action, *, validate_only: bool) -> None:
        if isinstance(action, topics.CreateTopic):
            new = NewTopic(action.name, action.partitions, action.replicas, action.config)
            self.admin.create_topics([new], validate_only=validate_only)
        elif isinstance(action, topics.CreatePartitions):
            self.admin.create_partitions(
                {action.name: action.new_total}, validate_only=validate_only
            )
            if not validate_only:
                self._await_partitions(action.name, action.new_total)
        else:
            self.admin.alter_topic_configs(
                action.name,
                set_configs=action.set_configs,
                delete_configs=action.delete_configs,
                validate_only=validate_only,
            )

    def _await_partitions(self, name: str, total: int) -> None:
        """Wait until the brokers' metadata shows ``total`` partitions of ``name``.

        The broker that grew the topic answers once it knows the new leaders, but the
        broker the next metadata request reaches can lag it by a moment; a describe then
        would see the old count and the next plan would grow the topic again, which the
        brokers refuse (INVALID_PARTITIONS).
        """
        for _ in range(self.metadata_attempts):
            try:
                desc = self.admin.describe_topics([name])[name]
                if len(desc.partitions) >= total:
                    return
            except (errors.UnknownTopicOrPartitionError, KeyError):
                pass
            self.sleep(0.1)
        raise errors.LeaderNotAvailableError(
            f"topic {name!r} was grown to {total} partitions but no broker's metadata shows it yet"
        )

    def validate(self, action: Action) -> None:
        self._run(action, validate_only=True)

    def apply(self, action: Action) -> None:
        self._run(action, validate_only=False)

    def delete(self, name: str) -> bool:
        try:
            self.admin.delete_topics([name])
        except errors.UnknownTopicOrPartitionError:
            return False
        return True


def _broker_refusal(exc: errors.HeadwaterError) -> Refusal:
    if isinstance(exc, errors.InvalidConfigError):
        return Refusal(Reason.INVALID_CONFIG, exc.message)
    return Refusal(Reason.BROKER_ERROR, str(exc))


class TopicReconciler:
    """Reconciles Topics against one cluster; one reconcile per topic name at a time.

    Handlers of different resources and the resync timer may call in from
    several threads; a lock per topic name keeps two reconciles of one topic
    from interleaving their describe/apply steps.
    """

    def __init__(self, admin: TopicAdmin) -> None:
        self.admin = admin
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, topic: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(topic, threading.Lock())

    def reconcile(self, resource: TopicResource, *, claims: Sequence[Claim], now: str) -> Outcome:
        """Bring the topic in line with ``resource``; ``claims``: every Topic naming it."""
        desired = topics.parse_spec(resource.name, resource.spec)
        if isinstance(desired, Refusal):
            return self._refused(resource, desired, None, now=now)
        refusal = topics.conflict(resource.claim, claims)
        if refusal is not None:
            return self._refused(resource, refusal, None, now=now)
        with self._lock(desired.topic_name):
            try:
                actual = self.admin.describe(desired.topic_name)
            except errors.HeadwaterError as exc:
                return self._refused(resource, _broker_refusal(exc), None, now=now, exc=exc)
            managed = resource.status.get("topicName")
            planned = topics.plan(desired, actual, managed_name=managed)
            if isinstance(planned, Refusal):
                return self._refused(resource, planned, actual, now=now)
            try:
                for action in planned:
                    self.admin.validate(action)
            except errors.HeadwaterError as exc:
                return self._refused(resource, _broker_refusal(exc), actual, now=now, exc=exc)
            done: list[Action] = []
            try:
                for action in planned:
                    self.admin.apply(action)
                    done.append(action)
            except errors.HeadwaterError as exc:
                out = self._refused(resource, _broker_refusal(exc), actual, now=now, exc=exc)
                return out._replace(actions=done, events=self._events(done) + out.events)
            partitions, replicas = topics.after(actual, done)
            if partitions is None or replicas is None:
                fresh = self._describe_quietly(desired.topic_name)
                if fresh is not None:
                    partitions, replicas = fresh.partitions, fresh.replicas
        events = self._events(done)
        if actual is not None and not managed:
            events.insert(0, Event("Normal", "Adopted", f"adopted existing topic {actual.name}"))
        message = f"topic {desired.topic_name} is in line with the spec"
        status = self._status(
            resource,
            ready=True,
            reason=Reason.RECONCILED,
            message=message,
            now=now,
            topic_name=desired.topic_name,
            partitions=partitions,
            replicas=replicas,
        )
        return Outcome(status, events, done, None)

    def finalize(self, resource: TopicResource, *, claims: Sequence[Claim]) -> list[Event]:
        """The Topic is being deleted: delete its topic unless another Topic owns it.

        Raises :class:`headwater.errors.HeadwaterError` if the broker fails, so the
        caller keeps the finalizer and retries.
        """
        name = resource.topic_name
        if topics.conflict(resource.claim, claims) is not None:
            msg = f"topic {name} is managed by another Topic and was left in place"
            return [Event("Normal", "TopicLeft", msg)]
        with self._lock(name):
            existed = self.admin.delete(name)
        msg = f"deleted topic {name}" if existed else f"topic {name} was already gone"
        return [Event("Normal", "Deleted", msg)]

    # -- helpers ------------------------------------------------------------------------

    def _describe_quietly(self, name: str) -> ActualTopic | None:
        try:
            return self.admin.describe(name)
        except errors.HeadwaterError:
            return None

    @staticmethod
    def _events(done: Sequence[Action]) -> list[Event]:
        reasons = {
            topics.CreateTopic: "Created",
            topics.CreatePartitions: "PartitionsIncreased",
            topics.AlterConfigs: "ConfigChanged",
        }
        return [Event("Normal", reasons[type(a)], a.describe()) for a in done]

    def _refused(
        self,
        resource: TopicResource,
        refusal: Refusal,
        actual: ActualTopic | None,
        *,
        now: str,
        exc: errors.HeadwaterError | None = None,
    ) -> Outcome:
        old = conditions.find(resource.status.get("conditions"), READY)
        status = self._status(
            resource,
            ready=False,
            reason=refusal.reason,
            message=refusal.message,
            now=now,
            topic_name=resource.status.get("topicName"),
            partitions=actual.partitions if actual else resource.status.get("partitions"),
            replicas=actual.replicas if actual else resource.status.get("replicas"),
        )
        new = conditions.find(status["conditions"], READY)
        events = (
            [] if conditions.same(old, new) else [Event("Warning", refusal.reason, refusal.message)]
        )
        retriable = exc is not None and (exc.retriable or isinstance(exc, errors.NetworkError))
        return Outcome(status, events, [], refusal, retriable)

    @staticmethod
    def _status(
        resource: TopicResource,
        *,
        ready: bool,
        reason: str,
        message: str,
        now: str,
        topic_name: str | None,
        partitions: int | None,
        replicas: int | None,
    ) -> dict[str, Any]:
        status: dict[str, Any] = {
            "conditions": conditions.set_condition(
                resource.status.get("conditions"),
                type_=READY,
                status=ready,
                reason=str(reason),
                message=message,
                now=now,
            )
        }
        if resource.generation is not None:
            status["observedGeneration"] = resource.generation
        for key, value in (
            ("topicName", topic_name),
            ("partitions", partitions),
            ("replicas", replicas),
        ):
            if value is not None:
                status[key] = value
        return status
