"""Draining: only the leaving brokers' replicas move, racks kept, impossible drains refused."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.client.reassignment import BrokerInfo, plan_drain
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit.client.reassignment._clusters import check_invariants, counts, placed, spread

TP = TopicPartition


def test_only_the_drained_brokers_replicas_move_evenly() -> None:
    brokers = [BrokerInfo(i) for i in range(4)]
    layout = placed(brokers, topics={"a": (8, 2)})
    held = sum(1 for ids in layout.values() if 3 in ids)
    plan = plan_drain(layout, brokers=brokers, drain=[3], sizes={tp: 7 for tp in layout})
    check_invariants(plan, targets=brokers[:3], racks={})
    assert all(3 not in ids for ids in plan.proposed.values())
    assert len(plan.moves) == held and all(m.source == 3 for m in plan.moves)
    assert plan.bytes_to_move == 7 * held
    for tp, ids in plan.proposed.items():
        if 3 not in layout[tp]:
            assert ids == layout[tp]
    assert spread(counts(plan.proposed, [0, 1, 2])) <= 1
    assert [b.broker_id for b in plan.before] == [b.broker_id for b in plan.after] == [0, 1, 2, 3]
    assert plan.after[3].replicas == 0 and plan.before[3].replicas == held


def test_a_drained_replica_stays_in_its_rack() -> None:
    brokers = [BrokerInfo(i, f"r{i % 3}") for i in range(6)]
    layout = {TP("a", p): (0, 1, 2) for p in range(3)}
    plan = plan_drain(layout, brokers=brokers, drain=[0])
    assert all(ids[0] == 3 and ids[1:] == (1, 2) for ids in plan.proposed.values())


def test_a_leaving_preferred_leader_is_replaced_in_place() -> None:
    brokers = [BrokerInfo(i) for i in range(3)]
    plan = plan_drain({TP("a", 0): (2, 0)}, brokers=brokers, drain=[2])
    assert plan.proposed[TP("a", 0)] == (1, 0)
    assert plan.leader_changes == (TP("a", 0),)


def test_when_racks_run_out_the_most_racks_are_kept() -> None:
    brokers = [BrokerInfo(0, "a"), BrokerInfo(1, "b"), BrokerInfo(2, "c"), BrokerInfo(3, "a")]
    plan = plan_drain({TP("t", 0): (0, 1, 2)}, brokers=brokers, drain=[2])
    assert plan.proposed[TP("t", 0)] == (0, 1, 3)


def test_an_empty_broker_drains_to_an_empty_plan() -> None:
    brokers = [BrokerInfo(i) for i in range(3)]
    assert plan_drain({TP("a", 0): (0, 1)}, brokers=brokers, drain=[2]).empty


def test_impossible_drains_are_refused() -> None:
    brokers = [BrokerInfo(i) for i in range(3)]
    with pytest.raises(errors.InvalidReplicationFactorError, match="only 2 brokers would remain"):
        plan_drain({TP("a", 0): (0, 1, 2)}, brokers=brokers, drain=[2])
    with pytest.raises(errors.InvalidReplicationFactorError, match="every broker"):
        plan_drain({TP("a", 0): (0,)}, brokers=brokers, drain=[0, 1, 2])


@settings(max_examples=50, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=7),
    racks=st.sampled_from([0, 2, 3]),
    parts=st.integers(min_value=1, max_value=25),
    rf=st.integers(min_value=1, max_value=2),
    victim=st.integers(min_value=0, max_value=6),
    seed=st.integers(min_value=0, max_value=500),
)
def test_any_drain_keeps_the_invariants(
    n: int, racks: int, parts: int, rf: int, victim: int, seed: int
) -> None:
    brokers = [BrokerInfo(i, f"r{i % racks}" if racks else None) for i in range(n)]
    layout = placed(brokers, topics={"a": (parts, rf)}, seed=seed)
    victim %= n
    plan = plan_drain(layout, brokers=brokers, drain=[victim])
    rest = [b for b in brokers if b.broker_id != victim]
    check_invariants(plan, targets=rest, racks={b.broker_id: b.rack for b in brokers})
    assert all(m.source == victim for m in plan.moves)


def test_replicas_of_other_brokers_that_are_down_stay() -> None:
    live = [BrokerInfo(0), BrokerInfo(1), BrokerInfo(2)]  # broker 3 is down, not drained
    plan = plan_drain({TP("a", 0): (2, 3), TP("a", 1): (3, 0)}, brokers=live, drain=[2])
    assert plan.proposed[TP("a", 1)] == (3, 0)
    assert 2 not in plan.proposed[TP("a", 0)] and 3 in plan.proposed[TP("a", 0)]
