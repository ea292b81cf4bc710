"""The controller's cached view of the cluster and its partition state changes.

:class:`ControllerContext` is Kafka's ``ControllerContext``: what the active
controller believes about live brokers, assignments and partition states.
:class:`PartitionStateChanger` turns election decisions (pure functions in
:mod:`headwater.coordination.election`) into conditional, epoch-fenced
ZooKeeper writes and keeps the context in step.  Both are used only from the
controller's event thread.

A conditional write that loses to a concurrent ISR change by a partition
leader re-reads the state and decides again (bounded), as Kafka's
``updateLeaderAndIsr`` retries the partitions that failed.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from headwater.coordination import election
from headwater.coordination.model import (
    NO_LEADER,
    BrokerRegistration,
    LeaderAndIsr,
    PartitionState,
)
from headwater.coordination.store import ControllerEpochZk, ZkStore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Strategy = Callable[[tuple[int, ...], LeaderAndIsr], LeaderAndIsr | None]
"""An election: (assignment, current state) -> new state, or None when none is possible."""

_MAX_WRITE_ATTEMPTS = 5


@dataclasses.dataclass
class ControllerContext:
    """The active controller's cache; valid only while ``epoch`` is set."""

    epoch: ControllerEpochZk | None = None
    cluster_id: str = ""
    live_brokers: dict[int, BrokerRegistration] = dataclasses.field(default_factory=dict)
    shutting_down: set[int] = dataclasses.field(default_factory=set)
    assignments: dict[str, dict[int, tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = dataclasses.field(default_factory=dict)
    topics_to_delete: set[str] = dataclasses.field(default_factory=set)

    def reset(self) -> None:
        self.epoch = None
        self.live_brokers.clear()
        self.shutting_down.clear()
        self.assignments.clear()
        self.states.clear()
        self.topics_to_delete.clear()

    @property
    def controller_epoch(self) -> int:
        return self.epoch.epoch if self.epoch else -1

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp[0], {}).get(tp[1], ())

    def all_partitions(self) -> list[TopicPartition]:
        return [(t, p) for t, parts in sorted(self.assignments.items()) for p in sorted(parts)]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker_id in self.replicas(tp)]

    def partition_state(self, tp: TopicPartition) -> PartitionState | None:
        lai = self.states.get(tp)
        if lai is None:
            return None
        return PartitionState(tp[0], tp[1], lai, self.replicas(tp))

    def partition_states(self, tps: Iterable[TopicPartition]) -> list[PartitionState]:
        out = [self.partition_state(tp) for tp in tps]
        return [s for s in out if s is not None]

    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    def eligible_ids(self) -> set[int]:
        """Live brokers that are not shutting down: the ones that may lead."""
        return self.live_ids() - self.shutting_down


class PartitionStateChanger:
    """Elects leaders and writes partition states for the active controller."""

    def __init__(self, store: ZkStore, ctx: ControllerContext, *, unclean: bool) -> None:
        self._store = store
        self._ctx = ctx
        self.unclean = unclean

    @property
    def _fence(self) -> ControllerEpochZk:
        assert self._ctx.epoch is not None, "only the active controller changes partition state"
        return self._ctx.epoch

    def initialize(self, tps: Iterable[TopicPartition]) -> list[PartitionState]:
        """Create states for new partitions; existing state znodes are loaded instead."""
        changed: list[PartitionState] = []
        for tp in tps:
            replicas = self._ctx.replicas(tp)
            initial = election.initial_leader_and_isr(
                replicas, self._ctx.eligible_ids(), controller_epoch=self._ctx.controller_epoch
            )
            if initial is None:
                log.warning("no live replica for new partition %s-%d (%s)", *tp, replicas)
                continue
            created = self._store.create_partition_state(tp[0], tp[1], initial, self._fence)
            if created is None:
                existing = self._store.get_partition_state(*tp)
                if existing is None:
                    continue
                created = existing
            self._ctx.states[tp] = created
            changed.append(PartitionState(tp[0], tp[1], created, replicas))
        return changed

    def elect(
        self, tps: Iterable[TopicPartition], strategy: Strategy
    ) -> tuple[list[PartitionState], list[TopicPartition]]:
        """Run ``strategy`` on each partition; return (changed states, partitions not elected)."""
        changed: list[PartitionState] = []
        failed: list[TopicPartition] = []
        for tp in tps:
            new = self._write_with_retry(tp, strategy)
            if new is None:
                failed.append(tp)
            else:
                changed.append(PartitionState(tp[0], tp[1], new, self._ctx.replicas(tp)))
        return changed, failed

    def _write_with_retry(self, tp: TopicPartition, strategy: Strategy) -> LeaderAndIsr | None:
        for _ in range(_MAX_WRITE_ATTEMPTS):
            current = self._ctx.states.get(tp)
            if current is None:
                return None
            decided = strategy(self._ctx.replicas(tp), current)
            if decided is None:
                return None
            written = self._store.update_partition_state(tp[0], tp[1], decided, self._fence)
            if written is not None:
                self._ctx.states[tp] = written
                return written
            fresh = self._store.get_partition_state(*tp)
            if fresh is None:
                return None
            self._ctx.states[tp] = fresh
        log.warning("gave up writing state of %s-%d after %d conflicts", *tp, _MAX_WRITE_ATTEMPTS)
        return None

    # -- the strategies, bound to the current context -------------------------

    def offline(self) -> Strategy:
        def strategy(assignment: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
            if current.leader in self._ctx.eligible_ids():
                return None
            return election.offline_partition_election(
                assignment,
                current,
                self._ctx.eligible_ids(),
                controller_epoch=self._ctx.controller_epoch,
                unclean=self.unclean,
            )

        return strategy

    def mark_leaderless(self) -> Strategy:
        """The partition has no eligible leader: record leader -1 (once)."""

        def strategy(assignment: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
            if current.leader == NO_LEADER:
                return None
            return election.offline_no_leader(
                current, self._ctx.live_ids(), controller_epoch=self._ctx.controller_epoch
            )

        return strategy

    def preferred(self) -> Strategy:
        def strategy(assignment: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
            return election.preferred_replica_election(
                assignment,
                current,
                self._ctx.eligible_ids(),
                controller_epoch=self._ctx.controller_epoch,
            )

        return strategy

    def controlled_shutdown(self) -> Strategy:
        def strategy(assignment: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
            return election.controlled_shutdown_election(
                assignment,
                current,
                self._ctx.live_ids(),
                self._ctx.shutting_down,
                controller_epoch=self._ctx.controller_epoch,
            )

        return strategy

    def remove_from_isr(self, broker_id: int) -> Strategy:
        """Shrink a (dead or stopping) follower out of the ISR, bumping the leader epoch.

        The last ISR member is kept, as in Kafka, so that the broker that has
        all committed data stays known; a removed leader leaves leader -1.
        """

        def strategy(assignment: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
            if broker_id not in current.isr:
                return None
            isr = (
                current.isr if len(current.isr) == 1 else [b for b in current.isr if b != broker_id]
            )
            leader = NO_LEADER if current.leader == broker_id else current.leader
            new = current.new_leader(leader, isr)
            return dataclasses.replace(new, controller_epoch=self._ctx.controller_epoch)

        return strategy
