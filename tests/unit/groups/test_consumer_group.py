"""The KIP-848 consumer group state machine, heartbeat by heartbeat, in virtual time.

Covers :mod:`headwater.groups.consumer.group`: the member and group state tables (every
legal edge and every other refused); joining, the group epoch and the target assignment;
reconciliation, where a partition reaches its new owner only after the old owner has
revoked it (the invariant "no partition held by two members" is checked after every
heartbeat); members the change does not concern keep their partitions throughout;
member-epoch fencing; leaving, session and revocation timeouts; static members.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from headwater.errors import ErrorCode
from headwater.groups.consumer.group import (
    GROUP_TRANSITIONS,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    MEMBER_TRANSITIONS,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    GroupState,
    Heartbeat,
    HeartbeatResult,
    IllegalStateTransition,
    MemberState,
)
from headwater.values import TopicPartition

TP = TopicPartition
T = frozenset({"t"})
COUNTS = {"t": 6}
SESSION = 10_000
ALL = frozenset(TP("t", p) for p in range(6))

# -- the tables --------------------------------------------------------------------------

G = GroupState
GROUP_LEGAL = {
    (G.EMPTY, G.ASSIGNING),
    (G.EMPTY, G.DEAD),
    (G.ASSIGNING, G.RECONCILING),
    (G.ASSIGNING, G.STABLE),
    (G.ASSIGNING, G.EMPTY),
    (G.RECONCILING, G.ASSIGNING),
    (G.RECONCILING, G.STABLE),
    (G.RECONCILING, G.EMPTY),
    (G.STABLE, G.ASSIGNING),
    (G.STABLE, G.EMPTY),
}
M = MemberState
MEMBER_ILLEGAL = {(M.UNRELEASED_PARTITIONS, M.UNRELEASED_PARTITIONS)}


def test_group_table_is_exactly_the_documented_edges() -> None:
    assert {(a, b) for a, bs in GROUP_TRANSITIONS.items() for b in bs} == GROUP_LEGAL


@pytest.mark.parametrize(("a", "b"), list(itertools.product(G, G)), ids=str)
def test_group_transition(a: GroupState, b: GroupState) -> None:
    if (a, b) in GROUP_LEGAL:
        assert a.transition_to(b) is b
    else:
        with pytest.raises(IllegalStateTransition):
            a.transition_to(b)


@pytest.mark.parametrize(("a", "b"), list(itertools.product(M, M)), ids=str)
def test_member_transition(a: MemberState, b: MemberState) -> None:
    assert set(MEMBER_TRANSITIONS) == set(MemberState)
    if (a, b) in MEMBER_ILLEGAL:
        with pytest.raises(IllegalStateTransition):
            a.transition_to(b)
    else:
        assert a.transition_to(b) is b


# -- a driver ----------------------------------------------------------------------------


class World:
    """A group and its members' side: each member revokes what it is told to at once."""

    def __init__(self, *, assignor: str = "uniform") -> None:
        ids = itertools.count(1)
        self.group = ConsumerGroup(
            "g",
            assignors=(assignor,),
            session_timeout_ms=SESSION,
            member_id_factory=lambda: f"m{next(ids)}",
        )
        self.now = 0
        self.epoch: dict[str, int] = {}
        self.owned: dict[str, frozenset[TopicPartition]] = {}
        self.rebalance_ms = 300_000
        self.paused: set[str] = set()
        """Members whose owned partitions never change (stuck or slow to revoke)."""

    def send(self, hb: Heartbeat) -> HeartbeatResult:
        result = self.group.heartbeat(hb, now_ms=self.now, partition_counts=COUNTS)
        self.check()
        return result

    def join(self, *, instance: str | None = None, topics: frozenset[str] = T) -> str:
        r = self.send(Heartbeat("", JOIN_EPOCH, instance, topics, frozenset(), self.rebalance_ms))
        assert r.error_code is ErrorCode.NONE, r
        self._apply(r)
        return r.member_id

    def beat(self, mid: str) -> HeartbeatResult:
        hb = Heartbeat(mid, self.epoch[mid], owned=self.owned[mid])
        r = self.send(dataclasses.replace(hb, rebalance_timeout_ms=self.rebalance_ms))
        if r.error_code is ErrorCode.NONE:
            self._apply(r)
        return r

    def _apply(self, r: HeartbeatResult) -> None:
        self.epoch[r.member_id] = r.member_epoch
        if r.member_id not in self.paused:
            self.owned[r.member_id] = r.assignment  # revoke and take at once

    def rounds(self, n: int = 5) -> None:
        for _ in range(n):
            for mid in list(self.epoch):
                if mid in self.group.members:
                    self.beat(mid)
            self.now += 1000

    def check(self) -> None:
        """No partition held (assigned or pending revocation) by two members at once,
        and none owned by two members as they see it."""
        held = [tp for m in self.group.members.values() for tp in m.held]
        assert len(held) == len(set(held)), self.group.members
        live = [tp for mid, tps in self.owned.items() if mid in self.group.members for tp in tps]
        assert len(live) == len(set(live)), self.owned

    def stable(self) -> bool:
        g = self.group
        return g.state is GroupState.STABLE and all(
            m.member_epoch == g.group_epoch and m.assigned == g.target[m.member_id]
            for m in g.members.values()
        )


# -- joining and reconciliation -------------------------------------------------------


def test_the_first_member_gets_everything_at_epoch_one() -> None:
    w = World()
    assert w.group.state is GroupState.EMPTY
    mid = w.join()
    assert (w.group.group_epoch, w.group.target_epoch, w.epoch[mid]) == (1, 1, 1)
    assert w.owned[mid] == ALL and w.group.state is GroupState.STABLE


def test_a_joining_member_gets_partitions_only_after_the_owner_revokes() -> None:
    w = World()
    a = w.join()
    b = w.join()
    g = w.group
    assert g.group_epoch == 2 and g.state is GroupState.RECONCILING
    assert w.owned[b] == frozenset()  # everything is still a's
    assert g.members[b].state is MemberState.UNRELEASED_PARTITIONS
    assert w.epoch[b] == 2
    r = w.beat(a)  # a learns what to revoke, keeps the rest, stays at epoch 1
    assert r.member_epoch == 1 and len(r.assignment) == 3
    assert g.members[a].state is MemberState.UNREVOKED_PARTITIONS
    w.beat(a)  # a reports the revocation: moves to epoch 2
    assert w.epoch[a] == 2 and g.members[a].state is MemberState.STABLE
    w.beat(b)  # the released partitions reach b
    assert len(w.owned[b]) == 3 and w.owned[a] | w.owned[b] == ALL
    assert w.stable()


def test_members_the_change_does_not_concern_keep_their_partitions() -> None:
    w = World()
    ms = [w.join() for _ in range(3)]
    w.rounds()
    assert w.stable()
    before = {m: w.owned[m] for m in ms}
    history: dict[str, list[frozenset[TopicPartition]]] = {m: [] for m in ms}
    w.send(Heartbeat(ms[2], w.epoch[ms[2]], owned=w.owned[ms[2]]))
    w.send(Heartbeat(ms[2], LEAVE_EPOCH))
    for _ in range(4):
        for m in ms[:2]:
            w.beat(m)
            history[m].append(w.owned[m])
    assert w.stable()
    for m in ms[:2]:  # only ever gained: never paused a partition it kept
        assert all(before[m] <= seen for seen in history[m])
    assert w.owned[ms[0]] | w.owned[ms[1]] == ALL


def test_a_slow_revoker_holds_back_only_its_partitions() -> None:
    w = World()
    a = w.join()
    w.paused.add(a)  # a never gives anything up
    b = w.join()
    w.rounds(3)
    g = w.group
    assert g.members[a].state is MemberState.UNREVOKED_PARTITIONS
    assert g.members[b].state is MemberState.UNRELEASED_PARTITIONS
    assert w.owned[b] == frozenset() and g.state is GroupState.RECONCILING
    w.paused.clear()
    w.rounds(2)
    assert w.stable()


def test_revocation_timeout_removes_the_member_and_frees_its_partitions() -> None:
    w = World()
    w.rebalance_ms = 5000
    a = w.join()
    w.paused.add(a)
    b = w.join()
    w.beat(a)
    deadline = w.group.members[a].revocation_deadline_ms
    assert deadline == w.now + 5000
    w.rounds(5)  # both keep heartbeating; a still does not revoke
    assert w.group.tick(now_ms=w.now - 1, partition_counts=COUNTS) == []
    assert w.group.tick(now_ms=deadline, partition_counts=COUNTS) == [a]
    w.epoch.pop(a)
    w.rounds(2)
    assert w.owned[b] == ALL and w.stable()


def test_session_expiry_removes_a_silent_member() -> None:
    w = World()
    a, b = w.join(), w.join()
    w.rounds()
    w.epoch.pop(b)  # b goes silent; a keeps heartbeating
    w.rounds(SESSION // 1000)
    assert b in w.group.members
    w.rounds(1)
    assert w.group.tick(now_ms=w.now, partition_counts=COUNTS) == [b]
    w.rounds(2)
    assert w.owned[a] == ALL and w.stable()


def test_leaving_bumps_the_epoch_and_last_one_out_empties_the_group() -> None:
    w = World()
    a = w.join()
    epoch = w.group.group_epoch
    r = w.send(Heartbeat(a, LEAVE_EPOCH))
    assert r.member_epoch == LEAVE_EPOCH and w.group.group_epoch == epoch + 1
    assert w.group.state is GroupState.EMPTY and not w.group.members
    w.group.delete()
    assert w.group.state is GroupState.DEAD
    assert w.send(Heartbeat("", JOIN_EPOCH, None, T)).error_code is (
        ErrorCode.COORDINATOR_NOT_AVAILABLE
    )


def test_a_subscription_change_bumps_the_epoch_and_reassigns() -> None:
    w = World()
    a, b = w.join(), w.join()
    w.rounds()
    epoch = w.group.group_epoch
    w.send(Heartbeat(b, w.epoch[b], subscribed_topics=frozenset({"u"}), owned=w.owned[b]))
    assert w.group.group_epoch == epoch + 1
    w.rounds()
    assert w.owned[a] == ALL and w.owned[b] == frozenset() and w.stable()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_many_members_settle(assignor: str) -> None:
    w = World(assignor=assignor)
    ms = [w.join() for _ in range(4)]
    w.rounds(6)
    assert w.stable()
    assert sorted(len(w.owned[m]) for m in ms) == [1, 1, 2, 2]


# -- fencing and errors ------------------------------------------------------------------


def test_unknown_member_and_stale_epoch_are_refused() -> None:
    w = World()
    a = w.join()
    assert w.send(Heartbeat("nobody", 1)).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert w.send(Heartbeat("nobody", LEAVE_EPOCH)).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert w.send(Heartbeat(a, 7, owned=w.owned[a])).error_code is ErrorCode.FENCED_MEMBER_EPOCH


def test_the_previous_epoch_is_accepted_when_the_answer_was_lost() -> None:
    w = World()
    a = w.join()
    b = w.join()
    w.beat(a)
    w.beat(a)  # a moved to epoch 2 ...
    assert w.epoch[a] == 2
    kept = w.owned[a]
    lost = Heartbeat(a, 1, owned=kept)  # ... but never heard: it retries with epoch 1
    assert w.send(lost).error_code is ErrorCode.NONE
    zombie = Heartbeat(a, 1, owned=ALL)  # owning more than assigned: a zombie
    assert w.send(zombie).error_code is ErrorCode.FENCED_MEMBER_EPOCH
    assert b in w.group.members


def test_a_join_without_subscription_is_invalid() -> None:
    w = World()
    r = w.send(Heartbeat("", JOIN_EPOCH))
    assert r.error_code is ErrorCode.INVALID_REQUEST and not w.group.members


def test_unknown_assignor_is_refused() -> None:
    with pytest.raises(ValueError, match="assignors"):
        ConsumerGroup("g", assignors=("sticky",), member_id_factory=lambda: "m")
    w = World()
    r = w.send(Heartbeat("", JOIN_EPOCH, None, T, frozenset(), server_assignor="range"))
    assert r.error_code is ErrorCode.UNSUPPORTED_ASSIGNOR and not w.group.members


def test_the_assignor_most_members_ask_for_is_used() -> None:
    ids = itertools.count(1)
    group = ConsumerGroup(
        "g", assignors=("uniform", "range"), member_id_factory=lambda: f"m{next(ids)}"
    )
    assert group.assignor == "uniform"
    for choice in ("range", "range", "uniform"):
        hb = Heartbeat("", JOIN_EPOCH, None, T, frozenset(), server_assignor=choice)
        assert group.heartbeat(hb, now_ms=0, partition_counts=COUNTS).error_code is ErrorCode.NONE
    assert group.assignor == "range"
    epoch = group.group_epoch
    m3 = group.members["m3"]
    hb = Heartbeat("m3", m3.member_epoch, owned=m3.assigned, server_assignor="range")
    group.heartbeat(hb, now_ms=0, partition_counts=COUNTS)
    assert group.group_epoch == epoch + 1  # an assignor change is a member change
    # range over m1, m2, m3 in id order: contiguous pairs (the target, not yet reconciled)
    assert group.target["m1"] == {TP("t", 0), TP("t", 1)}


# -- static members ------------------------------------------------------------------------


def test_a_static_member_restarting_in_time_takes_its_place_without_a_new_epoch() -> None:
    w = World()
    a = w.join(instance="i-a")
    b = w.join(instance="i-b")
    w.rounds()
    epoch, owned_a = w.group.group_epoch, w.owned[a]
    r = w.send(Heartbeat(a, STATIC_LEAVE_EPOCH, instance_id="i-a"))
    assert r.member_epoch == STATIC_LEAVE_EPOCH and w.group.group_epoch == epoch
    w.epoch.pop(a)
    new = w.join(instance="i-a")
    assert new != a and w.group.group_epoch == epoch
    assert w.owned[new] == owned_a and w.epoch[new] == epoch
    w.rounds()
    assert w.stable() and b in w.group.members


def test_a_second_static_member_with_a_live_instance_id_is_refused() -> None:
    w = World()
    w.join(instance="i-a")
    r = w.send(Heartbeat("", JOIN_EPOCH, "i-a", T))
    assert r.error_code is ErrorCode.UNRELEASED_INSTANCE_ID


def test_a_static_member_gone_past_its_session_is_removed() -> None:
    w = World()
    a = w.join(instance="i-a")
    b = w.join()
    w.rounds()
    w.send(Heartbeat(a, STATIC_LEAVE_EPOCH, instance_id="i-a"))
    w.epoch.pop(a)
    w.rounds(SESSION // 1000 + 1)
    assert w.group.tick(now_ms=w.now, partition_counts=COUNTS) == [a]
    w.rounds()
    assert a not in w.group.members and w.owned[b] == ALL and w.stable()
    assert "i-a" not in w.group.static_members


# -- regex subscriptions -------------------------------------------------------------------


def regex_join(group: ConsumerGroup, regex: str, counts: dict[str, int]) -> HeartbeatResult:
    hb = Heartbeat("", JOIN_EPOCH, None, None, frozenset(), subscribed_topic_regex=regex)
    return group.heartbeat(hb, now_ms=0, partition_counts=counts)


def test_a_regex_subscribes_to_every_matching_topic_but_internal_ones() -> None:
    counts = {"orders-eu": 2, "orders-us": 1, "payments": 3, "__consumer_offsets": 6}
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    r = regex_join(group, "orders-.*|__.*", counts)
    assert r.error_code is ErrorCode.NONE and group.group_epoch == 1
    assert r.assignment == {TP("orders-eu", 0), TP("orders-eu", 1), TP("orders-us", 0)}


def test_a_topic_created_under_a_regex_bumps_the_epoch_and_is_assigned() -> None:
    counts = {"orders-eu": 1}
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    r = regex_join(group, "orders-.*", counts)
    assert r.member_epoch == 1
    counts["orders-us"] = 2
    assert group.tick(now_ms=1, partition_counts=counts) == []
    assert group.group_epoch == 2 and group.state is GroupState.RECONCILING
    hb = Heartbeat("m1", 1, owned=r.assignment)
    r = group.heartbeat(hb, now_ms=2, partition_counts=counts)
    assert r.member_epoch == 2
    assert r.assignment == {TP("orders-eu", 0), TP("orders-us", 0), TP("orders-us", 1)}
    assert group.state is GroupState.STABLE


def test_an_invalid_regex_is_refused() -> None:
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    r = regex_join(group, "orders-(", {"orders-eu": 1})
    assert r.error_code is ErrorCode.INVALID_REQUEST and not group.members
