"""Committed offsets: validation against generation and member, retention, deletion,
and rebuilding everything from the __consumer_offsets records (coordinator failover)."""

from __future__ import annotations

import struct

from headwater.errors import ErrorCode
from headwater.groups import records
from headwater.groups.values import GroupConfig, OffsetDeleteResponse, Protocol
from headwater.values import TopicPartition

from tests.unit.groups.harness import Harness


def test_member_commit_and_fetch() -> None:
    h = Harness()
    (a,), gen = h.form_group(1)
    resp = h.commit({("t", 0): 5, ("t", 1): 7}, member_id=a, generation=gen)
    assert resp.error_code is ErrorCode.NONE
    assert all(code is ErrorCode.NONE for _, code in resp.partitions)
    assert h.committed("t", 0) == 5
    assert h.committed("t", 2) is None


def test_commit_from_old_generation_refused() -> None:
    h = Harness()
    (a,), gen = h.form_group(1)
    resp = h.commit({("t", 0): 5}, member_id=a, generation=gen - 1)
    assert resp.error_code is ErrorCode.ILLEGAL_GENERATION
    assert resp.partitions[0][1] is ErrorCode.ILLEGAL_GENERATION
    assert h.committed("t", 0) is None


def test_commit_from_unknown_member_refused() -> None:
    h = Harness()
    _, gen = h.form_group(1)
    assert h.commit({("t", 0): 5}, member_id="x", generation=gen).error_code is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )
    assert h.commit({("t", 0): 5}).error_code is ErrorCode.UNKNOWN_MEMBER_ID  # outsider
    assert h.committed("t", 0) is None


def test_commit_during_completing_rebalance_refused_but_allowed_while_preparing() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2)
    h.join(h.new_member())
    # PreparingRebalance: the revoke-time commit of the old generation is accepted
    assert h.commit({("t", 0): 1}, member_id=a, generation=gen).error_code is ErrorCode.NONE
    h.join(a)
    h.join(b)
    rest = [m.member_id for m in h.coordinator.describe_group("g").members]
    assert h.state() == "CompletingRebalance"
    resp = h.commit({("t", 0): 2}, member_id=rest[0], generation=gen + 1)
    assert resp.error_code is ErrorCode.REBALANCE_IN_PROGRESS


def test_standalone_commit_creates_an_empty_group() -> None:
    h = Harness()
    assert h.commit({("t", 0): 3}).error_code is ErrorCode.NONE
    assert h.state() == "Empty"
    assert h.commit({("t", 0): 3}, member_id="m", generation=2).error_code is (
        ErrorCode.UNKNOWN_MEMBER_ID
    )


def test_oversized_metadata_refused_per_partition() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offset_metadata_max_bytes=4))
    resp = h.commit({("t", 0): 3}, metadata="12345")
    assert resp.partitions[0][1] is ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert h.committed("t", 0) is None


def test_negative_offset_refused() -> None:
    h = Harness()
    assert h.commit({("t", 0): -5}).partitions[0][1] is ErrorCode.INVALID_REQUEST


def test_offsets_expire_after_retention_once_empty() -> None:
    h = Harness(GroupConfig(group_initial_rebalance_delay_ms=0, offsets_retention_ms=60_000))
    (a,), gen = h.form_group(1)
    h.commit({("t", 0): 5}, member_id=a, generation=gen)
    for _ in range(10):  # a stable group keeps its offsets however long
        h.advance(9_000)
        h.heartbeat(a, gen)
    assert h.committed("t", 0) == 5
    h.leave(a)
    h.advance(59_000)
    assert h.committed("t", 0) == 5
    h.advance(1_000)
    assert h.committed("t", 0) is None
    assert "g" not in h.coordinator.groups
    assert h.log[-1].value is None  # group tombstone
    assert h.replayed().groups == {}


def test_delete_groups() -> None:
    h = Harness()
    (a,), gen = h.form_group(1)
    h.commit({("t", 0): 5}, member_id=a, generation=gen)
    d = h.coordinator.delete_groups(["g", "nope"], request_id=99, now_ms=h.now)
    assert d.replies[0].response == (
        ("g", ErrorCode.NON_EMPTY_GROUP),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
    )
    h.leave(a)
    d = h.coordinator.delete_groups(["g"], request_id=100, now_ms=h.now)
    assert d.replies[0].response == (("g", ErrorCode.NONE),)
    h.log.extend(d.records)
    assert all(r.value is None for r in d.records)
    assert h.replayed().groups == {}
    assert h.coordinator.describe_group("g").state == "Dead"


def test_replay_restores_offsets_and_stable_group() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2)
    h.commit({("t", 0): 5}, member_id=a, generation=gen)
    h.commit({("t", 0): 9, ("t", 1): 4}, member_id=b, generation=gen)
    fresh = h.replayed()
    off = fresh.fetch_offsets("g", [TopicPartition("t", 0), TopicPartition("t", 1)]).offsets
    assert {tp: o.offset for tp, o in off.items() if o} == {
        TopicPartition("t", 0): 9,
        TopicPartition("t", 1): 4,
    }
    desc = fresh.describe_group("g")
    assert desc.state == "Stable" and desc.generation_id == gen
    assert {m.member_id: m.assignment for m in desc.members} == {a: a.encode(), b: b.encode()}
    # members keep working on the new coordinator
    h.coordinator = fresh
    assert h.heartbeat(a, gen) is ErrorCode.NONE
    assert h.commit({("t", 0): 10}, member_id=a, generation=gen).error_code is ErrorCode.NONE


def test_records_roundtrip() -> None:
    key = records.OffsetKey("g", "t", 3)
    value = records.OffsetValue(42, 7, "meta", 123)
    rec = records.offset_record(key, value)
    assert records.decode_key(rec.key) == key
    assert rec.value is not None and records.decode_offset_value(rec.value) == value
    # fixed vector: version 1, "g", "t", partition 3
    assert rec.key == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    gv = records.GroupValue(
        "consumer",
        4,
        "range",
        "m1",
        99,
        (records.MemberValue("m1", None, "c", "h", 1, 2, b"s", b"a"),),
    )
    grec = records.group_record(records.GroupKey("g"), gv)
    assert records.decode_key(grec.key) == records.GroupKey("g")
    assert grec.value is not None and records.decode_group_value(grec.value) == gv


def test_unknown_record_versions_refused() -> None:
    import pytest

    with pytest.raises(ValueError):
        records.decode_key(b"\x00\x09\x00\x01g")
    with pytest.raises(ValueError):
        records.decode_offset_value(b"\x00\x09")
    with pytest.raises(ValueError):
        records.decode_key(b"\x00\x02\x00\x05g")  # truncated


def _subscription(*topics: str) -> bytes:
    """A ConsumerProtocol subscription v0: the topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def test_delete_offsets_spares_the_topics_members_subscribe_to() -> None:
    h = Harness()
    protocols = (Protocol("range", _subscription("t")),)
    (a,), gen = h.form_group(1, protocols=protocols)
    h.commit({("t", 0): 5, ("u", 0): 7}, member_id=a, generation=gen)
    d = h.coordinator.delete_offsets(
        "g", [TopicPartition("t", 0), TopicPartition("u", 0)], request_id=99, now_ms=h.now
    )
    assert d.replies[0].response == OffsetDeleteResponse(
        ErrorCode.NONE,
        (
            (TopicPartition("t", 0), ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC),
            (TopicPartition("u", 0), ErrorCode.NONE),
        ),
    )
    h.log.extend(d.records)
    assert [(r.value is None) for r in d.records] == [True]
    assert h.committed("t", 0) == 5 and h.committed("u", 0) is None
    replayed = h.replayed().fetch_offsets("g", [TopicPartition("u", 0)]).offsets
    assert replayed == {TopicPartition("u", 0): None}
    assert h.state() == "Stable"  # the group stays


def test_delete_offsets_of_an_empty_group_and_the_refusals() -> None:
    h = Harness()
    assert h.commit({("t", 0): 3, ("t", 1): 4}).error_code is ErrorCode.NONE  # Empty group
    gone = h.coordinator.delete_offsets("g", [("t", 0), ("t", 9)], request_id=1, now_ms=h.now)
    assert gone.replies[0].response == OffsetDeleteResponse(
        ErrorCode.NONE,
        ((TopicPartition("t", 0), ErrorCode.NONE), (TopicPartition("t", 9), ErrorCode.NONE)),
    )
    assert h.committed("t", 0) is None and h.committed("t", 1) == 4
    missing = h.coordinator.delete_offsets("nope", [("t", 0)], request_id=2, now_ms=h.now)
    assert missing.replies[0].response == OffsetDeleteResponse(ErrorCode.GROUP_ID_NOT_FOUND)
    assert not missing.records

    other = Harness()
    (b,), gen = other.form_group(1, protocol_type="connect")
    other.commit({("t", 0): 5}, member_id=b, generation=gen)
    refused = other.coordinator.delete_offsets("g", [("t", 0)], request_id=3, now_ms=other.now)
    assert refused.replies[0].response == OffsetDeleteResponse(ErrorCode.NON_EMPTY_GROUP)
    assert other.committed("t", 0) == 5
