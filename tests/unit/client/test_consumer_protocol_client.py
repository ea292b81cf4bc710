"""Real consumers with ``group_protocol="consumer"`` (KIP-848) against the broker's group
coordinator in-process (see ``group_coordinator.py``), polled from one thread.

Covers the client's reconciliation end to end: several members settle, read every
record once and commit with their member epoch; a joining member takes a partition only
after its owner revoked it, and no partition is ever in two members' assignments; the
members a change does not concern keep their partitions (no revocation) when one joins
or leaves.
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
    "group_protocol": "consumer",
    "heartbeat_interval_ms": 200,
    "auto_offset_reset": "earliest",
    "request_timeout_ms": 5000,
    "retry_backoff_ms": 50,
}
Events = list[tuple[str, str, frozenset[Any]]]


@pytest.fixture
def coordinator() -> Iterator[InProcessCoordinator]:
    c = InProcessCoordinator()
    yield c
    c.stop()


class Recording(ConsumerRebalanceListener):
    """Appends ``(event, member, partitions)`` to a log shared by every member."""

    def __init__(self, name: str, log: Events) -> None:
        self.name, self.log = name, log

    def on_partitions_revoked(self, revoked: set[Any]) -> None:
        self.log.append(("revoked", self.name, frozenset(revoked)))

    def on_partitions_assigned(self, assigned: set[Any]) -> None:
        self.log.append(("assigned", self.name, frozenset(assigned)))

    def on_partitions_lost(self, lost: set[Any]) -> None:
        self.log.append(("lost", self.name, frozenset(lost)))


def member(
    broker: FakeBroker,
    coordinator: InProcessCoordinator,
    topic: str,
    log: Events,
    name: str,
    **kw: Any,
) -> headwater.Consumer:
    c = headwater.Consumer(
        bootstrap_servers=(broker.bootstrap, coordinator.address),
        group_id="g",
        **{**SETTINGS, **kw},
    )
    c.subscribe([topic], listener=Recording(name, log))
    return c


def produce(broker: FakeBroker, topic: str, n: int, partitions: int) -> None:
    with headwater.Producer(broker.bootstrap, linger_ms=0) as p:
        for i in range(n):
            p.send(topic, f"r{i}".encode(), partition=i % partitions)
        p.flush(10)


def settle(
    cs: list[headwater.Consumer], partitions: int, *, seen: list[tuple[int, int]] | None = None
) -> None:
    """Poll every member in turn until they own every partition between them, evenly
    (reconciled: a member's share grows only as others revoke), checking after each
    poll that no partition has two owners."""
    for _ in range(400):
        for c in cs:
            recs = c.poll(50)
            if seen is not None:
                seen += [(r.partition, r.offset) for r in recs]
            owned = [tp for c in cs for tp in c.assignment()]
            assert len(owned) == len(set(owned)), "a partition with two owners"
        owned = [tp for c in cs for tp in c.assignment()]
        sizes = [len(c.assignment()) for c in cs]
        if len(owned) == partitions and max(sizes) - min(sizes) <= 1:
            return  # balanced, as the broker's uniform assignor leaves it
    raise AssertionError(f"never settled: {[sorted(c.assignment()) for c in cs]}")


def test_members_in_one_thread_settle_read_once_and_commit(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 4)
    coordinator.create_topic("t", 4)
    produce(broker, "t", 40, 4)
    log: Events = []
    cs = [member(broker, coordinator, "t", log, f"m{i}") for i in range(3)]
    seen: list[tuple[int, int]] = []
    slowest = 0.0
    try:
        settle(cs, 4, seen=seen)
        for _ in range(200):
            if len(seen) >= 40:
                break
            for c in cs:
                start = time.monotonic()
                seen += [(r.partition, r.offset) for r in c.poll(50)]
                slowest = max(slowest, time.monotonic() - start)
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(10)]
        assert slowest < 3.0, f"a poll(50) took {slowest:.1f}s"  # a wide bound
        for c in cs:
            c.commit()
        assert {p: cs[0].committed(TP("t", p)) for p in range(4)} == dict.fromkeys(range(4), 10)
    finally:
        for c in cs:
            c.close()


def test_a_joining_member_takes_partitions_only_after_the_owner_revoked(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 4)
    coordinator.create_topic("t", 4)
    log: Events = []
    first = member(broker, coordinator, "t", log, "first")
    second: headwater.Consumer | None = None
    try:
        settle([first], 4)
        second = member(broker, coordinator, "t", log, "second")
        settle([first, second], 4)
        given = set(second.assignment())
        assert given and first.assignment() == {TP("t", p) for p in range(4)} - given
        revoked_at = {
            tp: i
            for i, (ev, who, tps) in enumerate(log)
            for tp in tps
            if ev == "revoked" and who == "first"
        }
        for i, (ev, who, tps) in enumerate(log):
            if ev == "assigned" and who == "second":
                assert all(revoked_at[tp] < i for tp in tps), log
        assert not [e for e in log if e[0] == "lost"]
    finally:
        first.close()
        if second is not None:
            second.close()


def test_unaffected_members_keep_their_partitions_when_one_joins_or_leaves(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 6)
    coordinator.create_topic("t", 6)
    log: Events = []
    cs = [member(broker, coordinator, "t", log, f"m{i}") for i in range(2)]
    try:
        settle(cs, 6)
        before = {f"m{i}": set(c.assignment()) for i, c in enumerate(cs)}
        del log[:]
        cs.append(member(broker, coordinator, "t", log, "m2"))
        settle(cs, 6)
        after = {f"m{i}": set(c.assignment()) for i, c in enumerate(cs)}
        for name in ("m0", "m1"):  # only what moved to m2 was revoked, nothing else
            revoked = set().union(*(tps for ev, who, tps in log if ev == "revoked" and who == name))
            assert revoked == before[name] - after[name]
            assert not [e for e in log if e[0] == "assigned" and e[1] == name]
        del log[:]
        cs.pop().close()  # m2 leaves: the others only gain
        settle(cs, 6)
        assert [e[0] for e in log if e[1] != "m2"] == ["assigned"] * len(
            [e for e in log if e[1] != "m2"]
        )
        for i, c in enumerate(cs):
            assert after[f"m{i}"] <= c.assignment()
    finally:
        for c in cs:
            c.close()


def test_group_protocol_and_remote_assignor_are_checked(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    with pytest.raises(ValueError, match="group_protocol"):
        headwater.Consumer(bootstrap_servers=broker.bootstrap, group_protocol="eager")
    with pytest.raises(ValueError, match="group_remote_assignor"):
        headwater.Consumer(bootstrap_servers=broker.bootstrap, group_remote_assignor="range")
    broker.create("t", 1)
    coordinator.create_topic("t", 1)
    c = member(broker, coordinator, "t", [], "m", group_remote_assignor="nope")
    try:
        with pytest.raises(errors.UnsupportedAssignorError):
            for _ in range(100):
                c.poll(50)
    finally:
        c.close()


def test_a_pattern_is_resolved_by_the_broker(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    for topic, n in (("orders-eu", 2), ("orders-us", 1), ("other", 2)):
        broker.create(topic, n)
        coordinator.create_topic(topic, n)
    produce(broker, "orders-us", 3, 1)
    c = headwater.Consumer(
        bootstrap_servers=(broker.bootstrap, coordinator.address), group_id="g", **SETTINGS
    )
    try:
        c.subscribe(pattern=r"orders-\w+")
        got: list[Any] = []
        for _ in range(200):
            got += c.poll(50)
            if len(c.assignment()) == 3 and len(got) == 3:
                break
        assert c.assignment() == {TP("orders-eu", 0), TP("orders-eu", 1), TP("orders-us", 0)}
        assert sorted(r.offset for r in got) == [0, 1, 2]
    finally:
        c.close()


def test_unsubscribe_revokes_and_leaves(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 2)
    coordinator.create_topic("t", 2)
    log: Events = []
    a, b = (member(broker, coordinator, "t", log, n) for n in ("a", "b"))
    try:
        settle([a, b], 2)
        given = a.assignment()
        a.unsubscribe()
        assert ("revoked", "a", frozenset(given)) in log and a.assignment() == set()
        settle([b], 2)
    finally:
        a.close()
        b.close()


def test_a_member_that_stops_polling_leaves_and_rejoins_on_its_next_poll(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 2)
    coordinator.create_topic("t", 2)
    log: Events = []
    slow = member(broker, coordinator, "t", log, "slow", max_poll_interval_ms=1500)
    busy = member(broker, coordinator, "t", log, "busy")
    try:
        settle([slow, busy], 2)
        lost = frozenset(slow.assignment())
        for _ in range(100):  # only busy polls: slow's heartbeat thread makes it leave
            busy.poll(50)
            if len(busy.assignment()) == 2:
                break
        assert len(busy.assignment()) == 2
        slow.poll(0)
        assert ("lost", "slow", lost) in log
        settle([slow, busy], 2)
    finally:
        slow.close()
        busy.close()


def test_a_commit_at_a_stale_epoch_is_retried_after_the_next_heartbeat(
    broker: FakeBroker, coordinator: InProcessCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.create("t", 1)
    coordinator.create_topic("t", 1)
    c = member(broker, coordinator, "t", [], "m")
    try:
        settle([c], 1)
        group = c._group
        assert group is not None
        calls, real = group._calls, group._calls.call
        sent: list[int] = []

        def stale_once(method: str, request: Any, *, deadline_ms: float) -> Any:
            if method == "OffsetCommit":
                sent.append(request.generation_id)
                if len(sent) == 1:  # as if a heartbeat had just moved the epoch on
                    request.generation_id -= 1
            return real(method, request, deadline_ms=deadline_ms)

        monkeypatch.setattr(calls, "call", stale_once)
        c.commit({TP("t", 0): 0})
        assert len(sent) == 2 and sent[0] == sent[1] >= 1
        assert c.committed(TP("t", 0)) == 0
    finally:
        c.close()


def test_a_fenced_member_loses_its_partitions_and_rejoins(
    broker: FakeBroker, coordinator: InProcessCoordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.create("t", 2)
    coordinator.create_topic("t", 2)
    log: Events = []
    a = member(broker, coordinator, "t", log, "a")
    try:
        settle([a], 2)
        group = a._group
        assert group is not None
        real = group._send_heartbeat  # type: ignore[attr-defined]

        def unreachable(plan: Any, *, raise_errors: bool = False) -> Any:
            raise errors.RequestTimedOutError("cut off")

        monkeypatch.setattr(group, "_send_heartbeat", unreachable)
        time.sleep(3.5)  # past the coordinator's 3 s consumer session timeout
        monkeypatch.setattr(group, "_send_heartbeat", real)
        for _ in range(100):
            a.poll(50)
            if ("lost", "a", frozenset({TP("t", 0), TP("t", 1)})) in log and len(
                a.assignment()
            ) == 2:
                break
        assert ("lost", "a", frozenset({TP("t", 0), TP("t", 1)})) in log
        assert a.assignment() == {TP("t", 0), TP("t", 1)}  # rejoined at epoch 0
    finally:
        a.close()


def test_a_static_member_leaves_with_minus_2_and_its_successor_takes_its_place(
    broker: FakeBroker, coordinator: InProcessCoordinator
) -> None:
    broker.create("t", 4)
    coordinator.create_topic("t", 4)
    log: Events = []
    other = member(broker, coordinator, "t", log, "other")
    first = member(broker, coordinator, "t", log, "first", group_instance_id="i-1")
    try:
        settle([other, first], 4)
        place, kept = first.assignment(), other.assignment()
        del log[:]
        first.close()  # epoch -2: the place and partitions wait for the same instance id
        first = member(broker, coordinator, "t", log, "second", group_instance_id="i-1")
        settle([other, first], 4)
        assert first.assignment() == place and other.assignment() == kept
        assert not [e for e in log if e[1] == "other"]  # nothing moved for the other
    finally:
        other.close()
        first.close()
