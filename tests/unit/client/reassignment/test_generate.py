"""``--generate``: Kafka's placement of whole topics over chosen brokers, rack-aware."""

from __future__ import annotations

import random

import pytest
from headwater import errors
from headwater.client.reassignment import BrokerInfo, generate
from headwater.client.reassignment.generate import assign_replicas
from headwater.coordination import assignment as controller_assignment
from headwater.coordination.model import BrokerRegistration
from headwater.values import TopicPartition


def _current(
    topic: str, n: int, replicas: tuple[int, ...]
) -> dict[TopicPartition, tuple[int, ...]]:
    return {TopicPartition(topic, p): replicas for p in range(n)}


@pytest.mark.parametrize(
    "racks", [None, ["a", "b", "c", "a", "b", "c"], ["a", "a", "b", "b", "c", "c"]]
)
@pytest.mark.parametrize("seed", range(5))
def test_same_placement_as_the_controller(racks: list[str] | None, seed: int) -> None:
    infos = [BrokerInfo(i, racks[i] if racks else None) for i in range(6)]
    regs = [BrokerRegistration(i, "h", 1, racks[i] if racks else None) for i in range(6)]
    ours = assign_replicas(infos, num_partitions=13, replication_factor=3, rng=random.Random(seed))
    theirs = controller_assignment.assign_replicas(
        regs, num_partitions=13, replication_factor=3, rng=random.Random(seed)
    )
    assert ours == theirs


def test_generate_moves_topics_onto_the_given_brokers() -> None:
    current = {**_current("a", 6, (0, 1)), **_current("b", 2, (0, 1, 2)), **_current("c", 1, (0,))}
    brokers = [BrokerInfo(b, r) for b, r in ((1, "x"), (2, "y"), (3, "z"), (4, "x"))]
    cur, proposed = generate(current, topics=["a", "b"], brokers=brokers, rng=random.Random(1))
    assert (
        set(cur.targets)
        == set(proposed.targets)
        == {tp for tp in current if tp.topic in ("a", "b")}
    )
    assert cur.targets == {tp: r for tp, r in current.items() if tp.topic != "c"}
    for tp, replicas in proposed.targets.items():
        assert len(replicas) == len(current[tp])  # replication factor kept
        assert len(set(replicas)) == len(replicas)
        assert set(replicas) <= {1, 2, 3, 4}
        racks = {dict((b.broker_id, b.rack) for b in brokers)[r] for r in replicas}
        assert len(racks) == len(replicas)  # rack-aware: 2 or 3 replicas on 2 or 3 racks
    leaders = [r[0] for tp, r in proposed.targets.items() if tp.topic == "a"]
    assert {leaders.count(b) for b in (1, 2, 3, 4)} <= {1, 2}


def test_generate_refuses_bad_input() -> None:
    current = _current("a", 2, (0, 1, 2))
    rng = random.Random(0)
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="nope"):
        generate(current, topics=["nope"], brokers=[BrokerInfo(0)], rng=rng)
    with pytest.raises(errors.InvalidReplicationFactorError, match="larger than available"):
        generate(current, topics=["a"], brokers=[BrokerInfo(0), BrokerInfo(1)], rng=rng)
    with pytest.raises(errors.InvalidReplicaAssignmentError, match="duplicate"):
        generate(current, topics=["a"], brokers=[BrokerInfo(0)] * 3, rng=rng)
    with pytest.raises(errors.InvalidReplicaAssignmentError, match="no topics"):
        generate(current, topics=[], brokers=[BrokerInfo(0)], rng=rng)
