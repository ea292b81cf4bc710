"""The rebalance planner: even replicas, bytes and preferred leaders, moving little data.

A greedy planner in the spirit of Cruise Control's goals, in priority order,
each goal kept by the later ones:

1. **Every replica on a target broker.**  Replicas on brokers that are not
   targets (left out, or gone) are moved off first (:mod:`.drain`).
2. **Replica counts.**  While the most and least loaded targets differ by more
   than one replica, move the *smallest* replica of a most loaded broker that
   may go (rack rule, not already there) to the least loaded broker that can
   take it.  Each move lowers the spread, so the number of moves is the least
   that evens the counts (the sum of the excess over the ceiling).
3. **Bytes.**  While a broker's bytes are outside ``mean * (1 ± tolerance)``,
   take the most and least loaded pair that a single move (to a broker with
   fewer replicas) or a swap of two replicas brings closer, and apply the
   candidate that leaves the pair's larger side smallest (then moves the
   fewest bytes).  Each step strictly shrinks the pair's gap, so this ends.
   Goals 2 and 3 alternate until neither finds a move.
4. **Preferred leaders.**  Reorder replica lists (no data moves) so that each
   target is the first replica of about as many partitions as any other.

The rack rule of :mod:`.layout` holds for every move.  A cluster already
balanced by these rules gets an empty plan (the planner is idempotent), and
all choices break ties by broker id and partition, so a plan is reproducible.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from headwater.client.reassignment.drain import move_off_non_targets
from headwater.client.reassignment.layout import Layout
from headwater.client.reassignment.model import Assignment, BrokerInfo, RebalancePlan
from headwater.values import TopicPartition


class RebalanceGoals(NamedTuple):
    """Which goals the planner pursues, and how far."""

    replicas: bool = True
    """Even the replica counts (within one)."""
    bytes_tolerance: float | None = 0.10
    """Even the bytes until every broker is within this fraction of the mean (None: off)."""
    leaders: bool = True
    """Even the preferred leaderships (within one), by reordering replica lists."""
    max_steps: int = 100_000
    """A bound on greedy steps per goal (never reached in practice; keeps loops finite)."""


def plan_rebalance(
    current: Assignment,
    *,
    brokers: Sequence[BrokerInfo],
    sizes: Mapping[TopicPartition, int] | None = None,
    goals: RebalanceGoals | None = None,
) -> RebalancePlan:
    """Plan the moves that balance ``current`` over ``brokers`` (the targets).

    ``sizes`` gives each partition's bytes (missing: 0).  Replicas on brokers
    not in ``brokers`` are moved onto them.
    """
    if not brokers:
        raise ValueError("a rebalance needs at least one target broker")
    goals = goals or RebalanceGoals()
    layout = Layout(
        current, targets=brokers, racks={b.broker_id: b.rack for b in brokers}, sizes=sizes or {}
    )
    move_off_non_targets(layout)
    # Goals 2 and 3 alternate until neither moves anything, so a second run finds
    # nothing to do.  This ends: a count move lowers the sum of squared counts, a
    # bytes move never raises it and lowers the sum of squared bytes.
    for _ in range(goals.max_steps):
        moved = goals.replicas and _even_counts(layout, max_steps=goals.max_steps)
        if goals.bytes_tolerance is not None and _even_bytes(
            layout, tolerance=goals.bytes_tolerance, max_steps=goals.max_steps
        ):
            moved = goals.replicas
        if not moved:
            break
    if goals.leaders:
        _even_leaders(layout, max_steps=goals.max_steps)
    return layout.finish()


def _spread(values: Mapping[int, int], keys: Sequence[int]) -> int:
    vs = [values[k] for k in keys]
    return max(vs) - min(vs)


def _by_partition(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def _even_counts(layout: Layout, *, max_steps: int) -> bool:
    """Goal 2; True if it moved anything."""
    moved = False
    for _ in range(max_steps):
        targets = layout.targets
        if _spread(layout.count, targets) <= 1:
            return moved
        best: tuple[int, TopicPartition, int, int] | None = None
        for src in sorted(targets, key=lambda b: (-layout.count[b], b)):
            dsts = [d for d in targets if layout.count[d] < layout.count[src] - 1]
            dsts.sort(key=lambda b: (layout.count[b], layout.size[b], b))
            for tp in sorted(layout.held[src], key=lambda t: (layout.sizes[t], _by_partition(t))):
                dst = next((d for d in dsts if layout.may_move(tp, src, d)), None)
                if dst is not None:
                    best = (src, tp, dst, 0)
                    break
            if best is not None:
                break
        if best is None:
            return moved
        src, tp, dst, _ = best
        layout.move(tp, src, dst)
        moved = True
    return moved


class _Candidate(NamedTuple):
    worse_side: int
    moved: int
    order: tuple[str, int, str, int]
    give: TopicPartition
    take: TopicPartition | None


def _even_bytes(layout: Layout, *, tolerance: float, max_steps: int) -> bool:
    """Goal 3; True if it moved anything."""
    targets = layout.targets
    total = sum(layout.size[b] for b in targets)
    moved = False
    if total <= 0 or len(targets) < 2:
        return moved
    mean = total / len(targets)
    high, low = mean * (1 + tolerance), mean * (1 - tolerance)
    for _ in range(max_steps):
        pairs = [
            (s, d)
            for s, d in itertools.permutations(targets, 2)
            if layout.size[s] > layout.size[d] and (layout.size[s] > high or layout.size[d] < low)
        ]
        pairs.sort(key=lambda p: (-(layout.size[p[0]] - layout.size[p[1]]), p))
        step = None
        for src, dst in pairs:
            step = _best_exchange(layout, src, dst)
            if step is not None:
                layout.move(step.give, src, dst)
                if step.take is not None:
                    layout.move(step.take, dst, src)
                moved = True
                break
        if step is None:
            return moved
    return moved


def _best_exchange(layout: Layout, src: int, dst: int) -> _Candidate | None:
    """The single move src→dst or swap that best narrows the pair's byte gap.

    A single move only goes to a broker with fewer replicas (so it never
    raises the sum of squared counts); a swap keeps both counts.  The best
    exchange moves a net ``gap / 2``: single moves and, for each replica given,
    the replicas taken back are searched by size (bisection) for the nearest
    to that, so a step costs O(n log n), not O(n²).  The nearest to the middle
    of the open interval (0, gap) lies in it whenever any candidate does, so
    "no candidate" is exact and the planner's stop (and idempotence) with it.
    """
    gap = layout.size[src] - layout.size[dst]
    best: _Candidate | None = None

    def by_size(tp: TopicPartition) -> tuple[int, str, int]:
        return (layout.sizes[tp], *_by_partition(tp))

    def consider(give: TopicPartition, take: TopicPartition | None) -> None:
        nonlocal best
        net = layout.sizes[give] - (layout.sizes[take] if take is not None else 0)
        if not 0 < net < gap:
            return
        worse = max(layout.size[src] - net, layout.size[dst] + net)
        moved = layout.sizes[give] + (layout.sizes[take] if take is not None else 0)
        order = (*_by_partition(give), *(_by_partition(take) if take else ("", -1)))
        cand = _Candidate(worse, moved, order, give, take)
        if best is None or cand[:3] < best[:3]:
            best = cand

    half = gap / 2
    gives = sorted((tp for tp in layout.held[src] if layout.may_move(tp, src, dst)), key=by_size)
    if layout.count[dst] < layout.count[src]:
        for give in _nearest(gives, half, layout.sizes):
            consider(give, None)
    takes = sorted((tp for tp in layout.held[dst] if layout.may_move(tp, dst, src)), key=by_size)
    take_sizes = [layout.sizes[tp] for tp in takes]
    for give in gives:
        for take in _nearest(takes, layout.sizes[give] - half, layout.sizes, take_sizes):
            if take != give:
                consider(give, take)
    return best


def _nearest(
    items: list[TopicPartition],
    ideal: float,
    sizes: Mapping[TopicPartition, int],
    item_sizes: list[int] | None = None,
) -> list[TopicPartition]:
    """The entries of ``items`` (sorted by size) just below and at-or-above ``ideal``."""
    keys = item_sizes if item_sizes is not None else [sizes[tp] for tp in items]
    j = bisect.bisect_left(keys, ideal)
    return [items[k] for k in (j - 1, j) if 0 <= k < len(items)]


def _even_leaders(layout: Layout, *, max_steps: int) -> None:
    targets = layout.targets
    for _ in range(max_steps):
        if _spread(layout.leaders, targets) <= 1:
            return
        done = False
        for src in sorted(targets, key=lambda b: (-layout.leaders[b], b)):
            led = sorted(
                (tp for tp in layout.held[src] if layout.replicas[tp][0] == src),
                key=_by_partition,
            )
            for tp in led:
                others = [
                    b
                    for b in layout.replicas[tp][1:]
                    if b in layout.target_set and layout.leaders[b] < layout.leaders[src] - 1
                ]
                if others:
                    layout.make_leader(tp, min(others, key=lambda b: (layout.leaders[b], b)))
                    done = True
                    break
            if done:
                break
        if not done:
            return
