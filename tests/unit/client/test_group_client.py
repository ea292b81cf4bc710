"""The consumer's group client over gRPC against the broker's real group coordinator.

Real :class:`headwater.Consumer` objects, the in-process fake broker for metadata and
fetches, and the broker's own GroupService and coordinator runtime in-process for the
group (see ``group_coordinator.py``).  Covers the I/O around the state machine: consumers
polled alternately from one thread settle and read every record once; ``commit`` and
``committed`` round-trip; the rebalance listener sees eager revocation before the new
assignment, and an eager rebalance restarts kept partitions at their committed offsets;
a second consumer with the same ``group.instance.id`` fences the first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import headwater
import pytest
from headwater import errors
from headwater.client.group.listener import ConsumerRebalanceListener

from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.group_coordinator import InProcessCoordinator

TP = headwater.TopicPartition
SETTINGS: dict[str, Any] = {
    "session_timeout_ms": 3000,
    "heartbeat_interval_ms": 200,
    "auto_offset_reset": "earliest",
    "request_timeout_ms": 5000,
    "retry_backoff_ms": 50,
}


@pytest.fixture
def coordinator() -> Iterator[InProcessCoordinator]:
    c = InProcessCoordinator()
    yield c
    c.stop()


def consumer(
    broker: FakeBroker, coordinator: InProcessCoordinator, **kw: Any
) -> headwater.Consumer:
    return headwater.Consumer(
        bootstrap_servers=(broker.bootstrap, coordinator.address),
        group_id="g",
        **{**SETTINGS, **kw},
    )


def produce(broker: FakeBroker, topic: str, n: int, partitions: int) -> None:
    with headwater.Producer(broker.bootstrap, linger_ms=0) as p:
        for i in range(n):
            p.send(topic, f"r{i}".encode(), partition=i % partitions)
        p.flush(10)


class Recording(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[Any]]] = []

    def on_partitions_revoked(self, revoked: set[Any]) -> None:
        self.events.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[Any]) -> None:
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost: set[Any]) -> None:
        self.events.append(("lost", set(lost)))


def settled(cs: list[headwater.Consumer], partitions: int) -> bool:
    owned = [tp.partition for c in cs for tp in c.assignment()]
    return sorted(owned) == list(range(partitions)) and all(c.assignment() for c in cs)


def test_consumers_in_one_thread_settle_read_once_and_commit(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 4)
    produce(broker, "t", 40, 4)
    cs = [consumer(broker, coordinator) for _ in range(3)]
    seen: list[tuple[int, int]] = []
    slowest = 0.0
    try:
        for c in cs:
            c.subscribe(["t"])
        for _ in range(300):
            for c in cs:
                start = time.monotonic()
                seen += [(r.partition, r.offset) for r in c.poll(100)]
                slowest = max(slowest, time.monotonic() - start)
            if settled(cs, 4) and len(seen) >= 40:
                break
        assert settled(cs, 4)
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(10)]
        assert slowest < 3.0, f"a poll(100) took {slowest:.1f}s"  # the wide bound
        for c in cs:
            c.commit()
        assert {p: cs[0].committed(TP("t", p)) for p in range(4)} == dict.fromkeys(range(4), 10)
    finally:
        for c in cs:
            c.close()


def test_eager_rebalance_revokes_before_the_new_assignment(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 2)
    listener = Recording()
    first = consumer(broker, coordinator)
    first.subscribe(["t"], listener=listener)
    second = consumer(broker, coordinator)
    try:
        for _ in range(100):
            first.poll(100)
            if first.assignment() == {TP("t", 0), TP("t", 1)}:
                break
        assert listener.events == [("assigned", {TP("t", 0), TP("t", 1)})]
        second.subscribe(["t"])
        for _ in range(200):
            first.poll(100)
            second.poll(100)
            if settled([first, second], 2):
                break
        assert settled([first, second], 2)
        assert listener.events[1] == ("revoked", {TP("t", 0), TP("t", 1)})
        assert listener.events[-1] == ("assigned", first.assignment())
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(
    ("assignor", "read_again"),
    [
        (["range"], True),
        (["range", "cooperative-sticky"], True),
        (["cooperative-sticky", "range"], True),
        (["cooperative-sticky"], False),
    ],
)
def test_a_rebalance_restarts_kept_partitions_at_the_committed_offset_only_when_eager(
    broker: FakeBroker, coordinator: InProcessCoordinator, assignor: list[str], read_again: bool
) -> None:
    """Eager (Kafka's onJoinPrepare): every partition is revoked and the new assignment
    starts at the committed offsets, kept partitions too, so records read past the
    commit come again.  Cooperative: kept partitions go on from their positions.  The
    protocol is the one every configured assignor supports: eager while any is eager."""
    broker.create("t", 2)
    produce(broker, "t", 20, 2)
    kw = {"enable_auto_commit": False, "partition_assignment_strategy": assignor}
    first = consumer(broker, coordinator, **kw)
    first.subscribe(["t"])
    second = consumer(broker, coordinator, **kw)
    try:
        seen: list[tuple[int, int]] = []
        for _ in range(100):
            seen += [(r.partition, r.offset) for r in first.poll(100)]
            if len(seen) >= 20:
                break
        assert sorted(seen) == [(p, o) for p in range(2) for o in range(10)]
        first.commit({TP("t", 0): 4, TP("t", 1): 4})
        second.subscribe(["t"])
        again: list[tuple[int, int]] = []
        for _ in range(200):
            again += [(r.partition, r.offset) for r in first.poll(100)]
            second.poll(100)
            if settled([first, second], 2) and (len(again) >= 6 or not read_again):
                break
        assert settled([first, second], 2)
        (kept,) = first.assignment()
        for _ in range(3):
            again += [(r.partition, r.offset) for r in first.poll(100)]
        expected = [(kept.partition, o) for o in range(4, 10)] if read_again else []
        assert sorted(again) == expected
        assert first.position(kept) == 10
    finally:
        first.close()
        second.close()


def test_a_second_static_member_fences_the_first(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 2)
    old = consumer(broker, coordinator, group_instance_id="i-1")
    old.subscribe(["t"])
    new = consumer(broker, coordinator, group_instance_id="i-1")
    try:
        for _ in range(100):
            old.poll(100)
            if old.assignment():
                break
        new.subscribe(["t"])
        for _ in range(100):
            new.poll(100)
            if new.assignment():
                break
        assert new.assignment() == {TP("t", 0), TP("t", 1)}
        with pytest.raises(errors.FencedInstanceIdError):
            for _ in range(100):
                old.poll(100)
    finally:
        old.close()
        new.close()
