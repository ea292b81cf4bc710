"""Carries out the controller's decisions: ZooKeeper reads before, writes and requests after.

For each event the :class:`ControllerExecutor` reads what the decision needs
from ZooKeeper (re-arming the watch that fired), asks the pure decision
function in :mod:`headwater.coordination.decisions`, and runs the returned
:class:`~headwater.coordination.results.ControllerResult` effect by effect
(:meth:`ControllerExecutor.run`): view updates to the
:class:`~headwater.coordination.context.ControllerContext`, fenced ZooKeeper
writes through the :class:`~headwater.coordination.store.ControllerStore`, requests
onto the per-broker senders.

The one decision taken here is Kafka's retry of a lost conditional write: a
partition state write that loses to a leader's ISR change re-reads the state
and decides again with the write's election, at most ``MAX_WRITE_ATTEMPTS``
times.  Every method runs on the controller's event thread while it is
active; a fenced write raises StaleControllerEpochError, which the
controller turns into a resignation.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from headwater import errors
from headwater.coordination import requests, results
from headwater.coordination import results as r
from headwater.coordination.channel import Request, RequestSender
from headwater.coordination.context import ControllerContext
from headwater.coordination.decisions import brokers, leaders, reassignment, topics
from headwater.coordination.model import ControllerEpochZk, LeaderAndIsr, PartitionState
from headwater.coordination.store import ControllerStore, Watch
from headwater.errors import ErrorCode
from headwater.values import TopicPartition

log = logging.getLogger(__name__)


MAX_WRITE_ATTEMPTS = 5

_VIEW_UPDATES = (
    r.SetLiveBrokers,
    r.SetShuttingDown,
    r.AddPartitions,
    r.LoadStates,
    r.MarkTopicDeleting,
    r.ForgetTopic,
    r.SetReassignment,
)


@dataclasses.dataclass(frozen=True)
class Watches:
    """The enqueueing watchers the controller registers (each is called on kazoo's thread)."""

    brokers: Watch
    topics: Watch
    deletions: Watch
    isr_changes: Watch
    preferred: Watch


class ControllerExecutor:
    """One controller term's I/O: reads for the decisions, then their effects."""

    def __init__(
        self,
        store: ControllerStore,
        ctx: ControllerContext,
        channels: RequestSender,
        *,
        watches: Watches,
        topic_watch: Callable[[str], Watch],
        unclean: bool,
    ) -> None:
        self._store = store
        self._ctx = ctx
        self._channels = channels
        self._watches = watches
        self._topic_watch = topic_watch
        self._unclean = unclean

    @property
    def _fence(self) -> ControllerEpochZk:
        assert self._ctx.epoch is not None, "only the active controller writes"
        return self._ctx.epoch

    # -- events ----------------------------------------------------------------

    def on_failover(self) -> None:
        """Load the cluster from ZooKeeper, repair leaderless partitions, tell every broker."""
        ctx = self._ctx
        ctx.cluster_id = self._store.get_cluster_id() or ""
        live = self._store.get_brokers(watch=self._watches.brokers)
        ctx.apply(r.SetLiveBrokers(tuple(live.values())))
        for topic in self._store.get_topics(watch=self._watches.topics):
            snapshot = self._read_topic(topic)
            if snapshot is not None:
                ctx.apply(r.AddPartitions(topic, dict(snapshot.partitions), snapshot.topic_id))
                for p, move in snapshot.reassignments.items():
                    tp = TopicPartition(topic, p)
                    ctx.apply(r.SetReassignment(tp, snapshot.partitions[p], move))
                states = {TopicPartition(topic, p): s for p, s in snapshot.states.items()}
                ctx.apply(r.LoadStates(states))
        self.run(brokers.on_failover(ctx, unclean=self._unclean))
        if ctx.reassignments:
            log.info("resuming reassignments of %s", sorted(ctx.reassignments))
            self.run(reassignment.on_failover_resume(ctx))
        self.on_topic_deletion()
        self.on_isr_change()
        if self._store.get_preferred_election(watch=self._watches.preferred) is not None:
            self.preferred_election(None, from_zk=True)

    def on_broker_change(self) -> None:
        current = self._store.get_brokers(watch=self._watches.brokers)
        self.run(brokers.on_broker_change(self._ctx, current, unclean=self._unclean))
        self._progress(None)

    def on_topic_change(self) -> None:
        names = self._store.get_topics(watch=self._watches.topics)
        loaded: dict[str, topics.TopicSnapshot] = {}
        for topic in topics.topics_to_load(self._ctx, names):
            snapshot = self._read_topic(topic)
            if snapshot is not None:
                loaded[topic] = snapshot
        self.run(topics.on_topic_change(self._ctx, names, loaded))

    def on_partition_modifications(self, topic: str) -> None:
        assignment = self._store.get_assignment(topic, watch=self._topic_watch(topic))
        partitions = dict(assignment.partitions) if assignment is not None else None
        self.run(topics.on_partition_modifications(self._ctx, topic, partitions))

    def on_topic_deletion(self) -> None:
        """Delete marked topics; one with a partition being moved waits for the move (Kafka)."""
        waiting = reassignment.moving_topics(self._ctx)
        marked = [
            t
            for t in self._store.get_topics_to_delete(watch=self._watches.deletions)
            if t not in waiting
        ]
        still_exists = [
            t
            for t in topics.unknown_deletions(self._ctx, marked)
            if self._store.get_assignment(t) is not None
        ]
        result = topics.on_topic_deletion(self._ctx, marked, still_exists=still_exists)
        self.run(result)
        for deleted in result.of(r.DeleteTopicZnodes):
            log.info("deleted topic %s", deleted.topic)

    def on_isr_change(self) -> None:
        names = self._store.get_isr_change_notifications(watch=self._watches.isr_changes)
        if not names:
            return
        notified = self._store.read_isr_change_notifications(names)
        fresh: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in topics.isr_refresh_targets(self._ctx, notified):
            state = self._store.get_partition_state(*tp)
            if state is not None:
                fresh[tp] = state
        self.run(topics.on_isr_change(self._ctx, names, fresh))
        self._progress(fresh)

    def alter_reassignments(
        self, requested: Mapping[TopicPartition, reassignment.Target]
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """AlterPartitionReassignments on the controller: decide from fresh states, then act."""
        for tp in requested:  # a leader may have changed the ISR since it was cached
            if tp in self._ctx.states:
                state = self._store.get_partition_state(*tp)
                if state is not None:
                    self._ctx.record_state(tp, state)
        result, answers = reassignment.on_alter_reassignments(self._ctx, requested)
        before = set(self._ctx.reassignments)
        self.run(result)
        if before - set(self._ctx.reassignments):
            self.on_topic_deletion()
        return answers

    def _progress(self, tps: Collection[TopicPartition] | None) -> None:
        """Complete the moves (of ``tps``, None: all) whose target replicas are in sync."""
        if not self._ctx.reassignments:
            return
        result = reassignment.on_reassignment_progress(self._ctx, tps)
        if result:
            self.run(result)
            self.on_topic_deletion()

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        self.run(leaders.on_controlled_shutdown(self._ctx, broker_id, broker_epoch))
        return leaders.remaining_leaderships(self._ctx, broker_id)

    def preferred_election(
        self, partitions: Sequence[tuple[str, int]] | None, *, from_zk: bool = False
    ) -> dict[TopicPartition, ErrorCode]:
        if from_zk:
            requested = self._store.get_preferred_election(watch=self._watches.preferred)
            if requested is None:
                return {}
            partitions = requested or None
        valid, unknown = leaders.preferred_targets(self._ctx, partitions)
        fresh: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in valid:  # a leader may have changed the ISR since it was cached
            state = self._store.get_partition_state(*tp)
            if state is not None:
                fresh[tp] = state
        result = leaders.on_preferred_election(self._ctx, valid, fresh=fresh, from_zk=from_zk)
        written = self.run(result)
        return leaders.preferred_election_errors(self._ctx, valid, unknown, written=written)

    def auto_rebalance(self) -> None:
        self.run(leaders.on_auto_rebalance(self._ctx))

    def _read_topic(self, topic: str) -> topics.TopicSnapshot | None:
        assignment = self._store.get_assignment(topic, watch=self._topic_watch(topic))
        if assignment is None:
            return None
        tid = assignment.topic_id
        if not tid:  # created before topic ids: give it one now, once (Kafka's setTopicIds)
            tid = self._store.ensure_topic_id(topic, self._fence) or ""
            log.info("gave topic %s the id %s", topic, tid)
        return topics.TopicSnapshot(
            dict(assignment.partitions),
            self._store.get_partition_states(topic),
            dict(assignment.reassignments),
            tid,
        )

    # -- running a result --------------------------------------------------------

    def run(self, result: results.ControllerResult) -> set[TopicPartition]:
        """Carry out ``result`` in order; return the partitions whose state was written."""
        ctx = self._ctx
        written: set[TopicPartition] = set()
        unannounced: list[PartitionState] = []
        for effect in result.effects:
            if isinstance(effect, _VIEW_UPDATES):
                ctx.apply(effect)
            elif isinstance(effect, r.CreatePartitionState | r.UpdatePartitionState):
                tp = effect.topic_partition
                state = (
                    self._create(effect)
                    if isinstance(effect, r.CreatePartitionState)
                    else self._update(effect)
                )
                if state is not None:
                    written.add(tp)
                    unannounced.append(
                        PartitionState(
                            tp[0], tp[1], state, ctx.replicas(tp), ctx.topic_ids.get(tp[0], "")
                        )
                    )
            elif isinstance(effect, r.WriteReassignment):
                tp = effect.topic_partition
                self._store.write_partition_reassignment(
                    tp[0], tp[1], effect.replicas, effect.reassignment, self._fence
                )
            elif isinstance(effect, r.DeleteTopicZnodes):
                self._store.delete_topic_znodes(effect.topic, self._fence)
            elif isinstance(effect, r.RemoveDeletionMarker):
                self._store.remove_deletion_marker(effect.topic, self._fence)
            elif isinstance(effect, r.DeleteIsrChangeNotifications):
                self._store.delete_isr_change_notifications(effect.names, self._fence)
            elif isinstance(effect, r.DeletePreferredElection):
                self._store.delete_preferred_election(self._fence)
            elif isinstance(effect, r.AddBroker):
                self._channels.add_broker(effect.registration)
            elif isinstance(effect, r.RemoveBroker):
                self._channels.remove_broker(effect.broker_id)
            elif isinstance(effect, r.Announce):
                named = set(effect.partitions)
                states = [s for s in unannounced if s.key in named]
                unannounced = []
                if states:
                    self._send_all(requests.leader_and_isr(ctx, states))
                    self._send_all(requests.update_metadata(ctx, states))
            elif isinstance(effect, r.SendLeaderAndIsr):
                states = ctx.partition_states(effect.partitions)
                self._send_all(requests.leader_and_isr(ctx, states, to=effect.to))
            elif isinstance(effect, r.SendUpdateMetadata):
                states = ctx.partition_states(effect.partitions)
                self._send_all(
                    requests.update_metadata(ctx, states, deleted_topics=effect.deleted_topics)
                )
            elif isinstance(effect, r.SendStopReplica):
                self._channels.send(
                    effect.broker_id,
                    requests.stop_replica(ctx, effect.partitions, delete=effect.delete),
                )
            else:  # pragma: no cover - exhaustive over Effect
                raise TypeError(f"unknown controller effect {effect!r}")
        return written

    def _send_all(self, per_broker: Mapping[int, Request]) -> None:
        for broker_id, request in per_broker.items():
            self._channels.send(broker_id, request)

    def _create(self, write: r.CreatePartitionState) -> LeaderAndIsr | None:
        """Create the state znode; if it exists already, adopt what it holds."""
        tp = write.topic_partition
        created = self._store.create_partition_state(tp[0], tp[1], write.state, self._fence)
        if created is None:
            created = self._store.get_partition_state(*tp)
            if created is None:
                return None
        self._ctx.record_state(tp, created)
        return created

    def _update(self, write: r.UpdatePartitionState) -> LeaderAndIsr | None:
        """The conditional write, re-deciding from a fresh read after each lost race."""
        ctx = self._ctx
        tp = write.topic_partition
        decided: LeaderAndIsr | None = write.state if ctx.states.get(tp) == write.base else None
        for _ in range(MAX_WRITE_ATTEMPTS):
            current = ctx.states.get(tp)
            if current is None:
                return None
            if decided is None:
                new = write.election.decide(ctx.replicas(tp), current)
                if new is None:
                    return None
                decided = dataclasses.replace(new, zk_version=current.zk_version)
            written = self._store.update_partition_state(tp[0], tp[1], decided, self._fence)
            if written is not None:
                ctx.record_state(tp, written)
                return written
            fresh = self._store.get_partition_state(*tp)
            if fresh is None:
                return None
            ctx.record_state(tp, fresh)
            decided = None
        log.warning("gave up writing state of %s-%d after %d conflicts", *tp, MAX_WRITE_ATTEMPTS)
        return None
