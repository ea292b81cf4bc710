"""Draining: every replica off the brokers that are not targets (decommissioning).

Cruise Control's ``remove_broker`` and Strimzi's ``remove-brokers`` mode do
this before a broker goes away: only the replicas on the leaving brokers
move, nothing else, so the data moved is exactly what the leaving brokers
hold.  Each replica goes to the target broker that keeps the rack rule
(:mod:`~headwater.client.reassignment.layout`) and holds the fewest replicas
(then bytes, then the lowest id), largest partitions first so the bytes
spread too.  When the rack rule cannot be kept (too few racks left), the
destination that keeps the most racks is taken; when no target is free (a
partition with as many replicas as there are targets), the drain is refused
before anything moves.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from headwater import errors
from headwater.client.reassignment.layout import Layout
from headwater.client.reassignment.model import Assignment, BrokerInfo, RebalancePlan
from headwater.values import TopicPartition


def move_off_non_targets(layout: Layout, *, only: Collection[int] | None = None) -> None:
    """Move each replica held by a non-target broker (of ``only``, if given) onto a target."""
    stranded = [
        (tp, b)
        for tp, ids in layout.replicas.items()
        for b in ids
        if b not in layout.target_set and (only is None or b in only)
    ]
    stranded.sort(key=lambda e: (-layout.sizes[e[0]], e[0].topic, e[0].partition, e[1]))
    for tp, source in stranded:
        free = [b for b in layout.targets if b not in layout.replicas[tp]]
        if not free:
            raise errors.InvalidReplicationFactorError(
                f"cannot move {tp}'s replica off broker {source}: it has "
                f"{len(layout.replicas[tp])} replicas and only {len(layout.targets)} "
                "brokers would remain"
            )
        ok = [b for b in free if layout.may_move(tp, source, b)]
        if ok:
            pick = min(ok, key=lambda b: (layout.count[b], layout.size[b], b))
        else:
            pick = min(
                free, key=lambda b: (-_racks_after(layout, tp, source, b), layout.count[b], b)
            )
        layout.move(tp, source, pick)


def _racks_after(layout: Layout, tp: TopicPartition, source: int, destination: int) -> int:
    return layout.rack_count([destination if x == source else x for x in layout.replicas[tp]])


def plan_drain(
    current: Assignment,
    *,
    brokers: Sequence[BrokerInfo],
    drain: Sequence[int],
    sizes: Mapping[TopicPartition, int] | None = None,
) -> RebalancePlan:
    """Move every replica off the ``drain`` brokers onto the rest of ``brokers``.

    ``brokers`` are the live brokers (with racks); ``sizes`` the bytes of each
    partition (missing: 0).  Nothing else moves (replicas on other brokers
    that are not in ``brokers``, e.g. one down for a restart, stay); the answer
    is empty if the drained brokers hold nothing.
    """
    leaving = set(drain)
    targets = [b for b in brokers if b.broker_id not in leaving]
    if not targets:
        raise errors.InvalidReplicationFactorError("cannot drain every broker of the cluster")
    layout = Layout(
        current,
        targets=targets,
        racks={b.broker_id: b.rack for b in brokers},
        sizes=sizes or {},
    )
    move_off_non_targets(layout, only=leaving)
    return layout.finish()
