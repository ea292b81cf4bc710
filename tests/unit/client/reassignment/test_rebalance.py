"""The rebalance planner: balanced results, racks kept, few moves, idempotent."""

from __future__ import annotations

import random

import pytest
from headwater.client.reassignment import BrokerInfo, RebalanceGoals, plan_rebalance
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.client.reassignment._clusters import (
    check_invariants,
    counts,
    leaders,
    placed,
    spread,
)

TP = TopicPartition


def _brokers(n: int, racks: int = 0) -> list[BrokerInfo]:
    return [BrokerInfo(i, f"r{i % racks}" if racks else None) for i in range(n)]


def _racks(brokers: list[BrokerInfo]) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in brokers}


def test_a_new_empty_broker_gets_its_share_with_the_fewest_moves() -> None:
    old = _brokers(3)
    layout = placed(old, topics={"a": (6, 2)})  # 12 replicas, 4 per broker
    new = [*old, BrokerInfo(3)]
    plan = plan_rebalance(layout, brokers=new)
    check_invariants(plan, targets=new, racks=_racks(new))
    after = counts(plan.proposed, [0, 1, 2, 3])
    assert after == {0: 3, 1: 3, 2: 3, 3: 3}
    assert len(plan.moves) == 3  # exactly the excess
    assert {m.destination for m in plan.moves} == {3}
    assert spread(leaders(plan.proposed, [0, 1, 2, 3])) <= 1


def test_moves_the_smallest_replicas_when_counts_are_all_that_matter() -> None:
    layout = {TP("a", 0): (0,), TP("a", 1): (0,), TP("a", 2): (0,), TP("a", 3): (1,)}
    sizes = {TP("a", 0): 500, TP("a", 1): 10, TP("a", 2): 700, TP("a", 3): 0}
    plan = plan_rebalance(
        layout,
        brokers=_brokers(2),
        sizes=sizes,
        goals=RebalanceGoals(bytes_tolerance=None),
    )
    assert [(m.tp, m.size_bytes) for m in plan.moves] == [(TP("a", 1), 10)]
    assert plan.bytes_to_move == 10


def test_bytes_are_evened_within_the_tolerance() -> None:
    brokers = _brokers(2)
    layout = {TP("a", p): (p % 2,) for p in range(8)}
    # broker 0 holds 4 x 100, broker 1 holds 4 x 10: counts even, bytes not.
    sizes = {TP("a", p): 100 if p % 2 == 0 else 10 for p in range(8)}
    plan = plan_rebalance(layout, brokers=brokers, sizes=sizes)
    check_invariants(plan, targets=brokers, racks=_racks(brokers))
    after = {b.broker_id: b.size_bytes for b in plan.after}
    assert counts(plan.proposed, [0, 1]) == {0: 4, 1: 4}
    assert abs(after[0] - after[1]) <= 0.2 * (sum(after.values()) / 2)
    assert plan.bytes_to_move <= 220  # one swap of a 100 and a 10


def test_rack_diversity_is_kept() -> None:
    brokers = _brokers(6, racks=3)  # r0: 0,3  r1: 1,4  r2: 2,5
    layout = {TP("a", p): (0, 1, 2) for p in range(6)}
    plan = plan_rebalance(layout, brokers=brokers)
    check_invariants(plan, targets=brokers, racks=_racks(brokers))
    for ids in plan.proposed.values():
        assert len({b % 3 for b in ids}) == 3
    assert spread(counts(plan.proposed, list(range(6)))) <= 1
    assert spread(leaders(plan.proposed, list(range(6)))) <= 1


def test_a_balanced_cluster_gets_an_empty_plan() -> None:
    brokers = _brokers(4)
    layout = {TP("a", p): (p % 4, (p + 1) % 4) for p in range(8)}
    plan = plan_rebalance(layout, brokers=brokers, sizes={tp: 100 for tp in layout})
    assert plan.empty and not plan.moves and not plan.leader_changes
    assert plan.proposed == layout


def test_leaders_are_evened_by_reordering_only() -> None:
    brokers = _brokers(3)
    layout = {TP("a", p): (0, 1, 2) for p in range(6)}
    plan = plan_rebalance(layout, brokers=brokers)
    assert not plan.moves and plan.bytes_to_move == 0
    assert leaders(plan.proposed, [0, 1, 2]) == {0: 2, 1: 2, 2: 2}
    assert set(plan.changed) == set(plan.leader_changes)


def test_replicas_on_brokers_left_out_are_moved_onto_the_targets() -> None:
    layout = {TP("a", p): (p % 4, (p + 1) % 4) for p in range(8)}
    targets = _brokers(3)
    plan = plan_rebalance(layout, brokers=targets)
    check_invariants(plan, targets=targets, racks=_racks(targets))
    assert all(3 not in ids for ids in plan.proposed.values())
    assert spread(counts(plan.proposed, [0, 1, 2])) <= 1


def test_a_single_target_broker_is_accepted_and_no_target_is_not() -> None:
    layout = {TP("a", 0): (0,)}
    assert plan_rebalance(layout, brokers=[BrokerInfo(0)]).empty
    with pytest.raises(ValueError, match="target"):
        plan_rebalance(layout, brokers=[])


@settings(max_examples=60, deadline=None)
@given(
    n_brokers=st.integers(min_value=3, max_value=7),
    n_racks=st.sampled_from([0, 2, 3]),
    partitions=st.integers(min_value=1, max_value=30),
    rf=st.integers(min_value=1, max_value=3),
    extra=st.integers(min_value=0, max_value=2),
    seed=st.integers(min_value=0, max_value=1000),
)
def test_any_layout_is_balanced_and_a_second_run_changes_nothing(
    n_brokers: int, n_racks: int, partitions: int, rf: int, extra: int, seed: int
) -> None:
    old = _brokers(n_brokers, n_racks)
    layout = placed(old, topics={"a": (partitions, rf), "b": (partitions // 2 + 1, rf)}, seed=seed)
    rng = random.Random(seed)
    sizes = {tp: rng.randrange(0, 10_000) for tp in layout}
    new = _brokers(n_brokers + extra, n_racks)
    plan = plan_rebalance(layout, brokers=new, sizes=sizes)
    check_invariants(plan, targets=new, racks=_racks(new))
    if not n_racks:
        assert spread(counts(plan.proposed, [b.broker_id for b in new])) <= 1
    again = plan_rebalance(plan.proposed, brokers=new, sizes=sizes)
    assert again.empty, again.changed


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(min_value=0, max_value=10_000), racks=st.sampled_from([0, 2, 3]))
def test_the_bisected_exchange_finds_the_best_gap_a_full_search_finds(
    seed: int, racks: int
) -> None:
    from headwater.client.reassignment.layout import Layout
    from headwater.client.reassignment.rebalance import _best_exchange

    rng = random.Random(seed)
    brokers = _brokers(rng.randint(2, 6), racks)
    layout_in = placed(brokers, topics={"a": (rng.randint(1, 30), rng.randint(1, 2))}, seed=seed)
    sizes = {tp: rng.choice([0, 5, rng.randrange(1, 1000)]) for tp in layout_in}
    layout = Layout(layout_in, targets=brokers, racks=_racks(brokers), sizes=sizes)
    for src in layout.targets:
        for dst in layout.targets:
            gap = layout.size[src] - layout.size[dst]
            if src == dst or gap <= 0:
                continue
            options = [
                layout.sizes[g] - (layout.sizes[t] if t is not None else 0)
                for g in layout.held[src]
                if layout.may_move(g, src, dst)
                for t in [
                    *([None] if layout.count[dst] < layout.count[src] else []),
                    *(t for t in layout.held[dst] if layout.may_move(t, dst, src)),
                ]
            ]
            worst = [
                max(layout.size[src] - n, layout.size[dst] + n) for n in options if 0 < n < gap
            ]
            found = _best_exchange(layout, src, dst)
            assert (found is None) == (not worst)
            if found is not None:
                assert found.worse_side == min(worst)
