"""In-memory stand-ins for the controller's I/O: ZooKeeper (the layout, versions and fencing)
and the per-broker request senders.  They replace I/O only; the logic under test is real."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from headwater import errors
from headwater.coordination.channel import Request
from headwater.coordination.model import (
    BrokerRegistration,
    ControllerEpochZk,
    LeaderAndIsr,
    TopicAssignment,
    new_topic_id,
)

TopicPartition = tuple[str, int]
Watch = Any


class FakeZk:
    """A ControllerStore over dicts, with ZooKeeper's version rules and epoch fencing.

    ``race(tp, state)`` queues a partition leader's ISR write that lands just
    before the controller's next conditional write of ``tp`` (which then loses).
    """

    def __init__(self) -> None:
        self.cluster_id: str | None = "cluster-1"
        self.brokers: dict[int, BrokerRegistration] = {}
        self.controller: int | None = None
        self.controller_epoch = 0
        self.epoch_version = 0
        self.topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self.states: dict[TopicPartition, LeaderAndIsr] = {}
        self.deletions: list[str] = []
        self.isr_notes: dict[str, list[TopicPartition]] = {}
        self.preferred: list[TopicPartition] | None = None
        self.watched: list[str] = []
        self.writes: list[tuple[Any, ...]] = []
        self._races: dict[TopicPartition, list[LeaderAndIsr]] = {}
        self.reassignments: dict[TopicPartition, Any] = {}
        self.topic_ids: dict[str, str] = {}
        """A topic's id; one not here gets one when first read (set "" for a topic
        created before ids)."""

    # -- test controls ---------------------------------------------------------------

    def race(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        self._races.setdefault(tp, []).append(state)

    def put_state(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
        """A write by someone else (a partition leader): bumps the znode version."""
        old = self.states.get(tp)
        version = 0 if old is None else old.zk_version + 1
        self.states[tp] = dataclasses.replace(state, zk_version=version)
        return self.states[tp]

    def elect_other_controller(self) -> None:
        """Another broker won a later epoch: this controller's fence is stale."""
        self.controller_epoch += 1
        self.epoch_version += 1

    def _check(self, fence: ControllerEpochZk) -> None:
        if fence.zk_version != self.epoch_version:
            raise errors.StaleControllerEpochError(f"controller epoch {fence.epoch} is stale")

    def _watch(self, what: str, watch: Watch | None) -> None:
        if watch is not None:
            self.watched.append(what)

    # -- ControllerStore -------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        return self.cluster_id

    def get_brokers(self, watch: Watch | None = None) -> dict[int, BrokerRegistration]:
        self._watch("brokers", watch)
        return dict(sorted(self.brokers.items()))

    def get_controller_id(self, watch: Watch | None = None) -> int | None:
        self._watch("controller", watch)
        return self.controller

    def try_become_controller(self, broker_id: int, *, now_ms: int) -> ControllerEpochZk | None:
        if self.controller is not None:
            return None
        self.controller = broker_id
        self.controller_epoch += 1
        self.epoch_version += 1
        self.writes.append(("become", broker_id, now_ms))
        return ControllerEpochZk(self.controller_epoch, self.epoch_version)

    def resign_controller(self, broker_id: int) -> None:
        if self.controller == broker_id:
            self.controller = None
            self.writes.append(("resign", broker_id))

    def get_topics(self, watch: Watch | None = None) -> list[str]:
        self._watch("topics", watch)
        return sorted(self.topics)

    def get_assignment(self, topic: str, watch: Watch | None = None) -> TopicAssignment | None:
        self._watch(f"topic:{topic}", watch)
        parts = self.topics.get(topic)
        if parts is None:
            return None
        moving = {p: m for (t, p), m in self.reassignments.items() if t == topic}
        return TopicAssignment(topic, dict(parts), moving, self._id(topic))

    def _id(self, topic: str) -> str:
        return self.topic_ids.setdefault(topic, new_topic_id())

    def ensure_topic_id(self, topic: str, fence: ControllerEpochZk) -> str | None:
        self._check(fence)
        if topic not in self.topics:
            return None
        if not self.topic_ids.get(topic):
            self.topic_ids[topic] = new_topic_id()
            self.writes.append(("topic_id", topic))
        return self.topic_ids[topic]

    def write_partition_reassignment(
        self,
        topic: str,
        partition: int,
        replicas: Any,
        reassignment: Any,
        fence: ControllerEpochZk,
    ) -> None:
        self._check(fence)
        if topic not in self.topics:
            return
        self.topics[topic][partition] = tuple(replicas)
        if reassignment is None:
            self.reassignments.pop((topic, partition), None)
        else:
            self.reassignments[(topic, partition)] = reassignment
        self.writes.append(("reassignment", (topic, partition)))

    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        return self.states.get((topic, partition))

    def get_partition_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        return {p: s for (t, p), s in sorted(self.states.items()) if t == topic}

    def create_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: ControllerEpochZk
    ) -> LeaderAndIsr | None:
        self._check(fence)
        if (topic, partition) in self.states:
            return None
        self.states[(topic, partition)] = dataclasses.replace(state, zk_version=0)
        self.writes.append(("create", (topic, partition), self.states[(topic, partition)]))
        return self.states[(topic, partition)]

    def update_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: ControllerEpochZk
    ) -> LeaderAndIsr | None:
        self._check(fence)
        tp = (topic, partition)
        races = self._races.get(tp)
        if races:
            self.put_state(tp, races.pop(0))
        current = self.states.get(tp)
        if current is None or current.zk_version != state.zk_version:
            self.writes.append(("conflict", tp, state.zk_version))
            return None
        self.states[tp] = dataclasses.replace(state, zk_version=state.zk_version + 1)
        self.writes.append(("update", tp, self.states[tp]))
        return self.states[tp]

    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        self._watch("isr_changes", watch)
        return sorted(self.isr_notes)

    def read_isr_change_notifications(self, names: Iterable[str]) -> set[TopicPartition]:
        return {tp for n in names for tp in self.isr_notes.get(n, [])}

    def delete_isr_change_notifications(
        self, names: Iterable[str], fence: ControllerEpochZk
    ) -> None:
        self._check(fence)
        for n in names:
            self.isr_notes.pop(n, None)
        self.writes.append(("delete_isr_notes", tuple(names)))

    def get_topics_to_delete(self, watch: Watch | None = None) -> list[str]:
        self._watch("deletions", watch)
        return sorted(self.deletions)

    def delete_topic_znodes(self, topic: str, fence: ControllerEpochZk) -> None:
        self._check(fence)
        self.topics.pop(topic, None)
        self.topic_ids.pop(topic, None)
        for tp in [tp for tp in self.states if tp[0] == topic]:
            del self.states[tp]
        if topic in self.deletions:
            self.deletions.remove(topic)
        self.writes.append(("delete_topic", topic))

    def remove_deletion_marker(self, topic: str, fence: ControllerEpochZk) -> None:
        self._check(fence)
        if topic in self.deletions:
            self.deletions.remove(topic)
        self.writes.append(("remove_marker", topic))

    def get_preferred_election(self, watch: Watch | None = None) -> list[TopicPartition] | None:
        self._watch("preferred", watch)
        return None if self.preferred is None else list(self.preferred)

    def delete_preferred_election(self, fence: ControllerEpochZk) -> None:
        self._check(fence)
        self.preferred = None
        self.writes.append(("delete_preferred",))


@dataclasses.dataclass
class RecordingSender:
    """A RequestSender that keeps what the controller thread hands it, in order."""

    log: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)

    def add_broker(self, broker: BrokerRegistration) -> None:
        self.log.append(("add", broker.broker_id))

    def remove_broker(self, broker_id: int) -> None:
        self.log.append(("remove", broker_id))

    def send(self, broker_id: int, request: Request) -> None:
        self.log.append(("send", broker_id, request))

    def sent(self, kind: type | None = None) -> list[tuple[int, Any]]:
        """(broker id, request) pairs, optionally only requests of one type."""
        return [
            (e[1], e[2])
            for e in self.log
            if e[0] == "send" and (kind is None or isinstance(e[2], kind))
        ]


class FakeAdminZk(FakeZk):
    """FakeZk plus the calls TopicAdmin makes (topic creation, configs, deletion markers)."""

    def __init__(self) -> None:
        super().__init__()
        self.configs: dict[str, dict[str, str]] = {}
        self.assignment_versions: dict[str, int] = {}

    def create_topic(self, topic: str, partitions: Any, config: Any, *, topic_id: str) -> None:
        if topic in self.topics:
            raise errors.TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        self.topics[topic] = {p: tuple(r) for p, r in partitions.items()}
        self.topic_ids[topic] = topic_id
        self.configs[topic] = dict(config)
        self.assignment_versions[topic] = 0
        self.writes.append(("create_topic", topic))

    def get_assignment_versioned(self, topic: str) -> tuple[TopicAssignment, int] | None:
        if topic not in self.topics:
            return None
        moving = {p: m for (t, p), m in self.reassignments.items() if t == topic}
        return TopicAssignment(
            topic, dict(self.topics[topic]), moving, self._id(topic)
        ), self.assignment_versions.get(topic, 0)

    def set_assignment(
        self, topic: str, partitions: Any, *, expected_version: int, topic_id: str
    ) -> bool:
        if self.assignment_versions.get(topic, 0) != expected_version:
            return False
        self.topics[topic] = {p: tuple(r) for p, r in partitions.items()}
        self.topic_ids[topic] = topic_id
        self.assignment_versions[topic] = expected_version + 1
        self.writes.append(("set_assignment", topic))
        return True

    def mark_topic_for_deletion(self, topic: str) -> None:
        if topic not in self.topics:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        if topic not in self.deletions:
            self.deletions.append(topic)

    def get_topic_config(self, topic: str, watch: Watch | None = None) -> dict[str, str]:
        return dict(self.configs.get(topic, {}))

    def set_topic_config(self, topic: str, config: Any) -> None:
        self.configs[topic] = dict(config)
        self.writes.append(("set_config", topic))
