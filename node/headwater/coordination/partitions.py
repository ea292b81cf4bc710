"""Partition state changes, decided without I/O (Kafka's ``PartitionStateMachine``).

The election values below bind one of the pure strategies of
:mod:`headwater.coordination.election` to the cluster facts it needs (live
and eligible brokers, the controller epoch), so that the executor can decide
a partition again, with the same facts, when its conditional write loses to a
leader's concurrent ISR change.

:class:`Plan` builds one :class:`~headwater.coordination.results.ControllerResult`.
It works on a copy of the controller's view and applies each effect it adds to
that copy, predicting what the executor will see: a created state has znode
version 0, an updated one its base version plus one (ZooKeeper bumps the
version by one per write).  A later decision in the same result (the startup
half of a broker bounce, say) therefore starts from the states the earlier
half will have written.  Used from the controller's event thread only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable

from headwater.coordination import election
from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import NO_LEADER, LeaderAndIsr
from headwater.values import TopicPartition

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class OfflineElection:
    """A partition whose leader may no longer lead: elect from the live ISR.

    With ``unclean`` any live replica may lead when no ISR member is live.
    When nobody may lead, the partition is marked leaderless (leader -1, the
    last ISR kept), once.  A partition whose leader is eligible is left alone.
    """

    eligible: frozenset[int]
    live: frozenset[int]
    controller_epoch: int
    unclean: bool = False

    def decide(self, replicas: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
        if current.leader in self.eligible:
            return None
        new = election.offline_partition_election(
            replicas,
            current,
            self.eligible,
            controller_epoch=self.controller_epoch,
            unclean=self.unclean,
        )
        if new is not None:
            return new
        if current.leader == NO_LEADER:
            return None
        return election.offline_no_leader(
            current, self.live, controller_epoch=self.controller_epoch
        )


@dataclasses.dataclass(frozen=True)
class PreferredElection:
    """Give leadership back to the first replica of the assignment, if it may lead."""

    eligible: frozenset[int]
    controller_epoch: int

    def decide(self, replicas: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
        return election.preferred_replica_election(
            replicas, current, self.eligible, controller_epoch=self.controller_epoch
        )


@dataclasses.dataclass(frozen=True)
class ControlledShutdownElection:
    """Move leadership off brokers that are shutting down and shrink them out of the ISR."""

    live: frozenset[int]
    shutting_down: frozenset[int]
    controller_epoch: int

    def decide(self, replicas: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
        return election.controlled_shutdown_election(
            replicas,
            current,
            self.live,
            self.shutting_down,
            controller_epoch=self.controller_epoch,
        )


@dataclasses.dataclass(frozen=True)
class RemoveFromIsr:
    """Shrink a dead or stopping follower out of the ISR, bumping the leader epoch.

    The last ISR member is kept, as in Kafka, so that the broker that has all
    committed data stays known; a removed leader leaves leader -1.
    """

    broker_id: int
    controller_epoch: int

    def decide(self, replicas: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
        if self.broker_id not in current.isr:
            return None
        isr = (
            current.isr
            if len(current.isr) == 1
            else [b for b in current.isr if b != self.broker_id]
        )
        leader = NO_LEADER if current.leader == self.broker_id else current.leader
        new = current.new_leader(leader, isr)
        return dataclasses.replace(new, controller_epoch=self.controller_epoch)


class Plan:
    """Collects the effects of one decision over a predicted copy of the view.

    ``view`` is what the controller's context will be once the executor has
    carried out every effect added so far, if every write lands as decided.
    """

    def __init__(self, ctx: ControllerContext) -> None:
        self.view = ctx.copy()
        self._effects: list[r.Effect] = []

    def result(self) -> r.ControllerResult:
        return r.ControllerResult(tuple(self._effects))

    def add(self, *effects: r.Effect) -> None:
        """Add effects; view updates are applied to :attr:`view` as well."""
        for effect in effects:
            if isinstance(
                effect,
                r.SetLiveBrokers
                | r.SetShuttingDown
                | r.AddPartitions
                | r.LoadStates
                | r.MarkTopicDeleting
                | r.ForgetTopic
                | r.SetReassignment,
            ):
                self.view.apply(effect)
            self._effects.append(effect)

    def initialize(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Create states for new partitions: leader = first eligible replica, ISR = eligible ones.

        Returns the partitions it creates a state for; one with no eligible
        replica is skipped (it gets a state when a replica comes back).
        """
        view = self.view
        created: list[TopicPartition] = []
        for tp in tps:
            replicas = view.replicas(tp)
            initial = election.initial_leader_and_isr(
                replicas, view.eligible_ids(), controller_epoch=view.controller_epoch
            )
            if initial is None:
                log.warning("no live replica for new partition %s-%d (%s)", *tp, replicas)
                continue
            self._effects.append(r.CreatePartitionState(tp, initial))
            view.record_state(tp, dataclasses.replace(initial, zk_version=0))
            created.append(tp)
        return created

    def elect(self, tps: Iterable[TopicPartition], how: r.Election) -> list[TopicPartition]:
        """Decide each partition with ``how``; returns the partitions it writes a new state for."""
        view = self.view
        changed: list[TopicPartition] = []
        for tp in tps:
            current = view.states.get(tp)
            if current is None:
                continue
            new = how.decide(view.replicas(tp), current)
            if new is None:
                continue
            state = dataclasses.replace(new, zk_version=current.zk_version)
            self._effects.append(r.UpdatePartitionState(tp, current, state, how))
            view.record_state(tp, dataclasses.replace(state, zk_version=current.zk_version + 1))
            changed.append(tp)
        return changed

    def offline_election(self, *, unclean: bool) -> OfflineElection:
        """An :class:`OfflineElection` over the brokers of the view as it is now."""
        view = self.view
        return OfflineElection(
            eligible=frozenset(view.eligible_ids()),
            live=frozenset(view.live_ids()),
            controller_epoch=view.controller_epoch,
            unclean=unclean,
        )

    def elect_offline(
        self, tps: Iterable[TopicPartition], *, unclean: bool
    ) -> list[TopicPartition]:
        """Elect leaders for those of ``tps`` whose leader may no longer lead.

        Partitions of topics being deleted are left alone; one with no
        eligible replica is marked leaderless (and logged).
        """
        view = self.view
        how = self.offline_election(unclean=unclean)
        offline = [
            tp
            for tp in tps
            if tp in view.states
            and tp[0] not in view.topics_to_delete
            and view.states[tp].leader not in how.eligible
        ]
        changed = self.elect(offline, how)
        for tp in changed:
            if view.states[tp].leader == NO_LEADER:
                log.warning(
                    "partition %s-%d has no eligible leader (replicas %s)", *tp, view.replicas(tp)
                )
        return changed
