"""The KIP-848 records of __consumer_offsets: fixed byte layouts, round trips, the
records a change writes, and replay rebuilding the same groups."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.groups.consumer import records as cr
from headwater.groups.consumer.group import MemberState
from headwater.groups.coordinator import GroupCoordinator
from headwater.groups.values import ConsumerGroupHeartbeatRequest, GroupConfig
from headwater.values import TopicPartition as TP

I16 = lambda n: n.to_bytes(2, "big", signed=True)  # noqa: E731
I32 = lambda n: n.to_bytes(4, "big", signed=True)  # noqa: E731


def S(s: str | None) -> bytes:
    return I16(-1) if s is None else I16(len(s)) + s.encode()


def test_key_layouts() -> None:
    assert cr.encode_key(cr.ConsumerKey(3, "g")) == bytes.fromhex("0003 0001 67")
    assert cr.encode_key(cr.ConsumerKey(6, "g")) == bytes.fromhex("0006 0001 67")
    assert cr.encode_key(cr.ConsumerKey(8, "g", "m")) == bytes.fromhex("0008 0001 67 0001 6d")
    assert cr.encode_key(cr.ConsumerKey(5, "g", "m")) == I16(5) + S("g") + S("m")
    assert cr.encode_key(cr.ConsumerKey(7, "g", "m")) == I16(7) + S("g") + S("m")
    with pytest.raises(ValueError, match="member id"):
        cr.encode_key(cr.ConsumerKey(7, "g"))
    for version, member in ((3, None), (5, "m"), (6, None), (7, "m"), (8, "m")):
        key = cr.ConsumerKey(version, "g", member)
        assert cr.decode_key(cr.encode_key(key)) == key
    with pytest.raises(ValueError, match="version 2"):
        cr.decode_key(I16(2) + S("g"))


def test_value_layouts() -> None:
    md = cr.MemberMetadata("i", None, "c", "h", ("t",), None, 30000, "range")
    encoded = cr.encode_member_metadata(md)
    assert encoded == bytes.fromhex(
        "0000"  # version 0
        "0001 69"  # instance id "i"
        "ffff"  # rack id null
        "0001 63 0001 68"  # client id "c", client host "h"
        "00000001 0001 74"  # subscribed topic names ["t"]
        "ffff"  # regex null
        "00007530"  # rebalance timeout 30000
        "0005 72616e6765"  # server assignor "range"
    )
    assert cr.decode_member_metadata(encoded) == md
    ca = cr.CurrentAssignment(
        3,
        2,
        MemberState.UNREVOKED_PARTITIONS,
        frozenset({TP("t", 0)}),
        frozenset({TP("t", 2), TP("t", 1)}),
    )
    encoded = cr.encode_current_assignment(ca)
    assert encoded == bytes.fromhex(
        "0000 00000003 00000002"  # version, member epoch 3, previous 2
        "01"  # state: unrevoked partitions
        "00000001 0001 74 00000001 00000000"  # assigned: t [0]
        "00000001 0001 74 00000002 00000001 00000002"  # pending revocation: t [1, 2]
    )
    assert cr.decode_current_assignment(encoded) == ca
    target = cr.encode_target_member([TP("u", 0), TP("t", 1)])
    assert target == I16(0) + I32(2) + S("t") + I32(1) + I32(1) + S("u") + I32(1) + I32(0)
    assert cr.decode_target_member(target) == {TP("t", 1), TP("u", 0)}
    assert cr.decode_epoch(I16(0) + I32(7)) == 7
    with pytest.raises(ValueError, match="version 1"):
        cr.decode_epoch(I16(1) + I32(7))
    with pytest.raises(ValueError, match="truncated"):
        cr.decode_member_metadata(encoded[:5])


COUNTS = {"t": 4}


def _coordinator() -> GroupCoordinator:
    ids = iter(f"m{i}" for i in range(100))
    return GroupCoordinator(
        config=GroupConfig(consumer_session_timeout_ms=10_000),
        consumer_member_id_factory=lambda: next(ids),
    )


def _hb(
    c: GroupCoordinator, now: int, **fields: object
) -> tuple[object, list[cr.ConsumerKey | None]]:
    req = ConsumerGroupHeartbeatRequest(group_id="g", **fields)  # type: ignore[arg-type]
    d = c.consumer_group_heartbeat(req, request_id=1, now_ms=now, partition_counts=COUNTS)
    return d.replies[0].response, [cr.decode_key(r.key) for r in d.records]


def test_a_join_writes_kafkas_records_in_kafkas_order() -> None:
    c = _coordinator()
    _, keys = _hb(
        c, 0, member_id="", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",)
    )
    assert [(k.version, k.member) for k in keys if k is not None] == [
        (5, "m0"),  # member metadata
        (3, None),  # group epoch
        (7, "m0"),  # target assignment of the member
        (6, None),  # target assignment epoch
        (8, "m0"),  # current assignment
    ]
    # A heartbeat that changes nothing writes nothing; a leave writes tombstones.
    _, keys = _hb(
        c, 1, member_id="m0", member_epoch=1, topic_partitions=tuple(TP("t", p) for p in range(4))
    )
    assert keys == []
    d = c.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest("g", "m0", -1),
        request_id=2,
        now_ms=2,
        partition_counts=COUNTS,
    )
    assert [(cr.decode_key(r.key).version, r.value is None) for r in d.records] == [
        (3, False),
        (6, False),
        (8, True),
        (7, True),
        (5, True),
    ]


def test_replay_rebuilds_epochs_assignments_and_reconciliation() -> None:
    c = _coordinator()
    log: list[tuple[bytes, bytes | None]] = []

    def hb(now: int, **fields: object) -> object:
        req = ConsumerGroupHeartbeatRequest(group_id="g", **fields)  # type: ignore[arg-type]
        d = c.consumer_group_heartbeat(req, request_id=1, now_ms=now, partition_counts=COUNTS)
        log.extend((r.key, r.value) for r in d.records)
        return d.replies[0].response

    hb(0, member_id="", member_epoch=0, rebalance_timeout_ms=5000, subscribed_topic_names=("t",))
    hb(
        1,
        member_id="",
        member_epoch=0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=("t",),
        instance_id="i",
    )
    hb(2, member_id="m0", member_epoch=1, topic_partitions=tuple(TP("t", p) for p in range(4)))
    fresh = _coordinator()
    for key, value in log:
        fresh.replay(key, value, now_ms=100)
    old, new = c.consumer.groups["g"], fresh.consumer.groups["g"]
    assert cr.image(new) == cr.image(old)
    assert (new.group_epoch, new.target_epoch, new.state) == (
        old.group_epoch,
        old.target_epoch,
        old.state,
    )
    assert new.static_members == {"i": "m1"}
    assert new.members["m0"].state is MemberState.UNREVOKED_PARTITIONS
    assert new.members["m0"].revocation_deadline_ms == 100 + 5000
    assert new.members["m1"].session_deadline_ms == 100 + 10_000
    # The replayed coordinator goes on where the old one stopped: m0 revokes, m1 gets them.
    kept = new.members["m0"].assigned
    r = fresh.consumer.heartbeat(
        ConsumerGroupHeartbeatRequest("g", "m0", 1, topic_partitions=tuple(kept)),
        now_ms=101,
        partition_counts=COUNTS,
    )[0]
    assert r.error_code is ErrorCode.NONE and r.member_epoch == 2
    r = fresh.consumer.heartbeat(
        ConsumerGroupHeartbeatRequest("g", "m1", 2, topic_partitions=()),
        now_ms=102,
        partition_counts=COUNTS,
    )[0]
    assert set(r.assignment or ()) == {TP("t", p) for p in range(4)} - kept
    # Tombstones of a deleted group remove it on replay.
    for m in ("m0", "m1"):
        log.extend(
            (rec.key, rec.value)
            for rec in c.consumer_group_heartbeat(
                ConsumerGroupHeartbeatRequest("g", m, -1),
                request_id=1,
                now_ms=3,
                partition_counts=COUNTS,
            ).records
        )
    d = c.delete_groups(["g"], request_id=1, now_ms=4)
    assert d.replies[0].response == (("g", ErrorCode.NONE),)
    log.extend((r.key, r.value) for r in d.records)
    fresh = _coordinator()
    for key, value in log:
        fresh.replay(key, value, now_ms=100)
    assert fresh.consumer.groups == {}


def test_resolved_regexes_are_written_and_replayed_so_a_move_bumps_no_epoch() -> None:
    c = _coordinator()
    counts = {"t": 4, "tx": 1, "u": 1}
    log: list[tuple[bytes, bytes | None]] = []
    req = ConsumerGroupHeartbeatRequest(
        "g", "", 0, rebalance_timeout_ms=5000, subscribed_topic_regex="t.*"
    )
    d = c.consumer_group_heartbeat(req, request_id=1, now_ms=0, partition_counts=counts)
    log.extend((r.key, r.value) for r in d.records)
    regex = [r for r in d.records if cr.decode_key(r.key).version == 16]
    assert [r.key for r in regex] == [I16(16) + S("g") + S("t.*")]
    assert regex[0].value == I16(0) + I32(2) + S("t") + S("tx")
    fresh = _coordinator()
    for key, value in log:
        fresh.replay(key, value, now_ms=10)
    assert fresh.consumer.groups["g"].members["m0"].regex_topics == {"t", "tx"}
    owned = (*(TP("t", p) for p in range(4)), TP("tx", 0))
    d = fresh.consumer_group_heartbeat(
        ConsumerGroupHeartbeatRequest("g", "m0", 1, topic_partitions=owned),
        request_id=1,
        now_ms=11,
        partition_counts=counts,
    )
    assert d.replies[0].response.member_epoch == 1  # type: ignore[union-attr]
    assert d.records == ()
