"""The active controller's view of the cluster (Kafka's ``ControllerContext``).

What the controller believes about live brokers, replica assignments and
partition states.  It is a cache of ZooKeeper plus the controller's own
bookkeeping (brokers in controlled shutdown, topics being deleted), valid only
for one controller term: it is rebuilt from ZooKeeper on every failover.

Decisions (:mod:`headwater.coordination.decisions`) only read it.  It changes
in two ways, both on the controller's event thread: :meth:`ControllerContext.apply`
of a view update from a :class:`~headwater.coordination.results.ControllerResult`,
and :meth:`ControllerContext.record_state` when the executor has written or
re-read a partition state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from headwater.coordination import results as r
from headwater.coordination.model import (
    BrokerRegistration,
    ControllerEpochZk,
    LeaderAndIsr,
    PartitionState,
    ReplicaReassignment,
)
from headwater.values import TopicPartition


@dataclasses.dataclass
class ControllerContext:
    """The active controller's cache; valid only while ``epoch`` is set.

    Invariants: every key of ``states`` is a partition of ``assignments``
    (a state without an assignment is dropped with its topic);
    ``shutting_down`` and ``topics_to_delete`` are subsets of the live brokers
    and of the known topics respectively, as long as updates come through
    :meth:`apply`.
    """

    epoch: ControllerEpochZk | None = None
    cluster_id: str = ""
    live_brokers: dict[int, BrokerRegistration] = dataclasses.field(default_factory=dict)
    shutting_down: set[int] = dataclasses.field(default_factory=set)
    assignments: dict[str, dict[int, tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = dataclasses.field(default_factory=dict)
    topics_to_delete: set[str] = dataclasses.field(default_factory=set)
    reassignments: dict[TopicPartition, ReplicaReassignment] = dataclasses.field(
        default_factory=dict
    )
    """Partitions being moved (KIP-455); each is a partition of ``assignments``."""
    topic_ids: dict[str, str] = dataclasses.field(default_factory=dict)
    """Topic -> id, as its znode holds it; each is a topic of ``assignments``."""

    def reset(self) -> None:
        self.epoch = None
        self.cluster_id = ""
        self.live_brokers.clear()
        self.shutting_down.clear()
        self.assignments.clear()
        self.states.clear()
        self.topics_to_delete.clear()
        self.reassignments.clear()
        self.topic_ids.clear()

    def copy(self) -> ControllerContext:
        """An independent copy (decisions work on one to predict their own effects)."""
        return ControllerContext(
            epoch=self.epoch,
            cluster_id=self.cluster_id,
            live_brokers=dict(self.live_brokers),
            shutting_down=set(self.shutting_down),
            assignments={t: dict(parts) for t, parts in self.assignments.items()},
            states=dict(self.states),
            topics_to_delete=set(self.topics_to_delete),
            reassignments=dict(self.reassignments),
            topic_ids=dict(self.topic_ids),
        )

    # -- reads -------------------------------------------------------------------

    @property
    def controller_epoch(self) -> int:
        return self.epoch.epoch if self.epoch else -1

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp[0], {}).get(tp[1], ())

    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(t, p)
            for t, parts in sorted(self.assignments.items())
            for p in sorted(parts)
        ]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        lai = self.states.get(tp)
        if lai is None:
            return None
        return PartitionState(tp[0], tp[1], lai, self.replicas(tp), self.topic_ids.get(tp[0], ""))

    def partition_states(self, tps: Iterable[TopicPartition]) -> list[PartitionState]:
        out = [self.partition_state(tp) for tp in tps]
        return [s for s in out if s is not None]

    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    def eligible_ids(self) -> set[int]:
        """Live brokers that are not shutting down: the ones that may lead."""
        return self.live_ids() - self.shutting_down

    # -- changes -----------------------------------------------------------------

    def apply(self, update: r.ViewUpdate) -> None:
        """Apply one view update from a controller result."""
        if isinstance(update, r.SetLiveBrokers):
            self.live_brokers = {b.broker_id: b for b in update.brokers}
        elif isinstance(update, r.SetShuttingDown):
            self.shutting_down = set(update.broker_ids)
        elif isinstance(update, r.AddPartitions):
            self.assignments.setdefault(update.topic, {}).update(update.partitions)
            if update.topic_id:
                self.topic_ids[update.topic] = update.topic_id
        elif isinstance(update, r.LoadStates):
            self.states.update(update.states)
        elif isinstance(update, r.MarkTopicDeleting):
            self.topics_to_delete.add(update.topic)
        elif isinstance(update, r.ForgetTopic):
            for p in self.assignments.pop(update.topic, {}):
                self.states.pop(TopicPartition(update.topic, p), None)
                self.reassignments.pop(TopicPartition(update.topic, p), None)
            self.topics_to_delete.discard(update.topic)
            self.topic_ids.pop(update.topic, None)
        elif isinstance(update, r.SetReassignment):
            tp = update.topic_partition
            self.assignments.setdefault(tp[0], {})[tp[1]] = update.replicas
            if update.reassignment is None:
                self.reassignments.pop(tp, None)
            else:
                self.reassignments[tp] = update.reassignment
        else:  # pragma: no cover - exhaustive over ViewUpdate
            raise TypeError(f"not a view update: {update!r}")

    def record_state(self, tp: TopicPartition, state: LeaderAndIsr) -> None:
        """A partition state just written to, or read from, ZooKeeper."""
        self.states[tp] = state
