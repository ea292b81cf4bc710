"""The roll engine's local backend on real broker processes (``headwater.testing.Cluster``).

* a 3-broker roll under an acks=all producer (RF=3, min.insync.replicas=2)
  with a consumer group reading: every acknowledged record is consumed by the
  group and readable afterwards, each broker restarted exactly once, the
  controller last;
* a partition at min.insync.replicas makes the roll wait (its brokers are not
  touched) until it is safe again;
* a broker that never comes back aborts the roll, touching no other broker;
* lowering inter.broker.protocol.version below the version in force is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from headwater import Admin, Consumer, Producer, TopicPartition
from headwater.client import NewTopic
from headwater.errors import UnknownTopicOrPartitionError
from headwater.roll.engine import Member, Roller, RollEvent, RollSettings, RollState
from headwater.roll.local import LocalBackend
from headwater.roll.probe import AdminProbe
from headwater.testing import Cluster, is_healthy

from tests.e2e.operator.conftest import ClusterFactory

pytestmark = pytest.mark.e2e

FAST = RollSettings(operation_timeout_s=60, backoff_initial_s=0.2, backoff_max_s=1.0)


class RecordingBackend(LocalBackend):
    """Remembers which broker restarted when, and who was controller at that moment."""

    def __init__(self, cluster: Cluster, admin: Admin, **kw: object) -> None:
        # A broker whose SIGTERM shutdown hangs is killed after 20 s (Kubernetes: the
        # termination grace period) and started again until its old session is gone.
        kw.setdefault("stop_timeout_s", 20.0)
        super().__init__(cluster, healthy=is_healthy, **kw)  # type: ignore[arg-type]
        self.admin = admin
        self.restarts: list[tuple[int, int]] = []  # (broker, controller when picked)

    def restart(self, member: Member) -> None:
        self.restarts.append((member.broker_id, self.admin.describe_cluster().controller_id))
        super().restart(member)


@pytest.fixture
def roll_cluster(fresh_cluster: ClusterFactory) -> Cluster:
    return fresh_cluster(brokers=3, overrides={"min.insync.replicas": "2"})


@pytest.fixture
def admin(roll_cluster: Cluster) -> Iterator[Admin]:
    with Admin(roll_cluster.bootstrap, request_timeout_ms=5000, default_api_timeout_ms=30000) as a:
        yield a


def wait_in_sync(admin: Admin, topic: str) -> None:
    for _ in range(300):
        try:
            parts = admin.describe_topics([topic])[topic].partitions
        except UnknownTopicOrPartitionError:  # a just-restarted broker without metadata yet
            parts = ()
        if parts and all(len(p.isr) == len(p.replicas) and p.leader >= 0 for p in parts):
            return
        threading.Event().wait(0.1)
    raise AssertionError(f"{topic} never got in sync")


def test_roll_under_acks_all_load_loses_nothing_and_restarts_controller_last(
    roll_cluster: Cluster, admin: Admin
) -> None:
    admin.create_topic("rolled", 3, 3, {"min.insync.replicas": "2"})
    wait_in_sync(admin, "rolled")
    acked: list[bytes] = []
    failed: list[BaseException] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer(roll_cluster.bootstrap, acks="all", linger_ms=2) as producer:
            for i in range(100_000):
                if stop.is_set():
                    break
                value = f"r{i}".encode()
                try:
                    producer.send("rolled", value=value, key=value).result(timeout=60)
                    acked.append(value)
                except Exception as exc:  # an unacknowledged record may be lost; count it
                    failed.append(exc)

    consumed: set[bytes] = set()
    reading = threading.Event()

    def consume() -> None:  # a consumer group reads throughout the roll
        with Consumer(
            "rolled",
            bootstrap_servers=roll_cluster.bootstrap,
            group_id="roll-readers",
            auto_offset_reset="earliest",
        ) as c:
            for _ in range(3000):
                consumed.update(r.value for r in c.poll(100) if r.value is not None)
                if not reading.is_set() and stop.is_set() and set(acked) <= consumed:
                    return

    writer = threading.Thread(target=produce)
    reader = threading.Thread(target=consume)
    writer.start()
    reader.start()
    try:
        backend = RecordingBackend(roll_cluster, admin)
        events: list[RollEvent] = []
        result = Roller(backend, AdminProbe(admin), settings=FAST, notify=events.append).run()
    finally:
        stop.set()
        writer.join(120)
        reader.join(300)
    assert result.state == RollState.FINISHED, result.message
    assert set(acked) <= consumed, f"the group missed {len(set(acked) - consumed)} records"
    assert sorted(b for b, _ in backend.restarts) == [0, 1, 2]
    last_broker, controller_then = backend.restarts[-1]
    assert last_broker == controller_then
    assert all(broker != ctrl for broker, ctrl in backend.restarts[:-1])
    assert len(acked) > 0

    wait_in_sync(admin, "rolled")
    seen: set[bytes] = set()
    with Consumer(bootstrap_servers=roll_cluster.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition("rolled", p) for p in range(3)])
        c.seek_to_beginning()
        for _ in range(600):
            seen.update(r.value for r in c.poll(200) if r.value is not None)
            if seen >= set(acked):
                break
    assert set(acked) <= seen, f"{len(set(acked) - seen)} acknowledged records lost"


def test_partition_at_min_isr_makes_the_roll_wait(roll_cluster: Cluster, admin: Admin) -> None:
    admin.create_topics(
        [NewTopic("pinned", configs={"min.insync.replicas": "2"}, replica_assignment={0: [0, 1]})]
    )
    wait_in_sync(admin, "pinned")
    backend = RecordingBackend(roll_cluster, admin)
    events: list[RollEvent] = []
    waiting = threading.Event()

    def notify(event: RollEvent) -> None:
        events.append(event)
        if event.reason == "Waiting" and "pinned-0" in event.message:
            waiting.set()

    roller = Roller(backend, AdminProbe(admin), settings=FAST, notify=notify)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(roller.run()))
    thread.start()
    try:
        assert waiting.wait(60), "the roll never waited for pinned-0"
        # While it waits, neither replica of pinned-0 has been touched.
        assert all(b == 2 for b, _ in backend.restarts)
        admin.alter_topic_configs("pinned", set_configs={"min.insync.replicas": "1"})
    finally:
        thread.join(240)
    (result,) = outcome
    assert result.state == RollState.FINISHED  # type: ignore[attr-defined]
    assert sorted(b for b, _ in backend.restarts) == [0, 1, 2]


class NeverBack(RecordingBackend):
    """The first broker restarted is stopped and never started again."""

    def restart(self, member: Member) -> None:
        self.restarts.append((member.broker_id, -1))
        self.processes.stop(member.broker_id, timeout_s=60)


def test_broker_that_never_comes_back_aborts_the_roll(roll_cluster: Cluster, admin: Admin) -> None:
    admin.create_topic("abort", 1, 3)
    wait_in_sync(admin, "abort")
    pids = {i: b.pid for i, b in roll_cluster.brokers.items()}
    backend = NeverBack(roll_cluster, admin)
    settings = RollSettings(operation_timeout_s=5, backoff_initial_s=0.2, backoff_max_s=1.0)
    events: list[RollEvent] = []
    result = Roller(backend, AdminProbe(admin), settings=settings, notify=events.append).run()
    ((stopped, _),) = backend.restarts  # one broker touched, then the roll stopped
    assert result.state == RollState.ABORTED
    assert f"broker-{stopped} did not come back" in result.message
    assert events[-1].reason == "RollAborted" and events[-1].type == "Warning"
    others = [i for i in pids if i != stopped]
    assert all(roll_cluster.brokers[i].pid == pids[i] for i in others)
    assert all(roll_cluster.brokers[i].running for i in others)


def test_lowering_the_protocol_version_is_refused(fresh_cluster: ClusterFactory) -> None:
    cluster = fresh_cluster(brokers=2, overrides={"inter.broker.protocol.version": "2"})
    pids = {i: b.pid for i, b in cluster.brokers.items()}
    with Admin(cluster.bootstrap) as admin:
        backend = RecordingBackend(cluster, admin, protocol_version="1")
        events: list[RollEvent] = []
        result = Roller(backend, AdminProbe(admin), settings=FAST, notify=events.append).run()
    assert result.state == RollState.REFUSED
    assert "below the version in force 2" in result.message
    assert backend.restarts == [] and {i: b.pid for i, b in cluster.brokers.items()} == pids
    assert [e.reason for e in events] == ["RollRefused"]


def test_raising_the_protocol_version_rolls_every_broker_onto_it(
    fresh_cluster: ClusterFactory,
) -> None:
    cluster = fresh_cluster(brokers=2)
    with Admin(cluster.bootstrap) as admin:
        backend = RecordingBackend(cluster, admin, protocol_version="2")
        result = Roller(backend, AdminProbe(admin), settings=FAST).run()
        versions = AdminProbe(admin).brokers()[1]
    assert result.state == RollState.FINISHED
    assert {v.protocol_version for v in versions.values()} == {"2"}
