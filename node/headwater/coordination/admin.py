"""Topic administration that any broker runs for the Admin RPCs (Kafka's ``AdminZkClient``).

The broker that receives CreateTopics / DeleteTopics / CreatePartitions /
AlterConfigs validates the request and writes ZooKeeper; the controller sees
the new znodes through its watches and does the rest (leaders, LeaderAndIsr).
Every bad input raises a :mod:`headwater.errors` exception and writes nothing.

Thread safety: methods are synchronous ZooKeeper calls, safe from any thread
except kazoo's callback thread.  Randomness (replica placement) is passed in.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable, Mapping, Sequence

from headwater import errors
from headwater.coordination import assignment as placement
from headwater.coordination import model, names
from headwater.coordination.model import TopicAssignment
from headwater.coordination.settings import CoordinationSettings
from headwater.coordination.store import ZkStore

ConfigValidator = Callable[[Mapping[str, str]], object]
"""Raises InvalidConfigError on unknown keys or bad values (e.g. LogConfig.from_properties)."""


@dataclasses.dataclass(frozen=True)
class NewTopic:
    """A CreateTopics entry; -1 means ``num.partitions`` / ``default.replication.factor``."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error: errors.HeadwaterError | None
    num_partitions: int = -1
    replication_factor: int = -1
    topic_id: str = ""


class TopicAdmin:
    def __init__(
        self,
        store: ZkStore,
        settings: CoordinationSettings,
        *,
        rng: random.Random,
        config_validator: ConfigValidator | None = None,
    ) -> None:
        self._store = store
        self._settings = settings
        self._rng = rng
        self._rng_lock = threading.Lock()
        self._validate_config = config_validator

    def _check_config(self, config: Mapping[str, str]) -> None:
        if self._validate_config is not None:
            try:
                self._validate_config(config)
            except errors.HeadwaterError:
                raise
            except (ValueError, KeyError, TypeError) as e:
                raise errors.InvalidConfigError(str(e)) from e

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """Create each topic independently; errors are reported per topic, as in Kafka."""
        results: list[CreateTopicResult] = []
        seen: set[str] = set()
        for t in topics:
            if t.name in seen:
                results.append(
                    CreateTopicResult(
                        t.name, errors.InvalidRequestError(f"Duplicate topic name '{t.name}'")
                    )
                )
                continue
            seen.add(t.name)
            try:
                a = self.create_topic(t, validate_only=validate_only)
            except errors.HeadwaterError as e:
                results.append(CreateTopicResult(t.name, e))
            else:
                results.append(
                    CreateTopicResult(
                        t.name, None, a.num_partitions, a.replication_factor, a.topic_id
                    )
                )
        return results

    def create_topic(self, topic: NewTopic, *, validate_only: bool = False) -> TopicAssignment:
        """Validate and (unless ``validate_only``) write one topic; return its assignment."""
        names.validate_topic_name(topic.name)
        if topic.name in self._store.get_topics_to_delete():
            raise errors.TopicAlreadyExistsError(f"Topic '{topic.name}' is marked for deletion.")
        existing = self._store.get_topics()
        if topic.name in existing:
            raise errors.TopicAlreadyExistsError(f"Topic '{topic.name}' already exists.")
        names.check_no_collision(topic.name, existing)
        brokers = list(self._store.get_brokers().values())
        if topic.assignments:
            if topic.num_partitions != -1 or topic.replication_factor != -1:
                raise errors.InvalidRequestError(
                    "Both numPartitions or replicationFactor and replicasAssignments were set."
                    " Both cannot be used at the same time."
                )
            partitions = placement.validate_manual_assignment(
                topic.assignments, live_broker_ids=[b.broker_id for b in brokers]
            )
        else:
            n = (
                topic.num_partitions
                if topic.num_partitions != -1
                else self._settings.num_partitions
            )
            rf = (
                topic.replication_factor
                if topic.replication_factor != -1
                else self._settings.default_replication_factor
            )
            with self._rng_lock:
                partitions = placement.assign_replicas(
                    brokers, num_partitions=n, replication_factor=rf, rng=self._rng
                )
        self._check_config(topic.configs)
        if validate_only:
            return TopicAssignment(topic.name, partitions)
        tid = model.new_topic_id()  # one id per creation: a re-created topic gets a new one
        self._store.create_topic(topic.name, partitions, topic.configs, topic_id=tid)
        return TopicAssignment(topic.name, partitions, topic_id=tid)

    def delete_topic(self, name: str) -> None:
        if not self._settings.delete_topic_enable:
            raise errors.PolicyViolationError("Topic deletion is disabled (delete.topic.enable)")
        self._store.mark_topic_for_deletion(name)

    def create_partitions(
        self,
        name: str,
        new_total: int,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicAssignment:
        """Add partitions to ``name`` so it has ``new_total``; refuse anything but an increase."""
        for _ in range(3):
            current = self._store.get_assignment_versioned(name)
            if current is None or name in self._store.get_topics_to_delete():
                raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            topic, version = current
            if topic.reassignments:
                raise errors.ReassignmentInProgressError(
                    f"A partition reassignment is in progress for topic '{name}'"
                    f" (partitions {sorted(topic.reassignments)})."
                )
            have = topic.num_partitions
            if new_total <= have:
                raise errors.InvalidPartitionsError(
                    f"Topic currently has {have} partitions, {new_total} would not be an increase."
                )
            brokers = sorted(self._store.get_brokers().values(), key=lambda b: b.broker_id)
            if assignments:
                added = placement.validate_manual_assignment(
                    assignments,
                    live_broker_ids=[b.broker_id for b in brokers],
                    start_partition_id=have,
                )
                if len(added) != new_total - have:
                    raise errors.InvalidReplicaAssignmentError(
                        f"Increasing the number of partitions by {new_total - have} but"
                        f" {len(added)} assignments provided."
                    )
            else:
                first = topic.partitions[0][0] if topic.partitions else -1
                start = next((i for i, b in enumerate(brokers) if b.broker_id >= first), 0)
                with self._rng_lock:
                    added = placement.assign_replicas(
                        brokers,
                        num_partitions=new_total - have,
                        replication_factor=topic.replication_factor,
                        rng=self._rng,
                        start_partition_id=have,
                        fixed_start_index=start,
                    )
            merged = {**topic.partitions, **added}
            if validate_only or self._store.set_assignment(
                name, merged, expected_version=version, topic_id=topic.topic_id
            ):
                return TopicAssignment(name, merged, topic_id=topic.topic_id)
        raise errors.RequestTimedOutError(f"Topic '{name}' kept changing; try again")

    def alter_topic_config(
        self,
        name: str,
        *,
        set_: Mapping[str, str],
        delete: Sequence[str] = (),
        validate_only: bool = False,
    ) -> dict[str, str]:
        """Kafka's IncrementalAlterConfigs: set and delete keys; return the new overrides
        (checked in full, and with ``validate_only`` not written)."""
        if name not in self._store.get_topics():
            raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        config = self._store.get_topic_config(name)
        config.update(set_)
        for key in delete:
            config.pop(key, None)
        self._check_config(config)
        if not validate_only:
            self._store.set_topic_config(name, config)
        return config
