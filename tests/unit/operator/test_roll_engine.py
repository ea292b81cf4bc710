"""The roll engine with the Kubernetes backend over an in-memory StatefulSet (fake clock).

Covers what triggers a restart (pods off the update revision, the manual
annotation on the StatefulSet or a pod), the order (unready first, the
controller last and re-checked at every step), the min.insync.replicas
safety check and its waits, the abort paths (a broker that is never safe to
restart, a pod that never comes back: nothing further touched), the
protocol-version refusals, and the progress recorded on the StatefulSet.
"""

from __future__ import annotations

import pytest
from headwater.roll import engine as roll
from headwater.roll.engine import (
    BrokerVersion,
    Member,
    PartitionState,
    Roller,
    RollEvent,
    RollSettings,
    RollState,
    RollTarget,
)
from headwater_operator.roll_kube import KubeBackend

from tests.unit.operator.fakes import World


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.now += seconds


def roller(
    world: World, clock: FakeClock, events: list[RollEvent], timeout_s: float = 60
) -> Roller:
    backend = KubeBackend(world, namespace=world.namespace, statefulset=world.name)
    return Roller(
        backend,
        world,
        settings=RollSettings(operation_timeout_s=timeout_s),
        clock=clock,
        sleep=clock.sleep,
        notify=events.append,
    )


def rf3(world: World, topic: str = "orders", partitions: int = 3, min_isr: int = 2) -> None:
    world.partitions += [PartitionState(topic, p, (0, 1, 2), (0, 1, 2)) for p in range(partitions)]
    world.min_isr[topic] = min_isr


@pytest.fixture
def world() -> World:
    w = World(brokers=3)
    rf3(w)
    return w


def test_nothing_to_do_when_every_pod_is_on_the_update_revision(world: World) -> None:
    result = roller(world, FakeClock(), []).run()
    assert result.state == RollState.NOTHING_TO_DO and world.deleted == []


def test_new_revision_rolls_each_pod_once_controller_last(world: World) -> None:
    world.update_revision = "rev-2"
    world.controller_id = 0
    events: list[RollEvent] = []
    result = roller(world, FakeClock(), events).run()
    assert result.state == RollState.FINISHED
    assert world.deleted == [f"{world.name}-1", f"{world.name}-2", f"{world.name}-0"]
    assert result.restarted == tuple(world.deleted)
    assert all(
        p["metadata"]["labels"]["controller-revision-hash"] == "rev-2" for p in world.pods.values()
    )
    reasons = [e.reason for e in events]
    assert reasons.count("Restarting") == 3 and reasons[-1] == "RollFinished"
    assert "update revision rev-2" in next(e.message for e in events if e.reason == "Restarting")
    assert world.sts_annotations["headwater.io/roll-state"] == "Finished"


def test_controller_is_rechecked_at_every_step(world: World) -> None:
    world.update_revision = "rev-2"
    world.controller_id = 2
    # When broker 1 restarts, the controller moves to broker 1 (already restarted).
    world.on_delete.append(
        lambda ordinal: setattr(world, "controller_id", 1) if ordinal == 1 else None
    )
    roller(world, FakeClock(), []).run()
    assert world.deleted == [f"{world.name}-0", f"{world.name}-1", f"{world.name}-2"]
    world2 = World(brokers=3, revision="a")
    world2.update_revision = "b"
    world2.controller_id = 0
    # Broker 0 is the controller; once broker 1 restarts the controller moves to 2.
    world2.on_delete.append(lambda o: setattr(world2, "controller_id", 2) if o == 1 else None)
    roller(world2, FakeClock(), []).run()
    assert world2.deleted == [f"{world2.name}-1", f"{world2.name}-0", f"{world2.name}-2"]


def test_unready_pods_go_first(world: World) -> None:
    world.update_revision = "rev-2"
    world.set_ready(2, False)
    world.partitions = [p._replace(isr=(0, 1)) for p in world.partitions]
    roller(world, FakeClock(), []).run()
    assert world.deleted[0] == f"{world.name}-2"


def test_manual_annotation_on_the_statefulset_rolls_all_and_is_cleared(world: World) -> None:
    world.sts_annotations["headwater.io/manual-rolling-update"] = "true"
    result = roller(world, FakeClock(), []).run()
    assert result.state == RollState.FINISHED and len(world.deleted) == 3
    assert "headwater.io/manual-rolling-update" not in world.sts_annotations


def test_manual_annotation_on_one_pod_rolls_that_pod(world: World) -> None:
    world.pods[f"{world.name}-1"]["metadata"]["annotations"][
        "headwater.io/manual-rolling-update"
    ] = "true"
    roller(world, FakeClock(), []).run()
    assert world.deleted == [f"{world.name}-1"]


def test_waits_with_backoff_while_a_partition_is_at_min_isr() -> None:
    world = World(brokers=3, revision="a")
    world.update_revision = "b"
    world.partitions = [PartitionState("pinned", 0, (0, 1), (0, 1))]
    world.min_isr["pinned"] = 2
    world.stuck_topics.add("pinned")
    clock = FakeClock()
    events: list[RollEvent] = []
    result = roller(world, clock, events, timeout_s=30).run()
    # Broker 2 hosts nothing at risk and is restarted; 0 and 1 never become safe.
    assert result.state == RollState.ABORTED
    assert world.deleted == [f"{world.name}-2"]
    assert "pinned-0" in result.message and "min.insync.replicas=2" in result.message
    # Backoff doubles from 0.5 s up to 5 s (after the short wait for broker 2 to return).
    windows = [clock.slept[i : i + 5] for i in range(len(clock.slept))]
    assert [0.5, 1.0, 2.0, 4.0, 5.0] in windows and max(clock.slept) == 5.0
    assert any(e.reason == "Waiting" for e in events)
    assert events[-1].reason == "RollAborted" and events[-1].type == "Warning"
    assert world.sts_annotations["headwater.io/roll-state"] == "Aborted"


def test_waiting_ends_when_the_partition_is_safe_again() -> None:
    world = World(brokers=3, revision="a")
    world.update_revision = "b"
    world.partitions = [PartitionState("t", 0, (0, 1, 2), (0, 1))]
    world.min_isr["t"] = 2
    world.stuck_topics.add("t")
    clock = FakeClock()
    waits = {"n": 0}

    def heal(seconds: float) -> None:
        FakeClock.sleep(clock, seconds)
        waits["n"] += 1
        if waits["n"] == 3:  # broker 2 catches up and rejoins the ISR
            world.stuck_topics.clear()

    backend = KubeBackend(world, namespace=world.namespace, statefulset=world.name)
    result = Roller(backend, world, clock=clock, sleep=heal).run()
    assert result.state == RollState.FINISHED and waits["n"] >= 3


def test_pod_that_never_comes_back_aborts_and_touches_nothing_else(world: World) -> None:
    world.update_revision = "rev-2"
    world.controller_id = 2
    world.never_back.add(0)
    clock = FakeClock()
    result = roller(world, clock, [], timeout_s=300).run()
    assert result.state == RollState.ABORTED
    assert world.deleted == [f"{world.name}-0"]
    assert "did not come back" in result.message and clock.now >= 300


@pytest.mark.parametrize(
    ("brokers", "target", "words"),
    [
        (
            {0: BrokerVersion("0.2.0", "2"), 1: BrokerVersion("0.2.0", "2")},
            RollTarget(None, "1"),
            "lower",
        ),
        (
            {0: BrokerVersion("0.2.0", "1"), 1: BrokerVersion("0.1.0", "1")},
            RollTarget(None, "2"),
            "brokers 1",
        ),
    ],
    ids=["downgrade", "raise-on-mixed-software"],
)
def test_protocol_version_refusals(
    brokers: dict[int, BrokerVersion], target: RollTarget, words: str
) -> None:
    refusal = roll.protocol_refusal(brokers, target)
    assert refusal is not None and words in refusal


def test_protocol_raise_allowed_once_every_broker_runs_the_new_software() -> None:
    same = {0: BrokerVersion("0.2.0", "1"), 1: BrokerVersion("0.2.0", "1")}
    assert roll.protocol_refusal(same, RollTarget("0.2.0", "2")) is None
    assert roll.protocol_refusal(same, RollTarget("0.2.0", "1")) is None
    assert roll.protocol_refusal(same, RollTarget("0.3.0", "2")) is not None


def test_refused_roll_restarts_nothing(world: World) -> None:
    world.update_revision = "rev-2"
    world.software[1] = "0.0.9"
    world.template_annotations["headwater.io/inter-broker-protocol-version"] = "2"
    events: list[RollEvent] = []
    result = roller(world, FakeClock(), events).run()
    assert result.state == RollState.REFUSED and world.deleted == []
    assert events[-1].reason == "RollRefused"
    assert world.sts_annotations["headwater.io/roll-state"] == "Refused"


def test_restarted_broker_must_register_the_expected_version(world: World) -> None:
    world.update_revision = "rev-2"
    world.template_annotations["headwater.io/version"] = "0.2.0"
    result = roller(world, FakeClock(), [], timeout_s=20).run()
    # The fake's brokers keep running 0.1.0 after a restart: the first never counts as back.
    assert result.state == RollState.ABORTED and len(world.deleted) == 1
    assert "expected 0.2.0" in result.message


def test_safety_rule_details() -> None:
    parts = [PartitionState("t", 0, (0, 1, 2), (0, 1))]
    assert roll.restart_blocker(2, parts, {"t": 2}, ready=False) is None  # not in the ISR
    assert roll.restart_blocker(2, parts, {"t": 3}, ready=True) is not None  # already below
    assert roll.restart_blocker(2, parts, {"t": 3}, ready=False) is None  # restarting can't hurt
    assert roll.restart_blocker(0, parts, {"t": 2}) is not None  # equals and includes
    assert roll.restart_blocker(0, parts, {"t": 1}) is None
    assert roll.restart_blocker(5, parts, {"t": 3}) is None  # hosts nothing


def test_order_and_versions_are_pure_functions() -> None:
    members = [
        Member(0, "b-0", True, "u0", "r"),
        Member(1, "b-1", True, "u1", "r"),
        Member(2, "b-2", False, "u2", "r"),
        Member(3, "b-3", True, "u3", None),
    ]
    order = []
    done: set[str] = set()
    while (m := roll.next_member(members, controller_id=1, done=done)) is not None:
        order.append(m.name)
        done.add(m.name)
    assert order == ["b-2", "b-0", "b-1"]
    assert roll.version_key("1.10") > roll.version_key("1.9") > roll.version_key("1")
    assert roll.version_key("2.0") == roll.version_key("2")


class FakeProc:
    def __init__(self, pid: int) -> None:
        self.pid: int | None = pid
        self.address = f"127.0.0.1:{pid}"
        self.running = True


class FakeProcesses:
    """Local broker processes; a started broker crashes ``crashes`` times before it stays up."""

    def __init__(self, crashes: int) -> None:
        self.brokers = {0: FakeProc(100)}
        self.overrides: dict[str, str] = {}
        self.crashes = crashes
        self.starts = 0

    def stop(self, broker_id: int, *, timeout_s: float = 60.0) -> int | None:
        self.brokers[broker_id].running = False
        return 0

    def start_broker(self, broker_id: int, *, wait: bool = False) -> None:
        self.starts += 1
        proc = self.brokers[broker_id]
        proc.pid = 100 + self.starts
        proc.running = self.starts > self.crashes


def test_local_backend_starts_a_crashing_broker_again_like_the_kubelet() -> None:
    from headwater.roll.local import LocalBackend

    clock = FakeClock()
    procs = FakeProcesses(crashes=2)
    backend = LocalBackend(procs, healthy=lambda _a: True, protocol_version="2", clock=clock)
    (member,) = backend.members()
    backend.restart(member)
    assert procs.overrides == {"inter.broker.protocol.version": "2"}
    assert not backend.members()[0].ready  # crashed on start
    backend.members()
    assert procs.starts == 1  # within the crash backoff: not started again yet
    for _ in range(3):
        clock.now += 2.0
        backend.members()
    assert procs.starts == 3 and backend.crash_restarts == 2
    assert backend.members()[0].ready and backend.members()[0].incarnation == "103"
