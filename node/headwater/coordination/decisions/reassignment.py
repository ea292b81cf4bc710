"""Partition reassignment decisions (KIP-455, Kafka's ZooKeeper-mode controller).

A move of partition P from its original replicas (ORS) to target replicas
(TRS) goes, as in Kafka's ``KafkaController.onPartitionReassignment``:

1. **start** (:func:`on_alter_reassignments`): the replica set becomes
   RS = TRS + (ORS - TRS) (target order first, so the preferred replica is
   TRS[0]); adding AR = TRS - ORS and removing RR = ORS - TRS are written to the
   topic's assignment znode; the leader epoch is bumped and LeaderAndIsr goes
   to every replica of RS, so the new replicas start fetching;
2. **catch-up**: the leader adds each new replica to the ISR once it has caught
   up (an ISR change notification reaches the controller);
3. **completion** (:func:`on_reassignment_progress`), once TRS is inside the
   ISR: if the leader is leaving, a new leader is elected from TRS; the ISR
   shrinks to TRS; the removed replicas get StopReplica with deletion; RS = TRS
   is written with AR and RR cleared.

Cancelling (a None target) is Kafka's: a reassignment back to the original
replicas (RS - AR), which completes at once when they are all in sync; the
replicas that were being added are stopped and deleted.  A new target for a
partition already moving replaces the old one the same way (Kafka's
``reassignTo``), stopping added replicas no longer wanted.

The znode is the truth: a new controller loads AR/RR with the assignment
and resumes (:func:`on_failover_resume`).  Completion is
idempotent: if a controller dies between the state write and the assignment
write, its successor completes again.

Pure: nothing here reads ZooKeeper, a clock or the network.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence

from headwater import errors
from headwater.coordination import results as r
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import NO_LEADER, LeaderAndIsr, ReplicaReassignment
from headwater.coordination.partitions import Plan
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

Target = tuple[int, ...] | None
"""A requested replica list (preferred leader first), or None to cancel."""


@dataclasses.dataclass(frozen=True)
class ReassignmentElection:
    """Keep the partition on ``keep``: bump the leader epoch, shrink the ISR to ``keep``.

    The leader stays if it is in ``keep``, live and in the ISR; otherwise the
    first replica of ``keep`` (in order) that is live and in the ISR leads
    (Kafka's ``reassignPartitionLeaderElection``); with none, the partition is
    left leaderless with the ISR it had inside ``keep`` (or its old ISR, if
    none of it is kept, so that the replicas that have every committed record
    stay known).  Always returns a new state: the bumped epoch is what tells
    replicas that their replica set changed.
    """

    keep: tuple[int, ...]
    live: frozenset[int]
    controller_epoch: int

    def decide(self, replicas: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None:
        isr = [b for b in current.isr if b in self.keep] or list(current.isr)
        if current.leader in self.keep and current.leader in self.live and current.leader in isr:
            leader = current.leader
        else:
            leader = next((b for b in self.keep if b in self.live and b in current.isr), NO_LEADER)
        return dataclasses.replace(
            current.new_leader(leader, isr), controller_epoch=self.controller_epoch
        )


def reassign_to(
    replicas: Sequence[int], current: ReplicaReassignment | None, target: Sequence[int]
) -> tuple[tuple[int, ...], ReplicaReassignment]:
    """Kafka's ``ReplicaAssignment.reassignTo``: the replica set and move for ``target``.

    The origin is the replica set before any move in progress (RS - AR);
    RS = target + (origin - target); AR = RS - origin; RR = RS - target.
    """
    origin = current.origin(replicas) if current is not None else tuple(replicas)
    full = tuple(dict.fromkeys((*target, *origin)))
    return full, ReplicaReassignment(
        adding=tuple(b for b in full if b not in origin),
        removing=tuple(b for b in full if b not in target),
    )


def validate(
    ctx: ControllerContext, tp: TopicPartition, target: Target
) -> errors.HeadwaterError | None:
    """Why the controller refuses to move ``tp`` to ``target`` (None: it accepts).

    Kafka's checks and errors: an unknown partition (or one of a topic being
    deleted) is UNKNOWN_TOPIC_OR_PARTITION; cancelling a partition that is not
    moving is NO_REASSIGNMENT_IN_PROGRESS; an empty list, a duplicate broker
    or a broker that is not alive is INVALID_REPLICA_ASSIGNMENT.
    """
    if tp[1] not in ctx.assignments.get(tp[0], {}) or tp[0] in ctx.topics_to_delete:
        return errors.UnknownTopicOrPartitionError(f"partition {tp[0]}-{tp[1]} does not exist")
    if target is None:
        if tp not in ctx.reassignments:
            return errors.NoReassignmentInProgressError(
                f"no partition reassignment is in progress for {tp[0]}-{tp[1]}"
            )
        return None
    if not target:
        return errors.InvalidReplicaAssignmentError(
            f"empty replica list specified in partition reassignment of {tp[0]}-{tp[1]}"
        )
    if len(set(target)) != len(target):
        return errors.InvalidReplicaAssignmentError(
            f"duplicate replica ids in partition reassignment replica list: {list(target)}"
        )
    dead = [b for b in target if b not in ctx.live_brokers]
    if dead:
        return errors.InvalidReplicaAssignmentError(
            f"replica assignment has brokers that are not alive: {dead}; replica list"
            f" {list(target)}, live brokers {sorted(ctx.live_brokers)}"
        )
    return None


def on_alter_reassignments(
    ctx: ControllerContext, requested: Mapping[TopicPartition, Target]
) -> tuple[r.ControllerResult, dict[TopicPartition, errors.HeadwaterError | None]]:
    """AlterPartitionReassignments: start, replace or cancel each valid move.

    Returns the result and each partition's answer; a refused partition
    changes nothing (the others go ahead, as in Kafka).
    """
    plan = Plan(ctx)
    answers: dict[TopicPartition, errors.HeadwaterError | None] = {}
    for tp, target in requested.items():
        tp = TopicPartition(*tp)
        error = validate(plan.view, tp, target)
        answers[tp] = error
        if error is not None:
            continue
        view = plan.view
        replicas = view.replicas(tp)
        moving = view.reassignments.get(tp)
        wanted = target if target is not None else moving.origin(replicas)  # type: ignore[union-attr]
        full, move = reassign_to(replicas, moving, wanted)
        log.info(
            "%s %s-%d: replicas %s -> %s (adding %s, removing %s)",
            "cancelling" if target is None else "reassigning",
            *tp,
            list(replicas),
            list(wanted),
            list(move.adding),
            list(move.removing),
        )
        _start(plan, tp, full, move)
    _complete(plan, list(answers))
    return plan.result(), answers


def on_reassignment_progress(
    ctx: ControllerContext, tps: Iterable[TopicPartition] | None = None
) -> r.ControllerResult:
    """Complete the moves of ``tps`` (None: all moving) whose target replicas are all in sync.

    Called after ISR changes, broker changes and on failover, with the states
    freshly loaded into ``ctx``.
    """
    plan = Plan(ctx)
    candidates = (
        list(ctx.reassignments) if tps is None else [tp for tp in tps if tp in ctx.reassignments]
    )
    _complete(plan, sorted(candidates))
    return plan.result()


def on_failover_resume(ctx: ControllerContext) -> r.ControllerResult:
    """A new controller found moves in ZooKeeper: complete those in sync, restart the others.

    Kafka's failover re-runs ``onPartitionReassignment`` for each: a move not
    yet in sync gets its leader epoch bumped and LeaderAndIsr sent again to
    every replica, so a leader that never heard of the new replica set (its
    controller died between the znode write and the state write) learns it;
    a leader ignores a LeaderAndIsr of its own epoch.
    """
    plan = Plan(ctx)
    for tp in sorted(ctx.reassignments):
        view = plan.view
        if is_complete(view, tp) or tp not in view.states:
            continue
        replicas = view.replicas(tp)
        how = ReassignmentElection(replicas, frozenset(view.eligible_ids()), view.controller_epoch)
        if plan.elect([tp], how):
            plan.add(r.Announce((tp,)))
    _complete(plan, sorted(ctx.reassignments))
    return plan.result()


def completed(before: ControllerContext, after: ControllerContext) -> list[TopicPartition]:
    """The partitions that were moving in ``before`` and are not in ``after``."""
    return sorted(tp for tp in before.reassignments if tp not in after.reassignments)


def is_complete(ctx: ControllerContext, tp: TopicPartition) -> bool:
    """Kafka's ``isReassignmentComplete``: every target replica is in the ISR."""
    move = ctx.reassignments.get(tp)
    state = ctx.states.get(tp)
    if state is None:
        return False
    target = move.target(ctx.replicas(tp)) if move is not None else ctx.replicas(tp)
    return all(b in state.isr for b in target)


def _start(
    plan: Plan, tp: TopicPartition, full: tuple[int, ...], move: ReplicaReassignment
) -> None:
    """Write RS/AR/RR, bump the leader epoch (ISR inside RS), tell RS; stop unneeded replicas."""
    view = plan.view
    previous = view.replicas(tp)
    unneeded = [b for b in previous if b not in full]
    moving: ReplicaReassignment | None = move if (move.adding or move.removing) else None
    plan.add(r.SetReassignment(tp, full, moving), r.WriteReassignment(tp, full, moving))
    if tp in view.states:
        how = ReassignmentElection(full, frozenset(view.eligible_ids()), view.controller_epoch)
        if plan.elect([tp], how):
            plan.add(r.Announce((tp,)))
    for b in unneeded:
        if b in view.live_brokers:
            plan.add(r.SendStopReplica(b, (tp,), delete=True))


def _complete(plan: Plan, tps: Sequence[TopicPartition]) -> list[TopicPartition]:
    """Finish the moves of ``tps`` whose target is in sync; returns those finished."""
    done: list[TopicPartition] = []
    for tp in tps:
        view = plan.view
        move = view.reassignments.get(tp)
        if move is None or not is_complete(view, tp):
            continue
        replicas = view.replicas(tp)
        target = move.target(replicas)
        plan.add(r.SetReassignment(tp, target, None))
        how = ReassignmentElection(target, frozenset(view.eligible_ids()), view.controller_epoch)
        if plan.elect([tp], how):
            plan.add(r.Announce((tp,)))
        for b in move.removing:
            if b in view.live_brokers:
                plan.add(r.SendStopReplica(b, (tp,), delete=True))
        plan.add(r.WriteReassignment(tp, target, None))
        log.info("reassignment of %s-%d completed: replicas %s", *tp, list(target))
        done.append(tp)
    return done


def moving_topics(ctx: ControllerContext) -> set[str]:
    """Topics with a partition being moved (their deletion waits, as in Kafka)."""
    return {tp[0] for tp in ctx.reassignments}


@dataclasses.dataclass(frozen=True)
class PartitionReassignment:
    """ListPartitionReassignments' answer for one partition."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def list_reassignments(
    assignments: Mapping[str, Mapping[int, tuple[int, ...]]],
    moving: Mapping[TopicPartition, ReplicaReassignment],
    wanted: Collection[TopicPartition] | None = None,
) -> dict[TopicPartition, PartitionReassignment]:
    """The partitions being moved (of ``wanted``, if given; unknown ones are left out)."""
    out: dict[TopicPartition, PartitionReassignment] = {}
    for tp, move in sorted(moving.items()):
        if wanted is not None and tp not in wanted:
            continue
        replicas = assignments.get(tp[0], {}).get(tp[1])
        if replicas is None:
            continue
        out[tp] = PartitionReassignment(tuple(replicas), move.adding, move.removing)
    return out
