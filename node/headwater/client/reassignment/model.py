"""The values the reassignment tools share: brokers with racks, moves, plans, progress.

Everything here is an immutable ``NamedTuple``; the planners take these and
return these, doing no I/O, so every decision has a unit test.  A partition's
replica tuple is ordered as Kafka orders it: the first replica is the
*preferred leader*, the one a preferred-leader election makes leader.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple

from headwater.values import TopicPartition

Assignment = Mapping[TopicPartition, tuple[int, ...]]
"""Each partition's replicas, preferred leader first."""


class BrokerInfo(NamedTuple):
    """A broker a plan may place replicas on; ``rack`` None when it has none."""

    broker_id: int
    rack: str | None = None


class ReplicaMove(NamedTuple):
    """One replica of ``tp`` copied from ``source`` to ``destination`` (``size_bytes`` of log)."""

    tp: TopicPartition
    source: int
    destination: int
    size_bytes: int


class BrokerLoad(NamedTuple):
    """What one broker holds: replicas, preferred leaderships and bytes of log."""

    broker_id: int
    rack: str | None
    replicas: int
    leaders: int
    size_bytes: int


class RebalancePlan(NamedTuple):
    """A planner's answer: the moves, and the assignment before and after them.

    ``before`` and ``after`` list the same brokers (the targets and every broker
    that held a replica).  Invariants: ``proposed`` has exactly the partitions of ``current``, each
    with as many replicas and no broker twice; ``moves`` lists every replica
    that changes broker (a partition only reordered moves no data, and shows in
    ``leader_changes`` only).
    """

    current: dict[TopicPartition, tuple[int, ...]]
    proposed: dict[TopicPartition, tuple[int, ...]]
    moves: tuple[ReplicaMove, ...]
    leader_changes: tuple[TopicPartition, ...]
    before: tuple[BrokerLoad, ...]
    after: tuple[BrokerLoad, ...]

    @property
    def bytes_to_move(self) -> int:
        return sum(m.size_bytes for m in self.moves)

    @property
    def changed(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The partitions whose replica list changes (set or order): what to reassign."""
        return {tp: r for tp, r in self.proposed.items() if self.current.get(tp) != r}

    @property
    def empty(self) -> bool:
        return not self.changed


class PartitionStatus(enum.Enum):
    """Where one partition of a plan stands (Kafka's ``--verify`` answers)."""

    COMPLETE = "complete"
    IN_PROGRESS = "in progress"
    FAILED = "failed"


class PartitionProgress(NamedTuple):
    tp: TopicPartition
    status: PartitionStatus
    target: tuple[int, ...]
    current: tuple[int, ...]

    @property
    def message(self) -> str:
        """Kafka's ``--verify`` line for this partition."""
        if self.status is PartitionStatus.COMPLETE:
            return f"Reassignment of partition {self.tp} is completed."
        if self.status is PartitionStatus.IN_PROGRESS:
            return f"Reassignment of partition {self.tp} is still in progress."
        return (
            f"There is no active reassignment of partition {self.tp}, but replica set is "
            f"{_ids(self.current)} rather than {_ids(self.target)}."
        )


class VerifyResult(NamedTuple):
    """``verify_reassignment``'s answer: each partition's progress, and whether throttles went."""

    partitions: tuple[PartitionProgress, ...]
    throttles_removed: bool = False

    @property
    def complete(self) -> bool:
        return all(p.status is PartitionStatus.COMPLETE for p in self.partitions)

    @property
    def failed(self) -> tuple[PartitionProgress, ...]:
        return tuple(p for p in self.partitions if p.status is PartitionStatus.FAILED)

    @property
    def in_progress(self) -> tuple[PartitionProgress, ...]:
        return tuple(p for p in self.partitions if p.status is PartitionStatus.IN_PROGRESS)


def classify(
    tp: TopicPartition,
    *,
    target: tuple[int, ...],
    current: tuple[int, ...],
    reassigning: bool,
) -> PartitionProgress:
    """Kafka's ``--verify`` rule: in progress while the controller still moves it;
    otherwise complete when the replica list (order included) is the target, failed if not."""
    if reassigning:
        status = PartitionStatus.IN_PROGRESS
    elif tuple(current) == tuple(target):
        status = PartitionStatus.COMPLETE
    else:
        status = PartitionStatus.FAILED
    return PartitionProgress(tp, status, tuple(target), tuple(current))


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids))


def loads(
    assignment: Assignment,
    *,
    brokers: Mapping[int, str | None],
    sizes: Mapping[TopicPartition, int],
) -> tuple[BrokerLoad, ...]:
    """Per-broker replicas, preferred leaderships and bytes; every broker of
    ``brokers`` is listed (with zeros if empty), plus any other that holds replicas."""
    replicas: dict[int, int] = dict.fromkeys(brokers, 0)
    leaders: dict[int, int] = dict.fromkeys(brokers, 0)
    size: dict[int, int] = dict.fromkeys(brokers, 0)
    for tp, ids in assignment.items():
        for i, b in enumerate(ids):
            replicas[b] = replicas.get(b, 0) + 1
            leaders[b] = leaders.get(b, 0) + (1 if i == 0 else 0)
            size[b] = size.get(b, 0) + sizes.get(tp, 0)
    return tuple(
        BrokerLoad(b, brokers.get(b), replicas[b], leaders[b], size[b]) for b in sorted(replicas)
    )
