"""Helpers building cluster layouts for the planner tests."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from headwater.client.reassignment import BrokerInfo, RebalancePlan
from headwater.client.reassignment.generate import assign_replicas
from headwater.values import TopicPartition

Layout = dict[TopicPartition, tuple[int, ...]]


def placed(
    brokers: Sequence[BrokerInfo], *, topics: Mapping[str, tuple[int, int]], seed: int = 0
) -> Layout:
    """Topics ``{name: (partitions, rf)}`` placed as the controller places them."""
    rng = random.Random(seed)
    out: Layout = {}
    for name, (n, rf) in topics.items():
        for p, r in assign_replicas(
            brokers, num_partitions=n, replication_factor=rf, rng=rng
        ).items():
            out[TopicPartition(name, p)] = r
    return out


def counts(layout: Layout, brokers: Sequence[int]) -> dict[int, int]:
    out = dict.fromkeys(brokers, 0)
    for ids in layout.values():
        for b in ids:
            out[b] = out.get(b, 0) + 1
    return out


def leaders(layout: Layout, brokers: Sequence[int]) -> dict[int, int]:
    out = dict.fromkeys(brokers, 0)
    for ids in layout.values():
        out[ids[0]] = out.get(ids[0], 0) + 1
    return out


def spread(values: Mapping[int, int]) -> int:
    return max(values.values()) - min(values.values())


def check_invariants(
    plan: RebalancePlan, *, targets: Sequence[BrokerInfo], racks: Mapping[int, str | None]
) -> None:
    """What every plan must hold, whatever the input."""
    ids = {b.broker_id for b in targets}
    target_racks = len({b.rack for b in targets})
    assert plan.proposed.keys() == plan.current.keys()
    for tp, after in plan.proposed.items():
        before = plan.current[tp]
        assert len(after) == len(before), tp
        assert len(set(after)) == len(after), tp
        assert set(after) <= ids, tp
        racks_before = len({racks.get(b) for b in before})
        racks_after = len({racks.get(b) for b in after})
        assert racks_after >= min(racks_before, len(after), target_racks), tp
    moved = sum(len(set(plan.proposed[tp]) - set(plan.current[tp])) for tp in plan.proposed)
    assert moved == len(plan.moves)
    for m in plan.moves:
        assert m.source in plan.current[m.tp] and m.source not in plan.proposed[m.tp]
        assert m.destination in plan.proposed[m.tp] and m.destination not in plan.current[m.tp]
