"""Replica assignment: Kafka's ``AdminUtils.assignReplicasToBrokers``, rack-aware or not.

Goals, as in Kafka: spread replicas evenly over brokers; spread each broker's
leaderships (the first replica) evenly; for rack-aware placement, put the
replicas of one partition on as many racks as possible.  A random start index
and a shift that grows every ``len(brokers)`` partitions decorrelate the
second replica from the first.  Randomness is a parameter so tests are exact.
Rack-aware placement applies when every broker has a rack.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from headwater import errors
from headwater.coordination.model import BrokerRegistration


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _check(num_partitions: int, replication_factor: int, num_brokers: int) -> None:
    if num_partitions < 1:
        raise errors.InvalidPartitionsError(
            f"Number of partitions must be larger than 0, got {num_partitions}"
        )
    if replication_factor < 1:
        raise errors.InvalidReplicationFactorError(
            f"Replication factor must be larger than 0, got {replication_factor}"
        )
    if replication_factor > num_brokers:
        raise errors.InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {num_brokers}"
        )


def assign_replicas(
    brokers: Sequence[BrokerRegistration],
    *,
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    start_partition_id: int = 0,
    fixed_start_index: int = -1,
) -> dict[int, tuple[int, ...]]:
    """Assign ``num_partitions`` partitions (numbered from ``start_partition_id``) to brokers."""
    _check(num_partitions, replication_factor, len(brokers))
    if brokers and all(b.rack for b in brokers):
        racks = {b.broker_id: str(b.rack) for b in brokers}
        return _rack_aware(
            racks, num_partitions, replication_factor, rng, start_partition_id, fixed_start_index
        )
    ids = sorted(b.broker_id for b in brokers)
    return _rack_unaware(
        ids, num_partitions, replication_factor, rng, start_partition_id, fixed_start_index
    )


def _rack_unaware(
    ids: Sequence[int], n_parts: int, rf: int, rng: random.Random, start_pid: int, fixed: int
) -> dict[int, tuple[int, ...]]:
    n = len(ids)
    start = fixed if fixed >= 0 else rng.randrange(n)
    shift = fixed if fixed >= 0 else rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    pid = max(0, start_pid)
    for _ in range(n_parts):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        replicas = [ids[first]] + [ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        out[pid] = tuple(replicas)
        pid += 1
    return out


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


def _rack_aware(
    racks: Mapping[int, str],
    n_parts: int,
    rf: int,
    rng: random.Random,
    start_pid: int,
    fixed: int,
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start = fixed if fixed >= 0 else rng.randrange(n)
    shift = fixed if fixed >= 0 else rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    pid = max(0, start_pid)
    for _ in range(n_parts):
        if pid > 0 and pid % n == 0:
            shift += 1
        first = (pid + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                rack_ok = rack not in racks_used or len(racks_used) == num_racks
                broker_ok = broker not in brokers_used or len(brokers_used) == n
                if rack_ok and broker_ok:
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        out[pid] = tuple(replicas)
        pid += 1
    return out


def validate_manual_assignment(
    assignment: Mapping[int, Sequence[int]],
    *,
    live_broker_ids: Sequence[int],
    start_partition_id: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Check a user-supplied assignment (Kafka's rules) and return it normalised."""
    if not assignment:
        raise errors.InvalidReplicaAssignmentError("Replica assignment is empty")
    expected = list(range(start_partition_id, start_partition_id + len(assignment)))
    if sorted(assignment) != expected:
        raise errors.InvalidReplicaAssignmentError(
            f"Partitions should be consecutive and start at {start_partition_id},"
            f" got {sorted(assignment)}"
        )
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1:
        raise errors.InvalidReplicaAssignmentError(
            "All partitions should have the same number of replicas"
        )
    live = set(live_broker_ids)
    out: dict[int, tuple[int, ...]] = {}
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            raise errors.InvalidReplicationFactorError(f"Partition {p} has no replicas")
        if len(set(replicas)) != len(replicas):
            raise errors.InvalidReplicaAssignmentError(
                f"Duplicate brokers not allowed in replica assignment: {list(replicas)}"
                f" for partition {p}"
            )
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise errors.InvalidReplicaAssignmentError(
                f"Unknown broker ids for partition {p}: {unknown}"
            )
        out[p] = tuple(replicas)
    return out
