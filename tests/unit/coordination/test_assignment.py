"""Replica assignment (Kafka's assignReplicasToBrokers): exact layouts for fixed starts,
balance of replicas and leaders, rack-awareness, errors, and manual assignment checks."""

from __future__ import annotations

import collections
import random

import pytest
from headwater import errors
from headwater.coordination.assignment import (
    assign_replicas,
    rack_alternated_brokers,
    validate_manual_assignment,
)
from headwater.coordination.model import BrokerRegistration


def _brokers(n: int, racks: str | None = None) -> list[BrokerRegistration]:
    return [
        BrokerRegistration(i, "h", 1, rack=(racks[i % len(racks)] if racks else None))
        for i in range(n)
    ]


def test_kafka_layout_with_fixed_start() -> None:
    # Kafka's AdminUtils doc example: 5 brokers, 10 partitions, RF 3, start index 0.
    out = assign_replicas(
        _brokers(5),
        num_partitions=10,
        replication_factor=3,
        rng=random.Random(0),
        fixed_start_index=0,
    )
    assert out[0] == (0, 1, 2)
    assert out[4] == (4, 0, 1)
    assert out[5] == (0, 2, 3)
    assert out[9] == (4, 1, 2)


@pytest.mark.parametrize("seed", range(5))
def test_balanced_replicas_and_leaders(seed: int) -> None:
    out = assign_replicas(
        _brokers(4), num_partitions=12, replication_factor=3, rng=random.Random(seed)
    )
    assert sorted(out) == list(range(12))
    assert all(len(set(r)) == 3 for r in out.values())
    leaders = collections.Counter(r[0] for r in out.values())
    replicas = collections.Counter(b for r in out.values() for b in r)
    assert set(leaders.values()) == {3}
    assert set(replicas.values()) == {9}


@pytest.mark.parametrize("seed", range(5))
def test_rack_aware_puts_replicas_on_distinct_racks(seed: int) -> None:
    brokers = _brokers(6, racks="abc")
    rack = {b.broker_id: b.rack for b in brokers}
    out = assign_replicas(brokers, num_partitions=12, replication_factor=3, rng=random.Random(seed))
    for replicas in out.values():
        assert len({rack[b] for b in replicas}) == 3
    assert set(collections.Counter(r[0] for r in out.values()).values()) == {2}


def test_rack_alternated_order() -> None:
    assert rack_alternated_brokers({0: "a", 1: "a", 2: "b", 3: "c", 4: "b"}) == [0, 2, 3, 1, 4]


def test_partial_racks_fall_back_to_rack_unaware() -> None:
    brokers = [BrokerRegistration(0, "h", 1, rack="a"), BrokerRegistration(1, "h", 1)]
    out = assign_replicas(brokers, num_partitions=2, replication_factor=2, rng=random.Random(1))
    assert all(sorted(r) == [0, 1] for r in out.values())


def test_errors() -> None:
    with pytest.raises(errors.InvalidReplicationFactorError, match="larger than available"):
        assign_replicas(_brokers(2), num_partitions=1, replication_factor=3, rng=random.Random())
    with pytest.raises(errors.InvalidPartitionsError):
        assign_replicas(_brokers(2), num_partitions=0, replication_factor=1, rng=random.Random())
    with pytest.raises(errors.InvalidReplicationFactorError):
        assign_replicas(_brokers(2), num_partitions=1, replication_factor=0, rng=random.Random())


def test_partition_increase_continues_numbering() -> None:
    out = assign_replicas(
        _brokers(3),
        num_partitions=2,
        replication_factor=2,
        rng=random.Random(),
        start_partition_id=3,
        fixed_start_index=0,
    )
    assert sorted(out) == [3, 4]


def test_manual_assignment_rules() -> None:
    ok = validate_manual_assignment({0: [1, 2], 1: [2, 1]}, live_broker_ids=[1, 2])
    assert ok == {0: (1, 2), 1: (2, 1)}
    for bad in ({0: [1, 1]}, {1: [1]}, {0: [1], 1: [1, 2]}, {0: [7]}, {}):
        with pytest.raises(
            (errors.InvalidReplicaAssignmentError, errors.InvalidReplicationFactorError)
        ):
            validate_manual_assignment(bad, live_broker_ids=[1, 2])
