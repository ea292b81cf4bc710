"""``--generate``: Kafka's placement of whole topics over a chosen set of brokers.

kafka-reassign-partitions' ``--generate`` places every partition of the given
topics afresh over ``--broker-list`` with ``AdminUtils.assignReplicasToBrokers``
(each topic keeps its partition count and replication factor), rack-aware when
every broker has a rack, and prints the current and the proposed plan.  The
controller places new topics with the same algorithm
(``headwater.coordination.assignment``); the client may not import the
broker's layers (``.importlinter``), so the algorithm is restated here, and a
unit test checks both give the same placement for the same random choices.
Randomness is a parameter so tests are exact.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from headwater import errors
from headwater.client.reassignment.model import Assignment, BrokerInfo
from headwater.client.reassignment.plan import ReassignmentPlan
from headwater.values import TopicPartition


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers ordered rack by rack in turn: a1, b1, c1, a2, b2, ... (Kafka's order)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    iters = {rack: iter(bs) for rack, bs in by_rack.items()}
    names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(iters[names[i]], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(names)
    return out


def assign_replicas(
    brokers: Sequence[BrokerInfo],
    *,
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    """Partitions 0..n-1 of one topic placed over ``brokers`` (Kafka's algorithm)."""
    if replication_factor > len(brokers):
        raise errors.InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}"
        )
    if brokers and all(b.rack for b in brokers):
        racks = {b.broker_id: str(b.rack) for b in brokers}
        arranged = rack_alternated_brokers(racks)
        num_racks = len(set(racks.values()))
    else:
        racks = {}
        arranged = sorted(b.broker_id for b in brokers)
        num_racks = 0
    n = len(arranged)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    for pid in range(num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        if not racks:
            rest = [
                arranged[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
            out[pid] = (arranged[first], *rest)
            continue
        replicas = [arranged[first]]
        racks_used = {racks[arranged[first]]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                k += 1
                rack_ok = racks[broker] not in racks_used or len(racks_used) == num_racks
                broker_ok = broker not in replicas or len(replicas) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(racks[broker])
                    break
        out[pid] = tuple(replicas)
    return out


def generate(
    current: Assignment,
    *,
    topics: Sequence[str],
    brokers: Sequence[BrokerInfo],
    rng: random.Random,
) -> tuple[ReassignmentPlan, ReassignmentPlan]:
    """The (current, proposed) plans moving ``topics`` onto ``brokers``, as ``--generate``.

    ``current`` holds at least every partition of ``topics``.  A topic keeps
    its partition count and the replication factor of its partition 0.
    """
    if not topics:
        raise errors.InvalidReplicaAssignmentError("List of topics to reassign contains no topics")
    if not brokers:
        raise errors.InvalidReplicaAssignmentError("The broker list is empty")
    ids = [b.broker_id for b in brokers]
    if len(set(ids)) != len(ids):
        raise errors.InvalidReplicaAssignmentError(
            f"Broker list contains duplicate entries: {','.join(map(str, ids))}"
        )
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {}
    for tp, replicas in current.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = replicas
    missing = [t for t in topics if t not in by_topic]
    if missing:
        raise errors.UnknownTopicOrPartitionError(f"Topic(s) {', '.join(missing)} not found")
    cur: dict[TopicPartition, tuple[int, ...]] = {}
    proposed: dict[TopicPartition, tuple[int, ...]] = {}
    for topic in topics:
        parts = by_topic[topic]
        placed = assign_replicas(
            brokers,
            num_partitions=len(parts),
            replication_factor=len(parts[min(parts)]),
            rng=rng,
        )
        for p, replicas in parts.items():
            cur[TopicPartition(topic, p)] = replicas
        for p, replicas in placed.items():
            proposed[TopicPartition(topic, p)] = replicas
    return ReassignmentPlan.of(cur), ReassignmentPlan.of(proposed)
