"""What the active controller does for each cluster change (Kafka's ``KafkaController.on*``).

:class:`ControllerActions` holds the reactions to broker, topic, partition,
deletion, ISR-change, controlled-shutdown and election events.  It reads
ZooKeeper (re-arming the watch that fired), decides through
:class:`PartitionStateChanger`, and queues LeaderAndIsr / StopReplica /
UpdateMetadata requests on the :class:`ControllerChannelManager`.  Every
method runs on the controller's event thread, and only while it is active.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence

from headwater import errors
from headwater.coordination.channel import ControllerChannel, ControllerChannelManager, Request
from headwater.coordination.model import NO_LEADER, BrokerRegistration, PartitionState
from headwater.coordination.partitions import (
    ControllerContext,
    PartitionStateChanger,
    TopicPartition,
)
from headwater.coordination.store import Watch, ZkStore
from headwater.errors import ErrorCode

log = logging.getLogger(__name__)


StaleBrokerEpochError = errors.StaleBrokerEpochError


@dataclasses.dataclass(frozen=True)
class Watches:
    """The enqueueing watchers the controller registers (each is called on kazoo's thread)."""

    brokers: Watch
    topics: Watch
    deletions: Watch
    isr_changes: Watch
    preferred: Watch


class ControllerActions:
    def __init__(
        self,
        store: ZkStore,
        ctx: ControllerContext,
        changer: PartitionStateChanger,
        channels: ControllerChannelManager,
        *,
        watches: Watches,
        topic_watch: Callable[[str], Watch],
    ) -> None:
        self._store = store
        self._ctx = ctx
        self._changer = changer
        self._channels = channels
        self._watches = watches
        self._topic_watch = topic_watch

    # -- failover ------------------------------------------------------------

    def on_failover(self) -> None:
        """Load the cluster from ZooKeeper, repair leaderless partitions, tell every broker."""
        ctx = self._ctx
        ctx.cluster_id = self._store.get_cluster_id() or ""
        ctx.live_brokers = self._store.get_brokers(watch=self._watches.brokers)
        for broker in ctx.live_brokers.values():
            self._channels.add_broker(broker)
        for topic in self._store.get_topics(watch=self._watches.topics):
            self._load_topic(topic)
        new = [tp for tp in ctx.all_partitions() if tp not in ctx.states]
        self._changer.initialize(new)
        self._elect_offline(ctx.all_partitions(), send=False)
        self.send_update_metadata(ctx.partition_states(ctx.all_partitions()))
        self.send_leader_and_isr(ctx.partition_states(ctx.all_partitions()))
        self.on_topic_deletion()
        self.on_isr_change()
        if self._store.get_preferred_election(watch=self._watches.preferred) is not None:
            self.preferred_election(None, from_zk=True)

    def _load_topic(self, topic: str) -> None:
        assignment = self._store.get_assignment(topic, watch=self._topic_watch(topic))
        if assignment is None:
            return
        self._ctx.assignments[topic] = dict(assignment.partitions)
        for p, state in self._store.get_partition_states(topic).items():
            self._ctx.states[(topic, p)] = state

    # -- brokers -------------------------------------------------------------

    def on_broker_change(self) -> None:
        ctx = self._ctx
        current = self._store.get_brokers(watch=self._watches.brokers)
        old = dict(ctx.live_brokers)
        dead = sorted(set(old) - set(current))
        new = sorted(set(current) - set(old))
        bounced = sorted(b for b in set(old) & set(current) if old[b].epoch != current[b].epoch)
        if not (dead or new or bounced):
            return
        log.info("brokers changed: new %s, dead %s, bounced %s", new, dead, bounced)
        for b in dead:
            self._channels.remove_broker(b)
        ctx.shutting_down -= set(dead) | set(bounced)
        ctx.live_brokers = {b: r for b, r in current.items() if b not in bounced}
        if dead or bounced:
            self._on_broker_failure(dead + bounced)
        ctx.live_brokers = dict(current)
        for b in new + bounced:
            self._channels.add_broker(current[b])
        if new or bounced:
            self._on_broker_startup(new + bounced)

    def _on_broker_failure(self, broker_ids: Sequence[int]) -> None:
        ctx = self._ctx
        led = [tp for tp, s in ctx.states.items() if s.leader in broker_ids]
        changed = self._elect_offline(led, send=False)
        handled = set(led)
        for b in broker_ids:
            followers = [tp for tp in ctx.partitions_on_broker(b) if tp not in handled]
            shrunk, _ = self._changer.elect(followers, self._changer.remove_from_isr(b))
            changed.extend(shrunk)
        self._announce(changed)

    def _on_broker_startup(self, broker_ids: Sequence[int]) -> None:
        ctx = self._ctx
        self.send_update_metadata(ctx.partition_states(ctx.all_partitions()))
        for b in broker_ids:
            states = ctx.partition_states(ctx.partitions_on_broker(b))
            if states:
                self.send_leader_and_isr(states, to=[b])
        new = [tp for tp in ctx.all_partitions() if tp not in ctx.states]
        initialized = self._changer.initialize(new)
        changed = self._elect_offline(ctx.all_partitions(), send=False)
        self._announce(initialized + changed)

    def _elect_offline(self, tps: Iterable[TopicPartition], *, send: bool) -> list[PartitionState]:
        ctx = self._ctx
        eligible = ctx.eligible_ids()
        offline = [
            tp
            for tp in tps
            if tp in ctx.states
            and tp[0] not in ctx.topics_to_delete
            and ctx.states[tp].leader not in eligible
        ]
        changed, failed = self._changer.elect(offline, self._changer.offline())
        leaderless, _ = self._changer.elect(failed, self._changer.mark_leaderless())
        for tp in failed:
            log.warning(
                "partition %s-%d has no eligible leader (replicas %s)", *tp, ctx.replicas(tp)
            )
        if send:
            self._announce(changed + leaderless)
        return changed + leaderless

    # -- topics --------------------------------------------------------------

    def on_topic_change(self) -> None:
        ctx = self._ctx
        topics = set(self._store.get_topics(watch=self._watches.topics))
        for gone in set(ctx.assignments) - topics:
            self._forget_topic(gone)
        created: list[PartitionState] = []
        for topic in sorted(topics - set(ctx.assignments)):
            self._load_topic(topic)
            new = [tp for tp in ctx.all_partitions() if tp[0] == topic and tp not in ctx.states]
            created.extend(self._changer.initialize(new))
        self._announce(created)

    def on_partition_modifications(self, topic: str) -> None:
        ctx = self._ctx
        assignment = self._store.get_assignment(topic, watch=self._topic_watch(topic))
        if assignment is None or topic not in ctx.assignments or topic in ctx.topics_to_delete:
            return
        current = ctx.assignments[topic]
        added = {p: r for p, r in assignment.partitions.items() if p not in current}
        if not added:
            return
        current.update(added)
        self._announce(self._changer.initialize((topic, p) for p in sorted(added)))

    def on_topic_deletion(self) -> None:
        ctx = self._ctx
        for topic in self._store.get_topics_to_delete(watch=self._watches.deletions):
            if topic not in ctx.assignments:
                if self._store.get_assignment(topic) is None:
                    self._store.remove_deletion_marker(topic, ctx.epoch)  # type: ignore[arg-type]
                continue
            ctx.topics_to_delete.add(topic)
            per_broker: dict[int, list[TopicPartition]] = {}
            for tp in ctx.all_partitions():
                if tp[0] == topic:
                    for b in ctx.replicas(tp):
                        if b in ctx.live_brokers:
                            per_broker.setdefault(b, []).append(tp)
            for b, tps in per_broker.items():
                self._channels.send(b, _stop_replica(ctx.controller_epoch, tps, delete=True))
            self._store.delete_topic_znodes(topic, ctx.epoch)  # type: ignore[arg-type]
            self._forget_topic(topic)
            self.send_update_metadata([], deleted_topics=[topic])
            log.info("deleted topic %s", topic)

    def _forget_topic(self, topic: str) -> None:
        ctx = self._ctx
        for p in ctx.assignments.pop(topic, {}):
            ctx.states.pop((topic, p), None)
        ctx.topics_to_delete.discard(topic)

    def _refresh(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            fresh = self._store.get_partition_state(*tp)
            if fresh is not None:
                self._ctx.states[tp] = fresh

    # -- ISR changes ---------------------------------------------------------

    def on_isr_change(self) -> None:
        ctx = self._ctx
        names = self._store.get_isr_change_notifications(watch=self._watches.isr_changes)
        if not names:
            return
        tps = sorted(self._store.read_isr_change_notifications(names))
        refreshed: list[TopicPartition] = []
        for tp in tps:
            if tp[0] in ctx.assignments:
                fresh = self._store.get_partition_state(*tp)
                if fresh is not None:
                    ctx.states[tp] = fresh
                    refreshed.append(tp)
        self.send_update_metadata(ctx.partition_states(refreshed))
        self._store.delete_isr_change_notifications(names, ctx.epoch)  # type: ignore[arg-type]

    # -- controlled shutdown and preferred leaders ----------------------------

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self._ctx
        reg = ctx.live_brokers.get(broker_id)
        if reg is None:
            raise errors.BrokerNotAvailableError(f"broker {broker_id} is not registered")
        if broker_epoch >= 0 and reg.epoch != broker_epoch:
            raise StaleBrokerEpochError(
                f"broker {broker_id} epoch {broker_epoch} is stale (current {reg.epoch})"
            )
        ctx.shutting_down.add(broker_id)
        on_broker = ctx.partitions_on_broker(broker_id)
        led = [
            tp
            for tp in on_broker
            if ctx.states.get(tp) is not None
            and ctx.states[tp].leader == broker_id
            and len(ctx.replicas(tp)) > 1
        ]
        moved, _ = self._changer.elect(led, self._changer.controlled_shutdown())
        followers = [
            tp
            for tp in on_broker
            if tp in ctx.states and ctx.states[tp].leader != broker_id and tp not in led
        ]
        shrunk, _ = self._changer.elect(followers, self._changer.remove_from_isr(broker_id))
        self._announce(moved + shrunk)
        if followers:
            self._channels.send(
                broker_id, _stop_replica(ctx.controller_epoch, followers, delete=False)
            )
        return [
            tp
            for tp in on_broker
            if ctx.states.get(tp) is not None
            and ctx.states[tp].leader == broker_id
            and len(ctx.replicas(tp)) > 1
        ]

    def preferred_election(
        self, partitions: Sequence[TopicPartition] | None, *, from_zk: bool = False
    ) -> dict[TopicPartition, ErrorCode]:
        ctx = self._ctx
        if from_zk:
            requested = self._store.get_preferred_election(watch=self._watches.preferred)
            if requested is None:
                return {}
            partitions = requested or None
        targets = list(partitions) if partitions is not None else ctx.all_partitions()
        results: dict[TopicPartition, ErrorCode] = {}
        valid: list[TopicPartition] = []
        for tp in targets:
            if tp not in ctx.states or tp[0] in ctx.topics_to_delete:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid.append(tp)
        self._refresh(valid)  # a leader may have changed the ISR since we cached it
        changed, failed = self._changer.elect(valid, self._changer.preferred())
        for s in changed:
            results[s.key] = ErrorCode.NONE
        for tp in failed:
            replicas = ctx.replicas(tp)
            already = bool(replicas) and ctx.states[tp].leader == replicas[0]
            results[tp] = (
                ErrorCode.ELECTION_NOT_NEEDED
                if already
                else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            )
        self._announce(changed)
        if from_zk:
            self._store.delete_preferred_election(ctx.epoch)  # type: ignore[arg-type]
        return results

    def auto_rebalance(self) -> None:
        """``auto.leader.rebalance.enable``: give leadership back to preferred replicas."""
        ctx = self._ctx
        eligible = ctx.eligible_ids()
        imbalanced = [
            tp
            for tp in ctx.all_partitions()
            if tp in ctx.states
            and tp[0] not in ctx.topics_to_delete
            and ctx.replicas(tp)
            and ctx.states[tp].leader != ctx.replicas(tp)[0]
            and ctx.replicas(tp)[0] in eligible
            and ctx.replicas(tp)[0] in ctx.states[tp].isr
        ]
        if imbalanced:
            changed, _ = self._changer.elect(imbalanced, self._changer.preferred())
            self._announce(changed)

    # -- requests to brokers --------------------------------------------------

    def _announce(self, changed: Sequence[PartitionState]) -> None:
        """LeaderAndIsr to the live replicas of changed partitions, UpdateMetadata to all."""
        if changed:
            self.send_leader_and_isr(changed)
            self.send_update_metadata(changed)

    def send_leader_and_isr(
        self, states: Sequence[PartitionState], *, to: Iterable[int] | None = None
    ) -> None:
        ctx = self._ctx
        only = set(to) if to is not None else None
        per_broker: dict[int, list[PartitionState]] = {}
        for s in states:
            for b in s.replicas:
                if b in ctx.live_brokers and (only is None or b in only):
                    per_broker.setdefault(b, []).append(s)
        for b, sts in per_broker.items():
            leaders = sorted(
                {s.leader for s in sts if s.leader != NO_LEADER and s.leader in ctx.live_brokers}
            )
            self._channels.send(
                b,
                _leader_and_isr(ctx.controller_epoch, sts, [ctx.live_brokers[x] for x in leaders]),
            )

    def send_update_metadata(
        self, states: Sequence[PartitionState], *, deleted_topics: Sequence[str] = ()
    ) -> None:
        ctx = self._ctx
        live = list(ctx.live_brokers.values())
        for b in ctx.live_brokers:
            self._channels.send(
                b, _update_metadata(ctx.controller_epoch, list(states), live, list(deleted_topics))
            )


def _leader_and_isr(
    epoch: int, states: list[PartitionState], leaders: list[BrokerRegistration]
) -> Request:
    def request(channel: ControllerChannel, broker: BrokerRegistration) -> None:
        channel.send_leader_and_isr(
            broker, controller_epoch=epoch, states=states, live_leaders=leaders
        )

    return request


def _stop_replica(epoch: int, tps: list[TopicPartition], *, delete: bool) -> Request:
    def request(channel: ControllerChannel, broker: BrokerRegistration) -> None:
        channel.send_stop_replica(broker, controller_epoch=epoch, partitions=tps, delete=delete)

    return request


def _update_metadata(
    epoch: int,
    states: list[PartitionState],
    live: list[BrokerRegistration],
    deleted: list[str],
) -> Request:
    def request(channel: ControllerChannel, broker: BrokerRegistration) -> None:
        channel.send_update_metadata(
            broker,
            controller_epoch=epoch,
            states=states,
            live_brokers=live,
            deleted_topics=deleted,
        )

    return request
