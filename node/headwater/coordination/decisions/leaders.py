"""Decisions that move leadership: controlled shutdown and preferred leader elections.

The two RPC-driven ones answer their caller after the executor has carried
out the result, from the view as it then is: :func:`remaining_leaderships`
for a controlled shutdown, :func:`preferred_election_errors` for an election.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from headwater import errors
from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import LeaderAndIsr
from headwater.coordination.partitions import (
    ControlledShutdownElection,
    Plan,
    PreferredElection,
    RemoveFromIsr,
)
from headwater.errors import ErrorCode
from headwater.values import TopicPartition

log = logging.getLogger(__name__)


def on_controlled_shutdown(
    ctx: ControllerContext, broker_id: int, broker_epoch: int
) -> r.ControllerResult:
    """A broker asks to stop: move its leaderships away and shrink it out of the ISRs.

    Raises BrokerNotAvailableError for an unregistered broker and
    StaleBrokerEpochError for an epoch other than the registered one (a
    negative epoch skips the check).  The broker is marked shutting down,
    the partitions it leads (with other replicas) elect a new leader, it
    leaves the ISR of those it follows, and it is told to stop following
    those (StopReplica without deletion).
    """
    reg = ctx.live_brokers.get(broker_id)
    if reg is None:
        raise errors.BrokerNotAvailableError(f"broker {broker_id} is not registered")
    if broker_epoch >= 0 and reg.epoch != broker_epoch:
        raise errors.StaleBrokerEpochError(
            f"broker {broker_id} epoch {broker_epoch} is stale (current {reg.epoch})"
        )
    plan = Plan(ctx)
    plan.add(r.SetShuttingDown(frozenset(ctx.shutting_down | {broker_id})))
    view = plan.view
    on_broker = view.partitions_on_broker(broker_id)
    led = [
        tp
        for tp in on_broker
        if tp in view.states and view.states[tp].leader == broker_id and len(view.replicas(tp)) > 1
    ]
    moved = plan.elect(
        led,
        ControlledShutdownElection(
            live=frozenset(view.live_ids()),
            shutting_down=frozenset(view.shutting_down),
            controller_epoch=view.controller_epoch,
        ),
    )
    followers = [
        tp
        for tp in on_broker
        if tp in ctx.states and ctx.states[tp].leader != broker_id and tp not in led
    ]
    shrunk = plan.elect(followers, RemoveFromIsr(broker_id, view.controller_epoch))
    if moved or shrunk:
        plan.add(r.Announce(tuple(moved + shrunk)))
    if followers:
        plan.add(r.SendStopReplica(broker_id, tuple(followers), delete=False))
    return plan.result()


def remaining_leaderships(ctx: ControllerContext, broker_id: int) -> list[TopicPartition]:
    """The controlled-shutdown answer: what ``broker_id`` still leads that has other replicas."""
    return [
        tp
        for tp in ctx.partitions_on_broker(broker_id)
        if tp in ctx.states and ctx.states[tp].leader == broker_id and len(ctx.replicas(tp)) > 1
    ]


def preferred_targets(
    ctx: ControllerContext, requested: Sequence[tuple[str, int]] | None
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """Split a request (None: every partition) into (known partitions, unknown ones).

    A partition is unknown when it has no state or its topic is being deleted.
    The executor re-reads the known ones' states before deciding: a leader
    may have changed the ISR since the controller cached it.
    """
    targets = (
        [TopicPartition(*tp) for tp in requested] if requested is not None else ctx.all_partitions()
    )
    valid = [tp for tp in targets if tp in ctx.states and tp[0] not in ctx.topics_to_delete]
    unknown = [tp for tp in targets if tp not in valid]
    return valid, unknown


def on_preferred_election(
    ctx: ControllerContext,
    valid: Sequence[TopicPartition],
    *,
    fresh: Mapping[TopicPartition, LeaderAndIsr],
    from_zk: bool,
) -> r.ControllerResult:
    """Elect the preferred replica of each ``valid`` partition where it can lead.

    ``fresh`` holds the states just re-read; ``from_zk``: the request came
    from ``/admin/preferred_replica_election``, which is deleted afterwards.
    """
    plan = Plan(ctx)
    if fresh:
        plan.add(r.LoadStates(dict(fresh)))
    view = plan.view
    changed = plan.elect(
        valid, PreferredElection(frozenset(view.eligible_ids()), view.controller_epoch)
    )
    if changed:
        plan.add(r.Announce(tuple(changed)))
    if from_zk:
        plan.add(r.DeletePreferredElection())
    return plan.result()


def preferred_election_errors(
    ctx: ControllerContext,
    valid: Sequence[TopicPartition],
    unknown: Sequence[TopicPartition],
    *,
    written: Collection[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """The per-partition answer once the election ran; ``written``: partitions whose state changed.

    NONE for an elected partition, ELECTION_NOT_NEEDED where the preferred
    replica already leads, PREFERRED_LEADER_NOT_AVAILABLE where it cannot
    lead, UNKNOWN_TOPIC_OR_PARTITION for unknown partitions.
    """
    out = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in unknown}
    for tp in valid:
        if tp in written:
            out[tp] = ErrorCode.NONE
            continue
        replicas = ctx.replicas(tp)
        state = ctx.states.get(tp)
        already = bool(replicas) and state is not None and state.leader == replicas[0]
        out[tp] = (
            ErrorCode.ELECTION_NOT_NEEDED if already else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        )
    return out


def imbalanced_partitions(ctx: ControllerContext) -> list[TopicPartition]:
    """Partitions led by a broker other than their preferred replica, which could lead.

    None at all while any partition is being reassigned: Kafka's controller (ZooKeeper
    mode, ``checkAndTriggerAutoLeaderRebalance``) runs the automatic election only when
    ``partitionsBeingReassigned`` is empty, so leadership is not moved about during a
    move, which elects the target's preferred leader itself when it completes.  An
    ElectLeaders request is not held back (Kafka's ``processReplicaLeaderElection``
    elects the first replica of a moving partition's full replica set if it can lead).
    """
    if ctx.reassignments:
        return []
    eligible = ctx.eligible_ids()
    out: list[TopicPartition] = []
    for tp in ctx.all_partitions():
        replicas = ctx.replicas(tp)
        state = ctx.states.get(tp)
        if (
            state is not None
            and tp[0] not in ctx.topics_to_delete
            and replicas
            and state.leader != replicas[0]
            and replicas[0] in eligible
            and replicas[0] in state.isr
        ):
            out.append(tp)
    return out


def on_auto_rebalance(ctx: ControllerContext) -> r.ControllerResult:
    """``auto.leader.rebalance.enable``: give leadership back to preferred replicas
    (nothing while a reassignment is in progress, see :func:`imbalanced_partitions`)."""
    imbalanced = imbalanced_partitions(ctx)
    if not imbalanced:
        return r.EMPTY
    plan = Plan(ctx)
    changed = plan.elect(
        imbalanced, PreferredElection(frozenset(ctx.eligible_ids()), ctx.controller_epoch)
    )
    if changed:
        plan.add(r.Announce(tuple(changed)))
    return plan.result()
