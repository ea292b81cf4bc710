"""The scaling adapter (headwater_operator.scaling_kube) over in-memory Kubernetes and cluster.

What the adapter adds to the pure decisions: the order of writes (the phase is
recorded before ``spec.replicas`` moves, so a crash in between cannot skip the
rebalance), the throttle handed to ``execute_reassignment``, the plan kept in
an annotation so a restarted operator still verifies it and removes the
throttle, Events only on changes, no patch when nothing changed, no cluster
call for a quiet StatefulSet, and the runner never stepping during a roll.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from headwater.client.reassignment import (
    BrokerInfo,
    PartitionProgress,
    PartitionStatus,
    ReassignmentPlan,
    RebalancePlan,
    ReplicaMove,
    VerifyResult,
)
from headwater.roll.engine import BrokerVersion, ClusterState, PartitionState
from headwater.values import TopicPartition
from headwater_operator import scaling_kube
from headwater_operator.scaling import Hold, ScalingPhase, SetReplicas
from headwater_operator.scaling_kube import Scaler, ScalingRunner

NS, STS = "ns", "hw-headwater-broker"


class FakeKube:
    """A StatefulSet and its pods; records every write in ``calls``."""

    def __init__(self, *, replicas: int = 3, desired: int = 3, drain: bool = False) -> None:
        self.replicas = replicas
        self.annotations: dict[str, str] = {
            scaling_kube.DESIRED_ANNOTATION: str(desired),
            scaling_kube.DRAIN_ANNOTATION: "true" if drain else "false",
        }
        self.ready: set[int] = set(range(replicas))
        self.present: set[int] = set(range(replicas))
        self.calls: list[tuple[str, Any]] = []
        self.fail_scale = False

    def read_statefulset(self, namespace: str, name: str) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "annotations": dict(self.annotations)},
            "spec": {"replicas": self.replicas, "selector": {"matchLabels": {"app": "b"}}},
            "status": {"updateRevision": "r1"},
        }

    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        return [
            {
                "metadata": {
                    "name": f"{STS}-{i}",
                    "labels": {"controller-revision-hash": "r1"},
                },
                "status": {
                    "conditions": [{"type": "Ready", "status": str(i in self.ready)}],
                },
            }
            for i in sorted(self.present)
        ]

    def delete_pod(self, namespace: str, name: str) -> None:
        raise AssertionError("scaling never deletes pods")

    def annotate_statefulset(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        self.calls.append(("annotate", dict(annotations)))
        for k, v in annotations.items():
            if v is None:
                self.annotations.pop(k, None)
            else:
                self.annotations[k] = v

    def scale_statefulset(self, namespace: str, name: str, replicas: int) -> None:
        self.calls.append(("scale", replicas))
        if self.fail_scale:
            raise OSError("API server unavailable")
        self.replicas = replicas
        self.present |= set(range(replicas))  # new pods come up Ready at once here
        self.ready |= set(range(replicas))
        self.present -= set(range(replicas, 10))
        self.ready -= set(range(replicas, 10))

    def status(self) -> dict[str, Any]:
        return json.loads(self.annotations.get(scaling_kube.STATUS_ANNOTATION, "{}"))


TP = TopicPartition("t", 0)
PLAN = RebalancePlan(
    current={TP: (0, 1)},
    proposed={TP: (3, 1)},
    moves=(ReplicaMove(TP, 0, 3, 1000),),
    leader_changes=(),
    before=(),
    after=(),
)


class FakeCluster:
    """ClusterProbe and ReassignmentAdmin at once; counts calls."""

    def __init__(self, brokers: Iterable[int] = (0, 1, 2)) -> None:
        self.brokers = set(brokers)
        self.assignment: dict[TopicPartition, tuple[int, ...]] = {TP: (0, 1)}
        self.moving: dict[TopicPartition, Any] = {}
        self.calls: list[str] = []
        self.executed: list[tuple[ReassignmentPlan, int | None]] = []
        self.verified: list[ReassignmentPlan] = []
        self.plan = PLAN
        self.fail_partitions = False

    def state(self) -> ClusterState:
        self.calls.append("state")
        return ClusterState(
            controller_id=0,
            brokers={b: BrokerVersion("0.1.0", "1") for b in self.brokers},
            partitions=[
                PartitionState(tp.topic, tp.partition, r, r) for tp, r in self.assignment.items()
            ],
            min_isr={},
        )

    def plan_rebalance(self, *, brokers: Sequence[int] | None = None) -> RebalancePlan:
        self.calls.append(f"plan_rebalance {list(brokers or [])}")
        return self.plan

    def current_assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return dict(self.assignment)

    def broker_infos(self) -> list[BrokerInfo]:
        return [BrokerInfo(b) for b in sorted(self.brokers)]

    def estimate_partition_sizes(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 500)

    def execute_reassignment(
        self, plan: ReassignmentPlan | RebalancePlan, *, throttle_bytes_per_s: int | None = None
    ) -> Any:
        assert isinstance(plan, ReassignmentPlan)
        self.executed.append((plan, throttle_bytes_per_s))
        self.moving = dict(plan.targets)
        return {}

    def verify_reassignment(self, plan: ReassignmentPlan | RebalancePlan) -> VerifyResult:
        assert isinstance(plan, ReassignmentPlan)
        self.verified.append(plan)
        status = PartitionStatus.FAILED if self.fail_partitions else PartitionStatus.COMPLETE
        return VerifyResult(
            tuple(PartitionProgress(tp, status, r, r) for tp, r in plan.targets.items()),
            throttles_removed=not self.fail_partitions,
        )

    def list_partition_reassignments(self) -> Mapping[TopicPartition, Any]:
        self.calls.append("list")
        return dict(self.moving)

    def finish_moves(self) -> None:
        self.assignment.update(self.moving)
        self.moving = {}


def make(
    kube: FakeKube, cluster: FakeCluster, *, throttle: int = 1000, auto: bool = True
) -> tuple[Scaler, list[tuple[str, str, str]]]:
    events: list[tuple[str, str, str]] = []
    scaler = Scaler(
        kube,
        cluster,
        cluster,
        namespace=NS,
        statefulset=STS,
        auto_rebalance=auto,
        throttle_bytes_per_s=throttle,
        notify=lambda t, r, m: events.append((t, r, m)),
        now=lambda: "2026-01-01T00:00:00Z",
    )
    return scaler, events


def test_a_quiet_statefulset_asks_the_cluster_nothing_and_writes_nothing() -> None:
    kube, cluster = FakeKube(), FakeCluster()
    scaler, events = make(kube, cluster)
    kube.annotations[scaling_kube.STATUS_ANNOTATION] = json.dumps({"phase": "Steady"})
    d = scaler.step()
    assert d.phase is ScalingPhase.STEADY and isinstance(d.action, Hold)
    assert cluster.calls == []
    first = list(kube.calls)
    scaler.step()
    assert kube.calls == first  # the second step finds the same status: no patch
    assert events == []


def test_scale_up_records_the_phase_before_moving_replicas() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster()
    scaler, events = make(kube, cluster)
    d = scaler.step()
    assert d.action == SetReplicas(4)
    assert [c[0] for c in kube.calls] == ["annotate", "scale"]
    assert kube.status()["phase"] == "ScalingUp" and kube.status()["replicas"] == 4
    assert events == [("Normal", "ScalingUp", "scaling the brokers up from 3 to 4")]


def test_a_failed_replicas_patch_is_tried_again_not_skipped() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster()
    scaler, _ = make(kube, cluster)
    kube.fail_scale = True
    with pytest.raises(OSError):
        scaler.step()
    assert kube.replicas == 3 and kube.status()["phase"] == "ScalingUp"
    kube.fail_scale = False
    assert scaler.step().action == SetReplicas(4)
    assert kube.replicas == 4


def test_scale_up_then_a_throttled_rebalance_then_finished_without_throttle() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster()
    scaler, events = make(kube, cluster, throttle=1000)
    scaler.step()  # raise replicas
    kube.ready.discard(3)
    assert "waiting for brokers 3" in scaler.step().message
    kube.ready.add(3)
    assert "waiting for brokers 3" in scaler.step().message  # Ready, not registered yet
    cluster.brokers.add(3)
    d = scaler.step()
    assert d.phase is ScalingPhase.REBALANCING
    assert cluster.calls.count("plan_rebalance [0, 1, 2, 3]") == 1
    ((plan, throttle),) = cluster.executed
    assert plan.targets == {TP: (3, 1)} and throttle == 1000
    stored = kube.annotations[scaling_kube.PLAN_ANNOTATION]
    assert json.loads(stored)["partitions"][0]["replicas"] == [3, 1]
    status = kube.status()
    assert status["partitions"] == 1 and status["bytes"] == 1000 and status["moves"] == 1
    assert status["throttleBytesPerSecond"] == 1000
    assert scaler.step().phase is ScalingPhase.REBALANCING  # still moving
    assert kube.status()["partitionsMoving"] == 1
    cluster.finish_moves()
    d = scaler.step()
    assert d.phase is ScalingPhase.STEADY and cluster.verified == [plan]
    assert scaling_kube.PLAN_ANNOTATION not in kube.annotations
    cond = kube.status()["conditions"][0]
    assert cond["type"] == "Scaled" and cond["status"] == "True" and cond["reason"] == "AsDesired"
    assert kube.status()["bytes"] == 1000  # the last move's figures stay
    assert [e[1] for e in events] == ["ScalingUp", "Rebalancing", "RebalanceFinished"]


def test_a_restarted_operator_verifies_the_plan_from_the_annotation() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster()
    scaler, _ = make(kube, cluster)
    cluster.brokers.add(3)
    scaler.step()
    scaler.step()
    assert kube.status()["phase"] == "Rebalancing"
    cluster.finish_moves()
    restarted, _ = make(kube, cluster)  # a new operator process: no plan in memory
    assert restarted.step().phase is ScalingPhase.STEADY
    assert [p.targets for p in cluster.verified] == [{TP: (3, 1)}]


def test_no_throttle_configured_executes_unthrottled() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster([0, 1, 2, 3])
    scaler, _ = make(kube, cluster, throttle=0)
    scaler.step()
    scaler.step()
    assert cluster.executed[0][1] is None


def test_an_empty_plan_moves_nothing_and_ends_steady() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster([0, 1, 2, 3])
    cluster.plan = PLAN._replace(proposed=dict(PLAN.current), moves=())
    scaler, _ = make(kube, cluster)
    scaler.step()
    scaler.step()
    assert cluster.executed == []
    assert scaler.step().phase is ScalingPhase.STEADY and cluster.verified == []


def test_failed_partitions_are_a_warning_event() -> None:
    kube, cluster = FakeKube(desired=4), FakeCluster([0, 1, 2, 3])
    scaler, events = make(kube, cluster)
    scaler.step()
    scaler.step()
    cluster.finish_moves()
    cluster.fail_partitions = True
    scaler.step()
    assert ("Warning", "ReassignmentFailed") in [(t, r) for t, r, _ in events]


def test_refused_scale_down_posts_one_warning_and_changes_nothing() -> None:
    kube, cluster = FakeKube(replicas=4, desired=3), FakeCluster([0, 1, 2, 3])
    cluster.assignment = {TP: (3, 1)}
    scaler, events = make(kube, cluster)
    for _ in range(3):
        d = scaler.step()
    assert d.phase is ScalingPhase.SCALE_DOWN_REFUSED and kube.replicas == 4
    assert [(t, r) for t, r, _ in events] == [("Warning", "ScaleDownRefused")]
    assert "broker 3 holds 1 replica" in events[0][2]
    assert [c for c in kube.calls if c[0] == "scale"] == []
    assert len([c for c in kube.calls if c[0] == "annotate"]) == 1
    cond = kube.status()["conditions"][0]
    assert cond["status"] == "False" and cond["reason"] == "ScaleDownRefused"


def test_operator_drain_moves_only_the_leaving_brokers_replicas_then_shrinks() -> None:
    kube, cluster = FakeKube(replicas=5, desired=3, drain=True), FakeCluster(range(5))
    other = TopicPartition("t", 1)
    cluster.assignment = {TP: (3, 4), other: (0, 1)}
    scaler, events = make(kube, cluster)
    assert scaler.step().phase is ScalingPhase.DRAINING
    ((plan, _),) = cluster.executed
    assert set(plan.targets) == {TP} and set(plan.targets[TP]) <= {0, 1, 2}
    cluster.finish_moves()
    d = scaler.step()
    assert d.phase is ScalingPhase.SCALING_DOWN and kube.replicas == 3
    assert scaler.step().phase is ScalingPhase.STEADY
    assert [r for _, r, _ in events] == ["Draining", "ScalingDown", "Scaled"]


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, 3),
        ({"headwater.io/desired-brokers": "5"}, 5),
        ({"headwater.io/desired-brokers": "x"}, 0),
    ],
)
def test_desired_brokers_annotation(annotations: dict[str, str], expected: int) -> None:
    sts = {"metadata": {"annotations": annotations}, "spec": {"replicas": 3}}
    assert scaling_kube.desired_brokers(sts) == expected


def test_unreadable_status_counts_as_steady() -> None:
    sts = {"metadata": {"annotations": {scaling_kube.STATUS_ANNOTATION: "{oops"}}}
    assert scaling_kube.phase_of(sts) is ScalingPhase.STEADY
    sts = {"metadata": {"annotations": {scaling_kube.STATUS_ANNOTATION: '{"phase": "Nope"}'}}}
    assert scaling_kube.phase_of(sts) is ScalingPhase.STEADY


# -- the runner -----------------------------------------------------------------------------


def wait_for(check: Any, what: str) -> None:
    for _ in range(400):
        if check():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_runner_steps_until_steady_and_never_during_a_roll() -> None:
    from headwater_operator.scaling import Decision

    phases = [ScalingPhase.SCALING_UP, ScalingPhase.REBALANCING, ScalingPhase.STEADY]
    taken: list[ScalingPhase] = []

    def step() -> Decision:
        taken.append(phases[len(taken)])
        return Decision(taken[-1], Hold("x"), "x")

    ops = threading.Lock()
    runner = ScalingRunner(step, interval_s=0.01, ops=ops)
    with ops:  # a roll runs
        assert runner.poke() is True
        time.sleep(0.1)
        assert taken == []
    wait_for(lambda: len(taken) == 3, "three steps")
    wait_for(lambda: not runner._running, "the loop to end at Steady")
    assert taken == phases
    runner.stop()


def test_runner_keeps_going_after_a_failed_step() -> None:
    from headwater_operator.scaling import Decision

    calls: list[int] = []

    def step() -> Decision:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("cluster unreachable")
        return Decision(ScalingPhase.STEADY, Hold("x"), "x")

    runner = ScalingRunner(step, interval_s=0.01, ops=threading.Lock())
    runner.poke()
    wait_for(lambda: len(calls) == 2 and not runner._running, "a second step")
    runner.stop()
    assert runner.poke() is False  # stopped for good
