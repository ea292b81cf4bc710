"""Online upgrade of a classic group to the consumer protocol (headwater.groups.migration):
Kafka's rules (policy, protocol type, size), Stable-only conversion, the classic members
served from the consumer group (REBALANCE_IN_PROGRESS, rejoin, SyncGroup of the target),
revoke-before-handover across both kinds of members, offsets kept, and failover replay."""

from __future__ import annotations

import pytest
from headwater.client.group.classic.protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from headwater.errors import ErrorCode
from headwater.groups import migration
from headwater.groups.consumer.group import ConsumerGroup
from headwater.groups.coordinator import GroupCoordinator
from headwater.groups.values import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    JoinGroupRequest,
    JoinGroupResponse,
    Protocol,
)
from headwater.values import TopicPartition

from tests.unit.groups.harness import Harness

COUNTS = {"t": 4}


def T(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition("t", p) for p in ps)


def sub(owned: frozenset[TopicPartition] = frozenset()) -> tuple[Protocol, ...]:
    return (Protocol("range", encode_subscription(ConsumerSubscription(("t",), tuple(owned)))),)


def classic_group(
    h: Harness,
    plan: list[frozenset[TopicPartition]],
    instances: list[str | None] | None = None,
    **kw: object,
) -> list[str]:
    """A Stable classic group whose i-th member (static if ``instances[i]``) holds
    ``plan[i]``; returns member ids."""
    iids = instances or [None] * len(plan)
    ids = [h.new_member(protocols=sub(), **kw) if i is None else "" for i in iids]
    rids = [
        h.join(mid, protocols=sub(), instance=i, **kw)  # type: ignore[arg-type]
        for mid, i in zip(ids, iids, strict=True)
    ]
    responses = [h.join_response(r) for r in rids]
    assert all(r.error_code is ErrorCode.NONE for r in responses)
    ids = [r.member_id for r in responses]
    gen, leader = responses[0].generation_id, responses[0].leader
    plan_bytes = {
        m: encode_assignment(ConsumerAssignment(tuple(sorted(p))))
        for m, p in zip(ids, plan, strict=True)
    }
    for m in ids:
        if m != leader:
            h.sync(m, gen)
    h.sync(leader, gen, plan_bytes)
    assert h.state() == "Stable"
    return ids


def consumer_hb(
    h: Harness, member_id: str = "", epoch: int = 0, owned: frozenset[TopicPartition] = T()
) -> ConsumerGroupHeartbeatResponse:
    req = ConsumerGroupHeartbeatRequest(
        "g",
        member_id,
        epoch,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("t",) if epoch == 0 else None,
        topic_partitions=tuple(sorted(owned)) if epoch != 0 else None,
    )
    d = h.coordinator.consumer_group_heartbeat(
        req, request_id=next(h._ids), now_ms=h.now, partition_counts=COUNTS
    )
    h._apply(d)
    ((_, resp),) = d.replies
    assert isinstance(resp, ConsumerGroupHeartbeatResponse)
    check_invariant(h.coordinator)
    return resp


def classic_rejoin(
    h: Harness, member_id: str, owned: frozenset[TopicPartition] = T()
) -> JoinGroupResponse:
    req = JoinGroupRequest("g", member_id, "consumer", sub(owned), 10_000, 30_000)
    d = h.coordinator.join_group(
        req, request_id=next(h._ids), now_ms=h.now, partition_counts=COUNTS
    )
    h._apply(d)
    ((_, resp),) = d.replies
    assert isinstance(resp, JoinGroupResponse)
    check_invariant(h.coordinator)
    return resp


def synced(h: Harness, member_id: str, generation: int) -> frozenset[TopicPartition]:
    resp = h.sync_response(h.sync(member_id, generation))
    assert resp.error_code is ErrorCode.NONE
    return frozenset(decode_assignment(resp.assignment).partitions)


def check_invariant(c: GroupCoordinator) -> None:
    """No partition held (assigned or pending revocation) by two members at once."""
    for group in c.consumer.groups.values():
        seen: set[TopicPartition] = set()
        for m in group.members.values():
            assert not seen & m.held, f"{sorted(seen & m.held)} held twice"
            seen |= m.held


def assigned(r: ConsumerGroupHeartbeatResponse) -> frozenset[TopicPartition]:
    return frozenset(r.assignment or ())


def consumer_group(h: Harness) -> ConsumerGroup:
    return h.coordinator.consumer.groups["g"]


def test_a_stable_classic_group_converts_keeping_assignments_and_offsets() -> None:
    h = Harness()
    a, b = classic_group(h, [T(0, 1), T(2, 3)])
    generation = h.coordinator.groups["g"].generation_id
    h.commit({("t", 0): 10, ("t", 2): 20}, member_id=a, generation=generation)
    r = consumer_hb(h)
    assert r.error_code is ErrorCode.NONE
    assert r.assignment == ()  # everything is still held by the classic members
    group = consumer_group(h)
    assert group.members[a].is_classic and group.members[a].assigned == T(0, 1)
    assert group.members[b].member_epoch == generation
    assert h.coordinator.describe_group("g").group_type == "consumer"
    assert h.committed("t", 0) == 10 and h.committed("t", 2) == 20
    assert h.coordinator.groups["g"].members == {}  # the classic group is gone ...
    tombstones = [rec for rec in h.log if rec.value is None]
    assert tombstones, "the classic group metadata is tombstoned"


@pytest.mark.parametrize(
    ("policy", "converts"),
    [("bidirectional", True), ("upgrade", True), ("downgrade", False), ("disabled", False)],
)
def test_the_migration_policy_decides(policy: str, converts: bool) -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, consumer_migration_policy=policy))
    classic_group(h, [T(0, 1, 2, 3)])
    r = consumer_hb(h)
    if converts:
        assert r.error_code is ErrorCode.NONE
    else:
        assert r.error_code is ErrorCode.GROUP_ID_NOT_FOUND
        assert "online upgrade is disabled" in r.error_message
        assert "g" not in h.coordinator.consumer.groups and h.state() == "Stable"


def test_a_group_of_another_protocol_type_does_not_convert() -> None:
    h = Harness()
    classic_group(h, [T(0)], protocol_type="connect")
    r = consumer_hb(h)
    assert r.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert "consumer embedded protocol" in r.error_message


def test_size_limits_the_conversion_and_a_refused_join_leaves_the_group_classic() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, consumer_max_size=1))
    classic_group(h, [T(0, 1), T(2, 3)])
    r = consumer_hb(h)
    assert r.error_code is ErrorCode.GROUP_ID_NOT_FOUND
    assert "maximum size" in r.error_message
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, consumer_max_size=2))
    classic_group(h, [T(0, 1), T(2, 3)])
    logged = len(h.log)
    r = consumer_hb(h)  # converts (2 <= 2) but the third member does not fit
    assert r.error_code is ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "g" not in h.coordinator.consumer.groups and h.state() == "Stable"
    assert len(h.log) == logged


def test_a_rebalancing_classic_group_converts_only_once_stable() -> None:
    h = Harness()
    a, _ = classic_group(h, [T(0, 1), T(2, 3)])
    h.join(a, protocols=sub())  # a rejoins: PreparingRebalance
    r = consumer_hb(h)
    assert r.error_code is ErrorCode.REBALANCE_IN_PROGRESS  # retriable: try again later
    assert "g" not in h.coordinator.consumer.groups


def test_eager_classic_members_hand_over_only_after_revoking() -> None:
    h = Harness()
    a, b = classic_group(h, [T(0, 1), T(2, 3)])
    gen = h.coordinator.groups["g"].generation_id
    c = consumer_hb(h)
    assert h.heartbeat(a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(b, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    # The new member gets nothing while the classic members hold everything.
    c = consumer_hb(h, c.member_id, c.member_epoch)
    assert c.assignment == ()
    # a revokes everything (eager) and rejoins: it gets its target, a's other
    # partition is free for c only now.
    ja = classic_rejoin(h, a)
    assert ja.error_code is ErrorCode.NONE and ja.leader == ""
    kept_a = synced(h, a, ja.generation_id)
    c = consumer_hb(h, c.member_id, c.member_epoch)
    got = assigned(c)
    assert got and not got & kept_a
    jb = classic_rejoin(h, b)
    kept_b = synced(h, b, jb.generation_id)
    c = consumer_hb(h, c.member_id, c.member_epoch, owned=got)
    assert assigned(c) | kept_a | kept_b == T(0, 1, 2, 3)
    assert h.heartbeat(a, ja.generation_id) is ErrorCode.NONE
    assert h.heartbeat(b, jb.generation_id) is ErrorCode.NONE
    assert h.heartbeat(a, gen - 1) is ErrorCode.ILLEGAL_GENERATION
    assert consumer_group(h).state.value == "Stable"


def test_a_cooperative_classic_member_keeps_what_it_must_revoke_until_it_says_so() -> None:
    h = Harness()
    (a,) = classic_group(h, [T(0, 1, 2, 3)])
    c = consumer_hb(h)
    # a rejoins still owning everything: the SyncGroup gives it only what it keeps.
    j = classic_rejoin(h, a, owned=T(0, 1, 2, 3))
    kept = synced(h, a, j.generation_id)
    assert len(kept) == 2
    c = consumer_hb(h, c.member_id, c.member_epoch)
    assert c.assignment == ()  # a has not said it revoked the other two
    assert h.heartbeat(a, j.generation_id) is ErrorCode.REBALANCE_IN_PROGRESS
    j = classic_rejoin(h, a, owned=kept)
    assert synced(h, a, j.generation_id) == kept
    c = consumer_hb(h, c.member_id, c.member_epoch)
    assert assigned(c) == T(0, 1, 2, 3) - kept


def test_classic_commits_use_the_generation_and_a_classic_leave_frees_partitions() -> None:
    h = Harness()
    a, b = classic_group(h, [T(0, 1), T(2, 3)])
    gen = h.coordinator.groups["g"].generation_id
    c = consumer_hb(h)
    assert h.commit({("t", 0): 5}, member_id=a, generation=gen).error_code is ErrorCode.NONE
    stale = h.commit({("t", 0): 3}, member_id=a, generation=gen - 1)
    assert stale.error_code is ErrorCode.ILLEGAL_GENERATION
    assert h.committed("t", 0) == 5
    assert h.leave(a) is ErrorCode.NONE
    assert a not in consumer_group(h).members
    c = consumer_hb(h, c.member_id, c.member_epoch)
    group = consumer_group(h)  # a's partitions are free: c takes its target at once
    assert assigned(c) == group.target[c.member_id] - group.members[b].held
    assert c.assignment


def test_the_converted_group_survives_a_coordinator_failover() -> None:
    h = Harness()
    a, b = classic_group(h, [T(0, 1), T(2, 3)])
    gen = h.coordinator.groups["g"].generation_id
    h.commit({("t", 1): 7}, member_id=a, generation=gen)
    consumer_hb(h)
    fresh = h.replayed()
    group = fresh.consumer.groups["g"]
    assert group.members[a].is_classic and group.members[a].assigned == T(0, 1)
    assert group.members[b].classic_session_timeout_ms == 10_000
    assert group.members[a].classic_protocols == sub()
    assert fresh.describe_group("g").group_type == "consumer"
    assert (
        fresh.fetch_offsets("g", [TopicPartition("t", 1)]).offsets[TopicPartition("t", 1)]
        is not None
    )
    h.coordinator = fresh
    assert h.heartbeat(a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    j = classic_rejoin(h, a)
    assert j.error_code is ErrorCode.NONE


def test_the_broker_side_codec_reads_the_clients_bytes() -> None:
    owned = T(1, 3)
    data = encode_subscription(ConsumerSubscription(("t", "u"), tuple(owned), 4, b"x"))
    decoded = migration.decode_subscription(data)
    assert decoded.topics == {"t", "u"} and decoded.owned == owned
    assert migration.decode_assignment(encode_assignment(ConsumerAssignment(tuple(owned)))) == (
        owned
    )
    assert frozenset(decode_assignment(migration.encode_assignment(owned)).partitions) == owned


def test_a_new_classic_member_joins_a_consumer_group_as_a_classic_member() -> None:
    h = Harness()
    a, b = classic_group(h, [T(0, 1), T(2, 3)])
    c = consumer_hb(h)
    first = classic_rejoin(h, "")
    assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
    d = first.member_id
    j = classic_rejoin(h, d)
    assert j.error_code is ErrorCode.NONE
    assert synced(h, d, j.generation_id) == T()  # everything is still held
    for m in (a, b):
        synced(h, m, classic_rejoin(h, m).generation_id)
    j = classic_rejoin(h, d)
    got = synced(h, d, j.generation_id)
    c = consumer_hb(h, c.member_id, c.member_epoch)
    group = consumer_group(h)
    assert got == group.target[d] and got
    assert len(group.members) == 4 and group.members[d].is_classic
    assert h.heartbeat(d, j.generation_id - 1) is ErrorCode.ILLEGAL_GENERATION


@pytest.mark.parametrize("how", ["leave", "session expiry"])
def test_the_last_consumer_member_gone_the_group_goes_back_to_classic(how: str) -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, consumer_session_timeout_ms=45_000))
    a, b = classic_group(h, [T(0, 1), T(2, 3)])
    gen = h.coordinator.groups["g"].generation_id
    h.commit({("t", 3): 9}, member_id=b, generation=gen)
    c = consumer_hb(h)
    epoch = consumer_group(h).group_epoch
    if how == "leave":
        consumer_hb(h, c.member_id, -1)
    else:
        h.now += 20_000  # the classic members keep heartbeating; c does not
        assert h.heartbeat(a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
        assert h.heartbeat(b, gen) is ErrorCode.REBALANCE_IN_PROGRESS
        h.now += 30_000
        assert h.heartbeat(a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
        assert h.heartbeat(b, gen) is ErrorCode.REBALANCE_IN_PROGRESS
        h._apply(h.coordinator.tick(now_ms=h.now, partition_counts=COUNTS))
    assert "g" not in h.coordinator.consumer.groups
    classic = h.coordinator.groups["g"]
    assert h.state() == "PreparingRebalance" and set(classic.members) == {a, b}
    assert classic.generation_id >= epoch
    downgraded_at = classic.generation_id
    assert h.committed("t", 3) == 9
    # The classic rebalance takes over: both rejoin and the leader assigns.
    rids = [h.join(m, protocols=sub()) for m in (a, b)]
    joined = [h.join_response(r) for r in rids]
    assert all(r.error_code is ErrorCode.NONE for r in joined)
    new_gen, leader = joined[0].generation_id, joined[0].leader
    assert new_gen == downgraded_at + 1  # the rebalance's generation
    assert h.replayed().describe_group("g").group_type == "classic"
    plan = {
        m: encode_assignment(ConsumerAssignment(tuple(sorted(p))))
        for m, p in zip((a, b), (T(0, 1), T(2, 3)), strict=True)
    }
    h.sync(leader, new_gen, plan)
    assert h.state() == "Stable"


def test_downgrade_follows_the_policy() -> None:
    h = Harness(
        GroupConfig(group_initial_rebalance_delay_ms=0, consumer_migration_policy="upgrade")
    )
    classic_group(h, [T(0, 1), T(2, 3)])
    c = consumer_hb(h)
    consumer_hb(h, c.member_id, -1)
    assert h.coordinator.describe_group("g").group_type == "consumer"  # classic members only


def test_a_restarted_static_classic_member_takes_its_place_and_fences_the_old_one() -> None:
    h = Harness()
    static, _ = classic_group(h, [T(0, 1), T(2, 3)], ["i-1", None])
    c = consumer_hb(h)
    group = consumer_group(h)
    assert group.members[static].instance_id == "i-1"
    held = group.members[static].held
    req = JoinGroupRequest("g", "", "consumer", sub(), 10_000, 30_000, group_instance_id="i-1")
    d = h.coordinator.join_group(req, request_id=next(h._ids), now_ms=h.now)
    h._apply(d)
    ((_, resp),) = d.replies
    assert isinstance(resp, JoinGroupResponse) and resp.error_code is ErrorCode.NONE
    new = resp.member_id
    assert new != static and static not in group.members
    # Its place and partitions (less what moved to c: the new process owns nothing).
    assert group.members[new].held <= held and group.static_members["i-1"] == new
    assert group.members[new].held == held & group.target[new]
    check_invariant(h.coordinator)
    zombie = JoinGroupRequest(
        "g", static, "consumer", sub(), 10_000, 30_000, group_instance_id="i-1"
    )
    d = h.coordinator.join_group(zombie, request_id=next(h._ids), now_ms=h.now)
    ((_, resp),) = d.replies
    assert isinstance(resp, JoinGroupResponse)
    assert resp.error_code is ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(static, resp.generation_id) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.error_code is ErrorCode.NONE
