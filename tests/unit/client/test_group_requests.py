"""The group RPCs' requests and answers as built and read by the consumer (no I/O).

Covers :mod:`headwater.client.group.requests`: the JoinGroup carries the subscription
(with owned partitions and generation) under every assignor's name; the leader's
assignment read from a JoinGroup answer gives every partition to exactly one member;
OffsetCommit and OffsetFetch round-trip offsets, metadata and leader epochs.
"""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.client.group import requests
from headwater.client.group.classic import protocol
from headwater.client.group.classic.member import JoinStart
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.v1 import group_pb2

TP = TopicPartition


def test_join_group_carries_the_subscription_under_each_assignor() -> None:
    start = JoinStart("m-1", 4, frozenset({TP("a", 1), TP("a", 0)}), frozenset())
    req = requests.join_group(
        group_id="g",
        start=start,
        topics=["a", "b"],
        session_timeout_ms=6000,
        rebalance_timeout_ms=9000,
        group_instance_id=None,
        assignors=("cooperative-sticky", "range"),
        client_id="c",
    )
    assert (req.member_id, req.group_instance_id, req.protocol_type) == ("m-1", "", "consumer")
    assert (req.session_timeout_ms, req.rebalance_timeout_ms) == (6000, 9000)
    assert [p.name for p in req.protocols] == ["cooperative-sticky", "range"]
    sub = protocol.decode_subscription(req.protocols[0].metadata)
    assert sub.topics == ("a", "b")
    assert sub.owned_partitions == (TP("a", 0), TP("a", 1))
    assert sub.generation == 4


def _member(mid: str, topics: tuple[str, ...]) -> group_pb2.JoinGroupResponseMember:
    meta = protocol.encode_subscription(protocol.ConsumerSubscription(topics))
    return group_pb2.JoinGroupResponseMember(member_id=mid, metadata=meta)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_leader_assignments_cover_every_partition_once(assignor: str) -> None:
    join = group_pb2.JoinGroupResponse(
        generation_id=1,
        protocol_name=assignor,
        leader="m-1",
        member_id="m-1",
        members=[_member("m-1", ("a",)), _member("m-2", ("a", "b")), _member("m-3", ("b",))],
    )
    assert requests.subscribed_topics(join) == ["a", "b"]
    out = requests.leader_assignments(join, {"a": 4, "b": 3})
    got = {a.member_id: protocol.decode_assignment(a.assignment).partitions for a in out}
    assert set(got) == {"m-1", "m-2", "m-3"}
    every = [tp for tps in got.values() for tp in tps]
    assert sorted(every) == [TP("a", p) for p in range(4)] + [TP("b", p) for p in range(3)]
    assert all(tp.topic == "a" for tp in got["m-1"])
    assert all(tp.topic == "b" for tp in got["m-3"])


def test_offset_commit_request() -> None:
    req = requests.offset_commit(
        group_id="g",
        generation_id=3,
        member_id="m",
        group_instance_id="i",
        offsets={TP("a", 2): OffsetAndMetadata(42, "meta", 7)},
    )
    assert (req.generation_id, req.member_id, req.group_instance_id) == (3, "m", "i")
    (p,) = req.partitions
    assert (p.topic, p.partition_index, p.committed_offset) == ("a", 2, 42)
    assert (p.committed_metadata, p.committed_leader_epoch) == ("meta", 7)


def test_offset_fetch_round_trip() -> None:
    wanted = [TP("a", 1), TP("a", 0)]
    req = requests.offset_fetch("g", wanted)
    assert [(p.topic, p.partition) for p in req.partitions] == [("a", 0), ("a", 1)]
    resp = group_pb2.OffsetFetchResponse(
        partitions=[
            group_pb2.OffsetFetchResponsePartition(
                topic="a",
                partition_index=0,
                committed_offset=10,
                metadata="x",
                committed_leader_epoch=2,
            ),
            group_pb2.OffsetFetchResponsePartition(
                topic="a", partition_index=1, committed_offset=-1
            ),
        ]
    )
    assert requests.parse_offset_fetch(resp, wanted) == {
        TP("a", 0): OffsetAndMetadata(10, "x", 2),
        TP("a", 1): None,
    }


def test_an_unstable_offset_is_a_retriable_error_not_a_missing_offset() -> None:
    """KIP-447: read as "nothing committed", the consumer would reset its position."""
    assert requests.offset_fetch("g", [TP("a", 0)], require_stable=True).require_stable
    resp = group_pb2.OffsetFetchResponse(
        partitions=[
            group_pb2.OffsetFetchResponsePartition(
                topic="a",
                partition_index=0,
                committed_offset=-1,
                error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT,
            )
        ]
    )
    with pytest.raises(errors.UnstableOffsetCommitError) as info:
        requests.parse_offset_fetch(resp, [TP("a", 0)])
    assert info.value.retriable


def test_offset_fetch_error_is_raised() -> None:
    resp = group_pb2.OffsetFetchResponse(error_code=ErrorCode.NOT_COORDINATOR)
    with pytest.raises(errors.HeadwaterError) as info:
        requests.parse_offset_fetch(resp, [TP("a", 0)])
    assert info.value.code is ErrorCode.NOT_COORDINATOR and info.value.retriable
