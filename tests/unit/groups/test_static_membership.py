"""Static membership (group.instance.id): restart without rebalance, fencing of duplicates."""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.groups.values import Protocol

from tests.unit.groups.harness import Harness


def _static_group(h: Harness) -> tuple[str, str, int]:
    a = h.join_response(h.join(instance="ia", client_id="a")).member_id  # generation 1
    rb = h.join(instance="ib", client_id="b")
    ra = h.join(a, instance="ia", client_id="a")
    b = h.join_response(rb).member_id
    gen = h.join_response(ra).generation_id
    leader = h.join_response(ra).leader
    follower = b if leader == a else a
    h.sync(follower, gen, instance="ib" if follower == b else "ia")
    h.sync(leader, gen, {a: b"A", b: b"B"}, instance="ia" if leader == a else "ib")
    assert h.state() == "Stable"
    return a, b, gen


def test_static_member_joins_without_member_id_required() -> None:
    h = Harness()
    resp = h.join_response(h.join(instance="i1"))
    assert resp.error_code is ErrorCode.NONE
    assert resp.generation_id == 1


def test_restart_within_session_gets_same_assignment_and_generation() -> None:
    h = Harness()
    _a, b, gen = _static_group(h)
    h.advance(3_000)  # b restarts: a new process, no member id
    resp = h.join_response(h.join(instance="ib", client_id="b"))
    assert resp.error_code is ErrorCode.NONE
    assert resp.generation_id == gen
    assert resp.member_id != b
    assert h.state() == "Stable"
    sync = h.sync_response(h.sync(resp.member_id, gen, instance="ib"))
    assert sync.assignment == b"B"
    # the restart was persisted: a new coordinator knows the new member id
    assert resp.member_id in {m.member_id for m in h.replayed().describe_group("g").members}


def test_old_member_of_a_restarted_instance_is_fenced() -> None:
    h = Harness()
    _a, b, gen = _static_group(h)
    new_b = h.join_response(h.join(instance="ib")).member_id
    assert h.heartbeat(b, gen, instance="ib") is ErrorCode.FENCED_INSTANCE_ID
    assert h.sync_response(h.sync(b, gen, instance="ib")).error_code is (
        ErrorCode.FENCED_INSTANCE_ID
    )
    assert h.commit({("t", 0): 1}, member_id=b, generation=gen, instance="ib").error_code is (
        ErrorCode.FENCED_INSTANCE_ID
    )
    assert h.join_response(h.join(b, instance="ib")).error_code is ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat(new_b, gen, instance="ib") is ErrorCode.NONE


def test_restarted_leader_skips_assignment() -> None:
    h = Harness()
    _a, _, gen = _static_group(h)
    resp = h.join_response(h.join(instance="ia"))
    assert resp.leader == resp.member_id
    assert resp.skip_assignment
    assert resp.generation_id == gen


def test_static_member_with_other_metadata_but_same_protocol_does_not_rebalance() -> None:
    """Kafka compares the selected protocol, not the metadata bytes (which carry the
    partitions a consumer owned: a restarted process owns none)."""
    h = Harness()
    _a, _b, gen = _static_group(h)
    resp = h.join_response(h.join(instance="ib", protocols=(Protocol("range", b"other"),)))
    assert resp.generation_id == gen
    assert h.state() == "Stable"


def test_static_member_changing_the_selected_protocol_triggers_rebalance() -> None:
    h = Harness()
    both = (Protocol("range", b""), Protocol("roundrobin", b""))
    a = h.join_response(h.join(instance="ia", protocols=both)).member_id
    h.sync(a, 1, {a: b"A"}, instance="ia")
    assert h.state() == "Stable"
    resp = h.join_response(h.join(instance="ia", protocols=both[::-1]))
    assert (resp.generation_id, resp.protocol_name) == (2, "roundrobin")  # a new rebalance


def test_static_member_expires_after_session_timeout() -> None:
    h = Harness()
    a, _b, gen = _static_group(h)
    for _ in range(3):
        h.advance(4_000)
        h.heartbeat(a, gen, instance="ia")
    assert h.state() == "PreparingRebalance"
    assert [m.member_id for m in h.coordinator.describe_group("g").members] == [a]


def test_static_member_leaves_by_instance_id() -> None:
    h = Harness()
    _static_group(h)
    assert h.leave("", instance="ib") is ErrorCode.NONE
    assert h.leave("", instance="ib") is ErrorCode.UNKNOWN_MEMBER_ID
    assert h.leave("wrong-id", instance="ia") is ErrorCode.FENCED_INSTANCE_ID


def test_static_member_not_rejoining_stays_through_rebalance() -> None:
    h = Harness()
    a, b, gen = _static_group(h)
    c = h.new_member(session_ms=60_000)
    rc = h.join(c, session_ms=60_000)
    h.join(a, instance="ia", session_ms=60_000)
    for _ in range(5):  # b keeps heartbeating but never rejoins
        assert h.heartbeat(b, gen, instance="ib") is ErrorCode.REBALANCE_IN_PROGRESS
        h.advance(6_000)
    assert h.join_response(rc).error_code is ErrorCode.NONE
    members = {m.member_id for m in h.coordinator.describe_group("g").members}
    assert members == {a, b, c}  # KIP-345: only the session timeout removes a static member
