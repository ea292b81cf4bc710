"""Consumers' group members against the broker's group coordinator, both without I/O.

Each :class:`~headwater.client.group.classic.member.GroupMember` is driven as
``ConsumerCoordinator.poll`` drives it: a JoinGroup or SyncGroup it sent stays in flight
(as a request id of the pure :class:`headwater.groups.coordinator.GroupCoordinator`)
until the coordinator answers, and every "poll" of one member takes 200 ms of virtual
time whatever the answer is doing.  Covers what issue 15 broke: members polled in turn
from one thread settle into one assignment, eager and cooperative; a member leaving or
crashing; a static member coming back.  Invariant checked after every step: no
partition is owned by two members at once under cooperative rebalancing.
"""

from __future__ import annotations

import pytest
from headwater.client.group import requests
from headwater.client.group.classic import protocol
from headwater.client.group.classic.member import (
    AssignmentChange,
    GroupMember,
    Joined,
    MemberState,
    Outcome,
)
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.groups.values import (
    JoinGroupResponse,
    Protocol,
    SyncGroupResponse,
)

from tests.unit.groups.harness import Harness

TOPIC, PARTITIONS, POLL_MS, HEARTBEAT_EVERY = "t", 6, 200, 3
ALL = frozenset(TopicPartition(TOPIC, p) for p in range(PARTITIONS))


class Consumer:
    """One consumer's group client, with its in-flight call as a coordinator request id."""

    def __init__(self, h: Harness, assignor: str, instance: str | None = None) -> None:
        self.h, self.assignor, self.instance = h, assignor, instance
        self.member = GroupMember(
            group_instance_id=instance,
            cooperative=assignor == "cooperative-sticky",
            retry_backoff_ms=100,
            now_ms=h.now,
        )
        self.inflight: tuple[str, int, int] | None = None  # (kind, request id, generation)
        self.polls = 0
        self.revoked: list[frozenset[TopicPartition]] = []

    def poll(self) -> None:
        """What ``ConsumerCoordinator.poll`` does, one step per answer, then 200 ms pass."""
        self.polls += 1
        for _ in range(4):
            if not self._step():
                break
        if self.polls % HEARTBEAT_EVERY == 0:
            self.heartbeat()
        self.h.advance(POLL_MS)

    def _step(self) -> bool:
        m, h = self.member, self.h
        if self.inflight is not None:
            kind, rid, generation = self.inflight
            if rid not in h.replies:
                return False  # still held by the coordinator: carried over
            self.inflight = None
            if kind == "join":
                self._joined(h.join_response(rid))
            else:
                self._synced(h.sync_response(rid), generation)
            return True
        if not m.join_due(h.now):
            return False
        start = m.start_join()
        if start.revoke:
            self.revoked.append(start.revoke)
        sub = protocol.encode_subscription(
            protocol.ConsumerSubscription((TOPIC,), tuple(sorted(start.owned)), start.generation_id)
        )
        rid = h.join(
            start.member_id,
            instance=self.instance,
            protocols=(Protocol(self.assignor, sub),),
            session_ms=6_000,
            rebalance_ms=30_000,
        )
        self.inflight = ("join", rid, start.generation_id)
        return True

    def _joined(self, resp: JoinGroupResponse) -> None:
        joined = self.member.on_join_response(
            error_code=resp.error_code,
            member_id=resp.member_id,
            generation_id=resp.generation_id,
            protocol=resp.protocol_name,
            leader=resp.leader,
            now_ms=self.h.now,
        )
        if isinstance(joined, Outcome):
            assert joined is Outcome.RETRY, resp
            return
        assert isinstance(joined, Joined)
        assignments = {}
        if joined.is_leader and not resp.skip_assignment:
            out = requests.leader_assignments(resp, {TOPIC: PARTITIONS})
            assignments = {a.member_id: a.assignment for a in out}
        rid = self.h.sync(
            joined.member_id, joined.generation_id, assignments, instance=self.instance
        )
        self.inflight = ("sync", rid, joined.generation_id)

    def _synced(self, resp: SyncGroupResponse, generation: int) -> None:
        tps = () if resp.error_code else protocol.decode_assignment(resp.assignment).partitions
        change = self.member.on_sync_response(
            generation_id=generation, error_code=resp.error_code, assignment=tps, now_ms=self.h.now
        )
        if isinstance(change, AssignmentChange) and change.revoked:
            self.revoked.append(change.revoked)
        else:
            assert change is Outcome.RETRY or isinstance(change, AssignmentChange), change

    def heartbeat(self) -> None:
        due = self.member.heartbeat_due()
        if due is not None:
            code = self.h.heartbeat(due[1], due[0], instance=self.instance)
            self.member.on_heartbeat_response(generation_id=due[0], error_code=code)

    def leave(self) -> None:
        if self.member.member_id and self.instance is None:
            self.h.leave(self.member.member_id)
        self.member.close()


def exclusive(consumers: list[Consumer]) -> None:
    owned = [tp for c in consumers for tp in c.member.owned]
    assert len(owned) == len(set(owned)), [sorted(c.member.owned) for c in consumers]


def settled(h: Harness, consumers: list[Consumer]) -> bool:
    members = [c.member for c in consumers]
    return (
        h.state() == "Stable"
        and all(m.state is MemberState.STABLE and not m.rejoin_needed for m in members)
        and all(c.inflight is None for c in consumers)
        and frozenset().union(*(m.owned for m in members)) == ALL
        and sum(len(m.owned) for m in members) == PARTITIONS
        and len({m.generation_id for m in members}) == 1
    )


def run(h: Harness, consumers: list[Consumer], *, rounds: int = 100) -> int:
    """Poll the consumers in turn, as from one thread, until settled; returns the rounds."""
    for n in range(1, rounds + 1):
        for c in consumers:
            c.poll()
            if all(x.member.cooperative for x in consumers):
                exclusive(consumers)
        if settled(h, consumers):
            return n
    raise AssertionError(
        f"not settled after {rounds} rounds: {[c.member.state for c in consumers]}"
    )


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
@pytest.mark.parametrize("n", [2, 3, 6])
def test_members_polled_from_one_thread_settle(assignor: str, n: int) -> None:
    h = Harness()
    consumers = [Consumer(h, assignor) for _ in range(n)]
    rounds = run(h, consumers)
    assert rounds <= 10, f"{rounds} rounds to settle"
    assert sorted(len(c.member.owned) for c in consumers) == [PARTITIONS // n] * n
    for _ in range(20):  # and stay settled: heartbeats keep every session alive
        for c in consumers:
            c.poll()
    assert settled(h, consumers)


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_a_member_joining_a_settled_group(assignor: str) -> None:
    h = Harness()
    consumers = [Consumer(h, assignor) for _ in range(2)]
    run(h, consumers)
    before = {id(c): c.member.owned for c in consumers}
    consumers.append(Consumer(h, assignor))
    run(h, consumers)
    assert all(len(c.member.owned) == 2 for c in consumers)
    if assignor == "cooperative-sticky":  # kept partitions were never revoked
        for c in consumers[:2]:
            kept = before[id(c)] & c.member.owned
            assert all(not (kept & r) for r in c.revoked)


def test_a_member_leaving_hands_its_partitions_over() -> None:
    h = Harness()
    consumers = [Consumer(h, "range") for _ in range(3)]
    run(h, consumers)
    consumers.pop().leave()
    run(h, consumers)
    assert sorted(len(c.member.owned) for c in consumers) == [3, 3]


def test_a_crashed_member_is_expired_and_the_rest_settle() -> None:
    h = Harness()
    consumers = [Consumer(h, "range") for _ in range(3)]
    run(h, consumers)
    consumers.pop()  # stops polling and heartbeating, without leaving
    rounds = run(h, consumers, rounds=200)
    assert rounds * 2 * POLL_MS >= 6_000 - 3 * HEARTBEAT_EVERY * POLL_MS  # waited for the session
    assert sorted(len(c.member.owned) for c in consumers) == [3, 3]


def test_a_static_member_comes_back_to_its_partitions() -> None:
    h = Harness()
    consumers = [Consumer(h, "range", instance=f"i-{k}") for k in range(3)]
    run(h, consumers)
    owned = consumers[1].member.owned
    consumers[1] = Consumer(h, "range", instance="i-1")  # restarted: no member id yet
    run(h, consumers)
    assert consumers[1].member.owned == owned


def test_an_old_static_instance_is_fenced_by_its_replacement() -> None:
    h = Harness()
    consumers = [Consumer(h, "range", instance=f"i-{k}") for k in range(2)]
    run(h, consumers)
    old = consumers[0]
    consumers[0] = Consumer(h, "range", instance="i-0")
    run(h, consumers)
    due = old.member.heartbeat_due()
    assert due is not None
    code = h.heartbeat(due[1], due[0], instance="i-0")
    assert code is ErrorCode.FENCED_INSTANCE_ID
    assert old.member.on_heartbeat_response(generation_id=due[0], error_code=code) is Outcome.FENCED
    assert old.member.state is MemberState.FENCED
