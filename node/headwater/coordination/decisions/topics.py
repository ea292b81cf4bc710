"""Decisions on topics created or deleted, partitions added, and ISR change notifications.

Admin RPCs on any broker only write ZooKeeper (:mod:`headwater.coordination.admin`);
the controller sees the znodes through its watches, and these functions decide
what follows: initial leaders and LeaderAndIsr for new partitions, StopReplica
and the removal of the znodes for deleted topics, UpdateMetadata for ISR
changes that partition leaders made.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping, Sequence

from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import LeaderAndIsr, ReplicaReassignment
from headwater.coordination.partitions import Plan
from headwater.values import TopicPartition

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TopicSnapshot:
    """What ZooKeeper holds for one topic: its assignment, id and the partition states it has.

    ``topic_id`` is "" only for a topic whose znode has no id and could not be given one.
    """

    partitions: Mapping[int, tuple[int, ...]]
    states: Mapping[int, LeaderAndIsr] = dataclasses.field(default_factory=dict)
    reassignments: Mapping[int, ReplicaReassignment] = dataclasses.field(default_factory=dict)
    topic_id: str = ""


def topics_to_load(ctx: ControllerContext, topics: Collection[str]) -> list[str]:
    """Of the topics in ``/brokers/topics``, the ones the controller does not know yet."""
    return sorted(set(topics) - set(ctx.assignments))


def load_topic(plan: Plan, topic: str, snapshot: TopicSnapshot) -> None:
    """Add a topic read from ZooKeeper to the view (assignment, id and existing states)."""
    plan.add(r.AddPartitions(topic, dict(snapshot.partitions), snapshot.topic_id))
    for p, move in snapshot.reassignments.items():
        replicas = snapshot.partitions.get(p)
        if replicas is not None:
            plan.add(r.SetReassignment(TopicPartition(topic, p), replicas, move))
    if snapshot.states:
        plan.add(r.LoadStates({TopicPartition(topic, p): s for p, s in snapshot.states.items()}))


def on_topic_change(
    ctx: ControllerContext,
    topics: Collection[str],
    loaded: Mapping[str, TopicSnapshot],
) -> r.ControllerResult:
    """``/brokers/topics`` changed: forget topics gone, start the new ones.

    ``loaded`` holds the new topics that could be read (one deleted meanwhile
    is missing and is skipped).  Partitions of a new topic that have no state
    yet get an initial leader and ISR.
    """
    plan = Plan(ctx)
    plan.add(*(r.ForgetTopic(t) for t in sorted(set(ctx.assignments) - set(topics))))
    created: list[TopicPartition] = []
    for topic in topics_to_load(ctx, topics):
        snapshot = loaded.get(topic)
        if snapshot is None:
            continue
        load_topic(plan, topic, snapshot)
        view = plan.view
        new = [tp for tp in view.all_partitions() if tp[0] == topic and tp not in view.states]
        created += plan.initialize(new)
    if created:
        plan.add(r.Announce(tuple(created)))
    return plan.result()


def on_partition_modifications(
    ctx: ControllerContext, topic: str, partitions: Mapping[int, tuple[int, ...]] | None
) -> r.ControllerResult:
    """A topic's assignment changed (CreatePartitions): start the added partitions.

    ``partitions`` is the assignment now in ZooKeeper (None: the topic is
    gone).  Changes to existing partitions are the controller's own
    reassignment writes (:mod:`.reassignment`) and are ignored here.
    """
    if partitions is None or topic not in ctx.assignments or topic in ctx.topics_to_delete:
        return r.EMPTY
    current = ctx.assignments[topic]
    added = {p: tuple(reps) for p, reps in partitions.items() if p not in current}
    if not added:
        return r.EMPTY
    plan = Plan(ctx)
    plan.add(r.AddPartitions(topic, added))
    created = plan.initialize(TopicPartition(topic, p) for p in sorted(added))
    if created:
        plan.add(r.Announce(tuple(created)))
    return plan.result()


def unknown_deletions(ctx: ControllerContext, marked: Sequence[str]) -> list[str]:
    """Deletion markers for topics the controller does not know (the executor checks them)."""
    return [t for t in marked if t not in ctx.assignments]


def on_topic_deletion(
    ctx: ControllerContext,
    marked: Sequence[str],
    *,
    still_exists: Collection[str] = (),
) -> r.ControllerResult:
    """``/admin/delete_topics`` has ``marked``: delete each known topic, drop stale markers.

    ``still_exists`` lists the unknown marked topics whose assignment znode
    exists after all (created meanwhile; the topic watch will load them and a
    later deletion event will delete them); the marker of any other unknown
    topic is removed.  A known topic: first UpdateMetadata naming it as
    deleted, to every live broker, so that no broker serves its metadata while
    its logs are being deleted (Kafka's TopicDeletionManager does the same);
    then StopReplica (delete) to its live replicas, its znodes removed and the
    topic forgotten.  Each broker's requests are sent in order, so a broker's
    metadata cache never waits for its own log deletion.
    """
    plan = Plan(ctx)
    for topic in marked:
        view = plan.view
        if topic not in view.assignments:
            if topic not in still_exists:
                plan.add(r.RemoveDeletionMarker(topic))
            continue
        plan.add(r.MarkTopicDeleting(topic), r.SendUpdateMetadata((), deleted_topics=(topic,)))
        per_broker: dict[int, list[TopicPartition]] = {}
        for tp in view.all_partitions():
            if tp[0] == topic:
                for b in view.replicas(tp):
                    if b in view.live_brokers:
                        per_broker.setdefault(b, []).append(tp)
        for b, tps in per_broker.items():
            plan.add(r.SendStopReplica(b, tuple(tps), delete=True))
        plan.add(r.DeleteTopicZnodes(topic), r.ForgetTopic(topic))
    return plan.result()


def isr_refresh_targets(
    ctx: ControllerContext, notified: Collection[tuple[str, int]]
) -> list[TopicPartition]:
    """Of the partitions named by ISR change notifications, those whose topic is known, sorted."""
    return [TopicPartition(*tp) for tp in sorted(notified) if tp[0] in ctx.assignments]


def on_isr_change(
    ctx: ControllerContext,
    names: Sequence[str],
    fresh: Mapping[TopicPartition, LeaderAndIsr],
) -> r.ControllerResult:
    """Partition leaders changed ISRs: cache the fresh states, tell every broker, drop the notes.

    ``names`` are the notification znodes read; ``fresh`` the states re-read
    for :func:`isr_refresh_targets` (a partition whose state vanished is
    missing).
    """
    if not names:
        return r.EMPTY
    refreshed = tuple(tp for tp in fresh if tp[0] in ctx.assignments)
    plan = Plan(ctx)
    if refreshed:
        plan.add(r.LoadStates({tp: fresh[tp] for tp in refreshed}))
    plan.add(r.SendUpdateMetadata(refreshed), r.DeleteIsrChangeNotifications(tuple(names)))
    return plan.result()
