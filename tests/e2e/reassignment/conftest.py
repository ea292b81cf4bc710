"""Fixtures and helpers for the reassignment e2e tests (issue 17).

A four-broker cluster (real ZooKeeper, real broker processes) with
``min.insync.replicas=2``; one replicated topic whose single partition is moved
off one broker onto another, slowly enough to kill a process mid-move: it is
pre-filled, and the move is throttled with Kafka's configs (the rates on the
cluster default, the replicas lists on the topic).  While it moves, an
``acks=all`` idempotent producer writes and a consumer group reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import headwater
import pytest
from headwater.client import NewTopic, TopicPartition
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

TOPIC = "moving"
TP = TopicPartition(TOPIC, 0)
RECORD = 1024
"""Bytes of each pre-filled record's value."""


@pytest.fixture
def quad(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """Four fresh brokers, min.insync.replicas=2 and short lag and session times."""
    overrides = {
        "min.insync.replicas": "2",
        "replica.lag.time.max.ms": "3000",
        "zookeeper.session.timeout.ms": "4000",
        "auto.leader.rebalance.enable": "false",
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": "4",
    }
    with Cluster(
        brokers=4, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as cluster:
        yield cluster


@pytest.fixture
def admin(quad: Cluster) -> Iterator[headwater.Admin]:
    with headwater.Admin(quad.bootstrap, default_api_timeout_ms=60000) as a:
        yield a


@dataclass(frozen=True)
class Roles:
    """Who is who for a move of ``TP`` from ``origin`` to ``target`` (preferred first)."""

    controller: int
    leaving: int
    arriving: int
    staying: int

    @property
    def origin(self) -> list[int]:
        return [self.leaving, self.staying, self.controller]

    @property
    def target(self) -> list[int]:
        return [self.arriving, self.staying, self.controller]


def wait_until(predicate: Callable[[], object], *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def setup_topic(cluster: Cluster, admin: headwater.Admin, *, prefill_mib: float) -> Roles:
    """Create ``TOPIC`` (RF 3, the leaving broker leads) and fill it with ``prefill_mib``."""
    controller = cluster.controller_id()
    assert controller is not None
    others = [b for b in sorted(cluster.brokers) if b != controller]
    roles = Roles(controller, leaving=others[0], arriving=others[2], staying=others[1])
    admin.create_topics([NewTopic(TOPIC, replica_assignment={0: roles.origin})])
    wait_until(lambda: cluster.leader_for(TOPIC, 0) == roles.leaving, timeout_s=30, what="leader")
    count = int(prefill_mib * 1024 * 1024 / RECORD)
    with headwater.Producer(cluster.bootstrap, linger_ms=20) as p:
        futures = [
            p.send(TOPIC, b"f%07d" % i + b"." * (RECORD - 8), partition=0) for i in range(count)
        ]
        p.flush(120)
        for f in futures:
            f.result(0)
    wait_until(
        lambda: len(cluster.isr_for(TOPIC, 0)) == 3, timeout_s=60, what="all replicas in sync"
    )
    return roles


def throttle(admin: headwater.Admin, roles: Roles, *, rate: int) -> None:
    """Kafka's ``--throttle``: the rates, and which replicas of the partition are throttled."""
    admin.alter_broker_configs(
        None,
        {
            "leader.replication.throttled.rate": str(rate),
            "follower.replication.throttled.rate": str(rate),
        },
    )
    admin.alter_topic_configs(
        TOPIC,
        set_configs={
            "leader.replication.throttled.replicas": ",".join(f"0:{b}" for b in roles.origin),
            "follower.replication.throttled.replicas": f"0:{roles.arriving}",
        },
    )


def unthrottle(admin: headwater.Admin) -> None:
    admin.alter_broker_configs(
        None,
        {"leader.replication.throttled.rate": None, "follower.replication.throttled.rate": None},
    )


def start_move(admin: headwater.Admin, target: Sequence[int]) -> None:
    answers = admin.alter_partition_reassignments({TP: list(target)})
    assert answers == {TP: None}


def moving(admin: headwater.Admin) -> bool:
    return TP in admin.list_partition_reassignments([TP])


def wait_moved(
    cluster: Cluster, admin: headwater.Admin, target: Sequence[int], *, timeout_s: float
) -> None:
    """Until the move is over: nothing in progress and the assignment is ``target``."""

    def done() -> bool:
        a = cluster.zk.get_assignment(TOPIC)
        return not moving(admin) and a is not None and list(a.partitions[0]) == list(target)

    wait_until(done, timeout_s=timeout_s, what=f"the move to {list(target)}")


class Load:
    """An acks=all idempotent producer writing unique values on its own thread."""

    def __init__(self, bootstrap: str, *, per_second: int = 100) -> None:
        self.producer = headwater.Producer(
            bootstrap, acks="all", enable_idempotence=True, linger_ms=5
        )
        self._futures: list[tuple[bytes, Any]] = []
        self._stop = threading.Event()
        self._per_second = per_second
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        try:
            while not self._stop.is_set():
                value = b"live-%06d" % i
                self._futures.append((value, self.producer.send(TOPIC, value, partition=0)))
                i += 1
                time.sleep(1.0 / self._per_second)
        except BaseException as exc:
            self.error = exc

    def sent(self) -> int:
        return len(self._futures)

    def stop(self) -> list[bytes]:
        """Stop, flush, and return the acknowledged values, in send order."""
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(150)
        acked = []
        for value, future in self._futures:
            try:
                future.result(0)
            except Exception:
                continue
            acked.append(value)
        self.producer.close(10)
        assert self.error is None, self.error
        return acked


class GroupReader:
    """A consumer-group member reading ``TOPIC`` on its own thread."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self.consumer = headwater.Consumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            request_timeout_ms=15000,
        )
        self.consumer.subscribe([TOPIC])
        self.values: list[bytes] = []
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                records = self.consumer.poll(200)
                with self._lock:
                    self.values += [r.value for r in records if r.value is not None]
        except BaseException as exc:
            self.error = exc

    def seen(self) -> set[bytes]:
        with self._lock:
            return set(self.values)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


def read_log(bootstrap: str) -> list[bytes]:
    """Every value of ``TP`` from the start, with a plain assigned consumer (no group)."""
    with headwater.Admin(bootstrap) as a:
        end = a.list_offsets({TP: "latest"})[TP]
    assert end is not None
    consumer = headwater.Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    values: list[bytes] = []
    try:
        consumer.assign([TP])
        consumer.seek_to_beginning(TP)
        deadline = time.monotonic() + 60
        while consumer.position(TP) < end.offset and time.monotonic() < deadline:
            values += [r.value for r in consumer.poll(500) if r.value is not None]
    finally:
        consumer.close()
    return values


def assert_exactly_once(log: list[bytes], acked: list[bytes]) -> None:
    """Every acknowledged value is in the log once; no value is there twice."""
    live = [v for v in log if v.startswith(b"live-")]
    assert len(live) == len(set(live)), "a value was written twice"
    missing = set(acked) - set(live)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:3]}"
    prefilled = [v for v in log if v.startswith(b"f")]
    assert len(prefilled) == len(set(prefilled))


def replica_bytes(cluster: Cluster, broker_id: int) -> int:
    """Bytes of ``TP``'s log on one broker's disk (0: none)."""
    directory = cluster.brokers[broker_id].log_dir / f"{TOPIC}-0"
    if not directory.is_dir():
        return 0
    return sum(f.stat().st_size for f in directory.glob("*.log"))
