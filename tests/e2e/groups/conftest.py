"""A real 3-broker cluster for the consumer-group e2e tests, and a threaded group member.

One cluster per module (on the session's ZooKeeper) keeps the suite within a few
minutes on a 2-core machine; each test uses its own topics and groups.  Brokers run with
``group.initial.rebalance.delay.ms=0`` and a small ``__consumer_offsets``; consumers use
a 6 s session timeout and 500 ms heartbeats, so membership changes settle in seconds.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import headwater
import pytest
from headwater.client.group.listener import ConsumerRebalanceListener
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

TP = headwater.TopicPartition

BROKER_OVERRIDES = {
    "offsets.topic.num.partitions": "6",
    "offsets.topic.replication.factor": "3",
    "group.initial.rebalance.delay.ms": "0",
    "log.cleaner.backoff.ms": "5000",
}
CONSUMER_SETTINGS: dict[str, Any] = {
    "session_timeout_ms": 6000,
    "heartbeat_interval_ms": 500,
    "auto_offset_reset": "earliest",
    "request_timeout_ms": 15000,
}


def wait_until(predicate: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every 100 ms; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    data_dir: Path = tmp_path_factory.mktemp("groups-cluster")
    with Cluster(
        brokers=3,
        data_dir=data_dir,
        zookeeper=zookeeper.connect_string,
        overrides=BROKER_OVERRIDES,
    ) as c:
        yield c


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[headwater.Admin]:
    with headwater.Admin(cluster.bootstrap, default_api_timeout_ms=30000) as a:
        yield a


@pytest.fixture
def topic(cluster: Cluster, admin: headwater.Admin) -> Callable[..., str]:
    """``topic(partitions=6) -> name``, with every partition's leader elected."""

    def make(partitions: int = 6, replication_factor: int = 3) -> str:
        name = f"g-{uuid.uuid4().hex[:10]}"
        admin.create_topic(name, partitions, replication_factor)

        def ready() -> bool:
            desc = admin.describe_topics([name]).get(name)
            return (
                desc is not None
                and len(desc.partitions) == partitions
                and all(p.leader >= 0 for p in desc.partitions)
            )

        wait_until(ready, timeout_s=30, what=f"leaders of {name}")
        return name

    return make


def produce(bootstrap: str, topic: str, count: int, *, partitions: int = 1) -> None:
    """Send ``count`` records round-robin over ``partitions`` and require every one acked.

    Each record is bounded by the producer's ``delivery_timeout_ms`` (120 s), as in Kafka;
    the flush waits a little longer than that, so a record that cannot be delivered fails
    here with its own error (after a broker kill: which partition, which error) rather
    than with a flush deadline shorter than the producer's own.
    """
    with headwater.Producer(bootstrap) as p:
        sent = [p.send(topic, f"r{i}".encode(), partition=i % partitions) for i in range(count)]
        p.flush(150)
        for future in sent:
            future.result(0)


class RecordingListener(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.revoked: list[set[headwater.TopicPartition]] = []
        self.assigned: list[set[headwater.TopicPartition]] = []
        self.lost: list[set[headwater.TopicPartition]] = []

    def on_partitions_revoked(self, revoked: set[headwater.TopicPartition]) -> None:
        self.revoked.append(set(revoked))

    def on_partitions_assigned(self, assigned: set[headwater.TopicPartition]) -> None:
        self.assigned.append(set(assigned))

    def on_partitions_lost(self, lost: set[headwater.TopicPartition]) -> None:
        self.lost.append(set(lost))


class Member:
    """A group consumer polling on its own thread (a Consumer is single-threaded)."""

    def __init__(self, bootstrap: str, group: str, topic: str, **settings: Any) -> None:
        self.listener = RecordingListener()
        self.consumer = headwater.Consumer(
            bootstrap_servers=bootstrap, group_id=group, **{**CONSUMER_SETTINGS, **settings}
        )
        self.consumer.subscribe([topic], listener=self.listener)
        self.records: list[headwater.ConsumerRecord] = []
        self.error: BaseException | None = None
        self._assignment: set[headwater.TopicPartition] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                recs = self.consumer.poll(100)
                with self._lock:
                    self.records += recs
                    self._assignment = set(self.consumer.assignment())
        except BaseException as exc:
            self.error = exc

    @property
    def assignment(self) -> set[headwater.TopicPartition]:
        with self._lock:
            return set(self._assignment)

    def partitions(self) -> list[int]:
        return sorted(tp.partition for tp in self.assignment)

    def stop(self) -> None:
        """Stop polling and close the consumer (a dynamic member leaves the group)."""
        self._stop.set()
        self._thread.join(30)
        self.consumer.close()


@pytest.fixture
def members() -> Iterator[Callable[..., Member]]:
    """A factory of :class:`Member` that stops every member at the end of the test."""
    started: list[Member] = []

    def make(bootstrap: str, group: str, topic: str, **settings: Any) -> Member:
        m = Member(bootstrap, group, topic, **settings)
        started.append(m)
        return m

    yield make
    for m in started:
        if not m._stop.is_set():
            m.stop()
