"""Group membership in the coordinator: joins, generations, protocol votes, sync, leave,
session and rebalance timeouts, the initial rebalance delay, pending member ids."""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.groups.values import GroupConfig, Protocol

from tests.unit.groups.harness import Harness


def test_first_join_without_member_id_gets_member_id_required() -> None:
    h = Harness()
    resp = h.join_response(h.join(client_id="c"))
    assert resp.error_code is ErrorCode.MEMBER_ID_REQUIRED
    assert resp.member_id == "c-1"
    assert h.state() == "Empty"


def test_single_member_joins_syncs_and_is_stable() -> None:
    h = Harness()
    (m,), gen = h.form_group(1)
    assert gen == 1
    assert h.state() == "Stable"
    assert h.heartbeat(m, gen) is ErrorCode.NONE
    desc = h.coordinator.describe_group("g")
    assert desc.protocol == "range"
    assert desc.members[0].assignment == m.encode()


def test_leader_gets_members_followers_do_not() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    ra = h.join(a)
    assert ra not in h.replies  # parked until b rejoins
    rb = h.join(b)
    ja, jb = h.join_response(ra), h.join_response(rb)
    assert ja.leader == jb.leader == a
    assert {m.member_id for m in ja.members} == {a, b}
    assert jb.members == ()
    assert ja.generation_id == jb.generation_id == 1


def test_sync_waits_for_the_leader_and_distributes_assignments() -> None:
    h = Harness()
    a, b = h.new_member(), h.new_member()
    h.join(a)
    gen = h.join_response(h.join(b)).generation_id
    sb = h.sync(b, gen)
    assert sb not in h.replies
    assert h.state() == "CompletingRebalance"
    sa = h.sync(a, gen, {a: b"A", b: b"B"})
    assert h.sync_response(sa).assignment == b"A"
    assert h.sync_response(sb).assignment == b"B"
    assert h.state() == "Stable"


def test_new_member_triggers_rebalance_and_bumps_generation() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2)
    c = h.new_member()
    rc = h.join(c)
    assert h.state() == "PreparingRebalance"
    assert h.heartbeat(a, gen) is ErrorCode.REBALANCE_IN_PROGRESS
    h.join(a)
    rb = h.join(b)
    assert h.join_response(rc).generation_id == gen + 1
    assert h.join_response(rb).generation_id == gen + 1
    assert h.heartbeat(a, gen) is ErrorCode.ILLEGAL_GENERATION


def test_protocol_selected_by_vote() -> None:
    h = Harness()
    rr, rg = Protocol("roundrobin", b""), Protocol("range", b"")
    a = h.new_member(protocols=(rr, rg))
    b = h.new_member(protocols=(rg, rr))
    c = h.new_member(protocols=(rr, rg))
    h.join(a, protocols=(rr, rg))
    h.join(b, protocols=(rg, rr))
    resp = h.join_response(h.join(c, protocols=(rr, rg)))
    assert resp.protocol_name == "roundrobin"


def test_member_without_a_common_protocol_is_refused() -> None:
    h = Harness()
    h.form_group(1)
    resp = h.join_response(h.join(protocols=(Protocol("sticky", b""),)))
    assert resp.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other_type = h.join_response(h.join(protocol_type="connect"))
    assert other_type.error_code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_bad_session_timeout_and_empty_group_id_refused() -> None:
    h = Harness()
    assert h.join_response(h.join(session_ms=10)).error_code is ErrorCode.INVALID_SESSION_TIMEOUT
    h.group = ""
    assert h.join_response(h.join()).error_code is ErrorCode.INVALID_GROUP_ID


def test_oversized_member_metadata_refused() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, member_metadata_max_bytes=10))
    resp = h.join_response(h.join(protocols=(Protocol("range", b"x" * 11),)))
    assert resp.error_code is ErrorCode.INVALID_REQUEST
    assert h.coordinator.describe_group("g").members == ()


def test_unknown_member_refused_everywhere() -> None:
    h = Harness()
    _, gen = h.form_group(1)
    assert h.join_response(h.join("nobody")).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("nobody", gen) is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync_response(h.sync("nobody", gen)).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.leave("nobody") is ErrorCode.UNKNOWN_MEMBER_ID
    h.group = "unknown-group"
    assert h.heartbeat("nobody", gen) is ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_with_old_generation_refused() -> None:
    h = Harness()
    (a,), gen = h.form_group(1)
    assert h.sync_response(h.sync(a, gen - 1)).error_code is ErrorCode.ILLEGAL_GENERATION


def test_leave_rebalances_the_rest() -> None:
    h = Harness()
    (a, b, c), gen = h.form_group(3)
    assert h.leave(c) is ErrorCode.NONE
    assert h.state() == "PreparingRebalance"
    h.join(a)
    rb = h.join(b)
    assert h.join_response(rb).generation_id == gen + 1
    assert len(h.coordinator.describe_group("g").members) == 2


def test_last_member_leaving_empties_the_group_and_writes_it() -> None:
    h = Harness()
    (a,), gen = h.form_group(1)
    before = len(h.log)
    assert h.leave(a) is ErrorCode.NONE
    assert h.state() == "Empty"
    assert len(h.log) == before + 1
    assert h.replayed().describe_group("g").generation_id == gen + 1


def test_session_timeout_removes_silent_member() -> None:
    h = Harness()
    (a, _b), gen = h.form_group(2, session_ms=10_000)
    h.advance(6_000)
    assert h.heartbeat(a, gen) is ErrorCode.NONE
    h.advance(6_000)  # b silent for 12 s
    assert h.state() == "PreparingRebalance"
    assert [m.member_id for m in h.coordinator.describe_group("g").members] == [a]
    resp = h.join_response(h.join(a))
    assert resp.generation_id == gen + 1 and resp.leader == a


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    """max.poll.interval.ms: a member stuck in processing misses the rebalance."""
    h = Harness()
    (a, b), _ = h.form_group(2, session_ms=10_000, rebalance_ms=20_000)
    ra = h.join(a, session_ms=10_000, rebalance_ms=20_000)  # a rejoins; b keeps heartbeating
    for _ in range(3):
        h.advance(5_000)
        assert h.heartbeat(b, 1) is ErrorCode.REBALANCE_IN_PROGRESS
    assert ra not in h.replies
    h.advance(5_000)
    resp = h.join_response(ra)
    assert resp.error_code is ErrorCode.NONE
    assert [m.member_id for m in resp.members] == [a]


def test_initial_rebalance_delay_collects_members_into_one_generation() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    a = h.new_member()
    ra = h.join(a)
    h.advance(2_000)
    b = h.new_member()
    rb = h.join(b)
    h.advance(2_000)  # 4 s after a, 2 s after b: the delay restarted with b
    assert ra not in h.replies and rb not in h.replies
    h.advance(1_000)
    assert h.join_response(ra).generation_id == h.join_response(rb).generation_id == 1
    assert len(h.join_response(ra).members) == 2


def test_initial_delay_capped_by_rebalance_timeout() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=3_000))
    ra = h.join(h.new_member(rebalance_ms=5_000), rebalance_ms=5_000)
    for _ in range(4):
        h.advance(1_000)
        h.join(h.new_member(rebalance_ms=5_000), rebalance_ms=5_000)
    h.advance(1_000)
    assert h.join_response(ra).error_code is ErrorCode.NONE


def test_pending_member_expires_and_no_longer_blocks_the_join() -> None:
    h = Harness()
    (a,), _ = h.form_group(1)
    pending = h.new_member(session_ms=10_000)
    ra = h.join(a)
    assert ra not in h.replies
    h.advance(10_000)
    assert h.join_response(ra).error_code is ErrorCode.NONE
    # the expired id is forgotten: the client starts over with an empty member id
    assert h.join_response(h.join(pending)).error_code is ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_deadline_rebalances_when_the_leader_never_syncs() -> None:
    h = Harness()
    a, b = h.new_member(rebalance_ms=20_000), h.new_member(rebalance_ms=20_000)
    h.join(a, rebalance_ms=20_000)
    gen = h.join_response(h.join(b, rebalance_ms=20_000)).generation_id
    sb = h.sync(b, gen)
    for _ in range(4):  # the leader heartbeats but never sends its assignment
        h.advance(5_000)
        h.heartbeat(a, gen)
        h.heartbeat(b, gen)
    assert h.sync_response(sb).error_code is ErrorCode.REBALANCE_IN_PROGRESS
    assert [m.member_id for m in h.coordinator.describe_group("g").members] == [b]


def test_member_rejoining_in_stable_with_same_protocols_keeps_generation() -> None:
    h = Harness()
    (_a, b), gen = h.form_group(2)
    resp = h.join_response(h.join(b))
    assert resp.generation_id == gen and h.state() == "Stable"


def test_group_max_size() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, group_max_size=1))
    h.form_group(1)
    assert h.join_response(h.join()).error_code is ErrorCode.GROUP_MAX_SIZE_REACHED


def test_rebalance_stats_counted() -> None:
    h = Harness()
    h.form_group(2)
    stats = h.coordinator.rebalance_stats()["g"]
    assert stats.rebalances == 1
