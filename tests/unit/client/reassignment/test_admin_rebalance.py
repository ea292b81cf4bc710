"""``Admin``'s reassignment methods over a fake cluster: what is set, sent and removed.

The fake stands in for the RPCs (describe, list_offsets, configs, the
reassignment calls) and records every change, so these tests check that a
bad plan changes nothing, that ``--throttle`` sets Kafka's configs on the
right brokers and topics before the move, and that verify and cancel remove
them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import pytest
from headwater import errors
from headwater.client.admin.rebalance import RebalanceAdmin, throttled_replicas
from headwater.client.admin.values import BrokerDescription, ClusterDescription, TopicDescription
from headwater.client.reassignment import PartitionStatus, ReassignmentPlan
from headwater.client.types import OffsetAndTimestamp, PartitionMetadata
from headwater.values import TopicPartition

TP = TopicPartition


class _Ongoing(NamedTuple):
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


class FakeAdmin(RebalanceAdmin):
    """The rebalance tools over a fake of the Admin calls they use: the fake is its own
    :class:`~headwater.client.admin.rebalance.AdminOperations`."""

    def __init__(
        self, layout: Mapping[TopicPartition, tuple[int, ...]], live: Sequence[int]
    ) -> None:
        super().__init__(self)
        self.bootstrap_servers = ["127.0.0.1:1"]
        self.layout = dict(layout)
        self.live = list(live)
        self.ongoing: dict[TopicPartition, _Ongoing] = {}
        self.changes: list[tuple[str, Any]] = []

    def describe_cluster(self) -> ClusterDescription:
        return ClusterDescription(
            "c", 0, tuple(BrokerDescription(b, "h", 1, f"r{b % 2}") for b in self.live)
        )

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        topics = sorted({tp.topic for tp in self.layout})
        wanted = topics if names is None else list(names)
        for n in wanted:
            if n not in topics:
                raise errors.UnknownTopicOrPartitionError(f"topic {n!r}")
        return {
            n: TopicDescription(
                n,
                False,
                tuple(
                    PartitionMetadata(n, tp.partition, r[0], 0, r, r)
                    for tp, r in sorted(self.layout.items())
                    if tp.topic == n
                ),
            )
            for n in wanted
        }

    def list_offsets(
        self, specs: Mapping[TopicPartition, int | str]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return {tp: OffsetAndTimestamp(0, -1) for tp in specs}

    def alter_topic_configs(
        self,
        topic: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        self.changes.append(("topic", (topic, dict(set_configs or {}), tuple(delete_configs))))

    def alter_broker_configs(
        self, broker_id: int | None, configs: Mapping[str, str | None]
    ) -> None:
        self.changes.append(("broker", (broker_id, dict(configs))))

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        self.changes.append(("alter", dict(reassignments)))
        out: dict[TopicPartition, errors.HeadwaterError | None] = {}
        for tp, target in reassignments.items():
            if target is None:
                out[tp] = (
                    None if self.ongoing.pop(tp, None) else errors.NoReassignmentInProgressError()
                )
            else:
                self.ongoing[tp] = _Ongoing(tuple(target), (), ())
                out[tp] = None
        return out

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, _Ongoing]:
        return {tp: o for tp, o in self.ongoing.items() if partitions is None or tp in partitions}

    def describe_log_dirs_each(
        self, brokers: Iterable[int] | None = None, *, topics: Any = None
    ) -> dict[int, Any]:
        """Brokers without DescribeLogDirs: sizes are estimated (test_admin_log_dirs.py
        covers the measured sizes)."""
        return {b: errors.UnsupportedVersionError("DescribeLogDirs") for b in self.live}


LAYOUT: dict[TopicPartition, tuple[int, ...]] = {
    TP("a", 0): (0, 1),
    TP("a", 1): (1, 2),
    TP("b", 0): (2, 0),
}


def test_a_bad_plan_changes_nothing() -> None:
    admin = FakeAdmin(LAYOUT, [0, 1, 2])
    for targets, error in (
        ({TP("nope", 0): (0,)}, errors.UnknownTopicOrPartitionError),
        ({TP("a", 5): (0,)}, errors.UnknownTopicOrPartitionError),
        ({TP("a", 0): (0, 9)}, errors.BrokerNotAvailableError),
    ):
        with pytest.raises(error):
            admin.execute_reassignment(ReassignmentPlan.of(targets), throttle_bytes_per_s=1000)
    assert admin.changes == []
    with pytest.raises(errors.InvalidConfigError):
        admin.execute_reassignment(
            ReassignmentPlan.of({TP("a", 0): (1, 2)}), throttle_bytes_per_s=0
        )
    assert admin.changes == []


def test_execute_with_a_throttle_sets_kafkas_configs_before_the_move() -> None:
    admin = FakeAdmin(LAYOUT, [0, 1, 2, 3])
    plan = ReassignmentPlan.of({TP("a", 0): (3, 1), TP("a", 1): (2, 1)})  # a-1 only reordered
    assert admin.execute_reassignment(plan, throttle_bytes_per_s=5000) == {
        TP("a", 0): None,
        TP("a", 1): None,
    }
    kinds = [k for k, _ in admin.changes]
    assert kinds == ["broker", "broker", "broker", "topic", "alter"]
    brokers = {c[0]: c[1] for k, c in admin.changes if k == "broker"}
    assert set(brokers) == {0, 1, 3}  # a-0's old and new replicas only
    assert brokers[3] == {
        "leader.replication.throttled.rate": "5000",
        "follower.replication.throttled.rate": "5000",
    }
    topic = next(c for k, c in admin.changes if k == "topic")
    assert topic == (
        "a",
        {
            "leader.replication.throttled.replicas": "0:0,0:1",
            "follower.replication.throttled.replicas": "0:3",
        },
        (),
    )


def test_verify_reports_progress_and_removes_throttles_when_all_complete() -> None:
    admin = FakeAdmin(LAYOUT, [0, 1, 2])
    plan = ReassignmentPlan.of({TP("a", 0): (2, 1)})
    admin.execute_reassignment(plan)
    admin.changes.clear()
    result = admin.verify_reassignment(plan)
    assert [p.status for p in result.partitions] == [PartitionStatus.IN_PROGRESS]
    assert not result.throttles_removed and admin.changes == []
    admin.ongoing.clear()
    admin.layout[TP("a", 0)] = (2, 1)
    result = admin.verify_reassignment(plan)
    assert result.complete and result.throttles_removed
    assert (
        "topic",
        (
            "a",
            {},
            (
                "leader.replication.throttled.replicas",
                "follower.replication.throttled.replicas",
            ),
        ),
    ) in admin.changes
    cleared = [c for k, c in admin.changes if k == "broker"]
    assert sorted(b for b, _ in cleared) == [0, 1, 2]
    assert all(set(v.values()) == {None} for _, v in cleared)


def test_a_failed_partition_keeps_the_throttles() -> None:
    admin = FakeAdmin(LAYOUT, [0, 1, 2])
    result = admin.verify_reassignment(ReassignmentPlan.of({TP("a", 0): (2, 1)}), settle_s=0)
    assert [p.status for p in result.partitions] == [PartitionStatus.FAILED]
    assert admin.changes == []


def test_cancel_sends_none_targets_and_removes_throttles() -> None:
    admin = FakeAdmin(LAYOUT, [0, 1, 2])
    plan = ReassignmentPlan.of({TP("a", 0): (2, 1), TP("b", 0): (1, 0)})
    admin.execute_reassignment(ReassignmentPlan.of({TP("a", 0): (2, 1)}))
    admin.changes.clear()
    results = admin.cancel_reassignment(plan)
    assert results[TP("a", 0)] is None
    assert isinstance(results[TP("b", 0)], errors.NoReassignmentInProgressError)
    assert admin.changes[0] == ("alter", {TP("a", 0): None, TP("b", 0): None})
    assert {k for k, _ in admin.changes[1:]} == {"topic", "broker"}


def test_plans_from_the_cluster() -> None:
    admin = FakeAdmin({TP("a", p): (0, 1) for p in range(4)}, [0, 1, 2, 3])
    plan = admin.plan_rebalance()
    assert len(plan.moves) == 4
    assert {b.broker_id: b.replicas for b in plan.after} == {0: 2, 1: 2, 2: 2, 3: 2}
    drain = admin.plan_drain(0)
    assert all(0 not in r for r in drain.proposed.values())
    down = FakeAdmin({TP("a", 0): (0, 5)}, [0, 1])
    with pytest.raises(errors.BrokerNotAvailableError, match="5 hold replicas but are not alive"):
        down.plan_rebalance()
    with pytest.raises(errors.BrokerNotAvailableError, match="Unknown broker"):
        admin.plan_rebalance(brokers=[0, 7])
    current, proposed = admin.generate_reassignment(["a"], [2, 3], seed=1)
    assert set(current.targets) == set(proposed.targets)
    assert all(set(r) == {2, 3} for r in proposed.targets.values())


def test_throttled_replicas_skip_reordered_partitions() -> None:
    assert throttled_replicas({TP("a", 0): (0, 1)}, {TP("a", 0): (1, 0)}) == {}
