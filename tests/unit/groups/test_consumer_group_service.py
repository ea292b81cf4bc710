"""ConsumerGroupHeartbeat (KIP-848) through the real servicer and runtime, in-process:
protobuf in and out, NOT_COORDINATOR, partition counts from the metadata cache, timers,
classic/consumer conflicts, bad inputs that change nothing, and member-epoch checks on
offset commits and fetches."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.values import GroupConfig
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.group import GroupService
from headwater.v1 import common_pb2, group_pb2

from tests.unit.groups.test_coordinator_runtime import FakeLog

pb = group_pb2
SESSION_MS = 10_000


class _Context:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"


class Cluster:
    """A GroupService over a runtime leading the only __consumer_offsets partition."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, log: FakeLog | None = None) -> None:
        self.loop = loop
        self.now = [1_000_000]
        self.log = log or FakeLog()
        self.metadata = MetadataCache()
        self.metadata.topics = {"t": dict.fromkeys(range(4)), "u": dict.fromkeys(range(2))}  # type: ignore[dict-item]
        self.runtime = GroupCoordinatorRuntime(
            num_partitions=1,
            append=self.log.append,
            read=self.log.read,
            config=GroupConfig(
                group_initial_rebalance_delay_ms=0,
                consumer_session_timeout_ms=SESSION_MS,
                consumer_heartbeat_interval_ms=500,
                consumer_max_size=3,
            ),
            clock_ms=lambda: self.now[0],
            partition_counts=self.metadata.partition_counts,
        )
        self.service = GroupService(
            runtime=self.runtime, metadata=self.metadata, coordinator=lambda: None
        )

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def lead(self, epoch: int = 0) -> None:
        self.run(self.runtime.on_become_leader(0, epoch))

    def hb(self, **fields: Any) -> pb.ConsumerGroupHeartbeatResponse:
        fields.setdefault("group_id", "g")
        owned = fields.pop("owned", None)
        if owned is not None:
            fields["topic_partitions"] = assignment(owned)
        topics = fields.pop("topics", None)
        if topics is not None:
            fields["subscribed_topic_names"] = pb.ConsumerGroupHeartbeatTopicNames(names=topics)
        request = pb.ConsumerGroupHeartbeatRequest(**fields)
        return self.run(self.service.ConsumerGroupHeartbeat(request, _Context()))  # type: ignore[arg-type]

    def join(
        self, topics: list[str] | None = None, **fields: Any
    ) -> pb.ConsumerGroupHeartbeatResponse:
        fields.setdefault("rebalance_timeout_ms", 30_000)
        return self.hb(member_epoch=0, topics=topics or ["t"], **fields)

    def describe(self) -> pb.DescribedGroup:
        r = self.run(
            self.service.DescribeGroups(pb.DescribeGroupsRequest(groups=["g"]), _Context())
        )  # type: ignore[arg-type]
        return r.groups[0]

    def commit(self, member_id: str, epoch: int) -> ErrorCode:
        request = pb.OffsetCommitRequest(
            group_id="g",
            generation_id=epoch,
            member_id=member_id,
            partitions=[
                pb.OffsetCommitRequestPartition(topic="t", partition_index=0, committed_offset=5)
            ],
        )
        r = self.run(self.service.OffsetCommit(request, _Context()))  # type: ignore[arg-type]
        return ErrorCode(r.error_code)

    def fetch(self, member_id: str = "", epoch: int = 0) -> pb.OffsetFetchResponse:
        request = pb.OffsetFetchRequest(group_id="g", member_id=member_id, member_epoch=epoch)
        return self.run(self.service.OffsetFetch(request, _Context()))  # type: ignore[arg-type]


def assignment(tps: set[tuple[str, int]]) -> pb.ConsumerGroupHeartbeatAssignment:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(tps):
        by_topic.setdefault(t, []).append(p)
    return pb.ConsumerGroupHeartbeatAssignment(
        topic_partitions=[
            pb.ConsumerGroupHeartbeatTopicPartitions(topic=t, partitions=ps)
            for t, ps in by_topic.items()
        ]
    )


def owned(r: pb.ConsumerGroupHeartbeatResponse) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in r.assignment.topic_partitions for p in t.partitions}


def T(*ps: int) -> set[tuple[str, int]]:
    return {("t", p) for p in ps}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    loop = asyncio.new_event_loop()
    c = Cluster(loop)
    c.lead()
    yield c
    c.run(c.runtime.close())
    loop.close()


def ok(r: Any) -> None:
    assert r.error_code == common_pb2.NONE, (ErrorCode(r.error_code), r.error_message)


def test_partitions_move_only_after_revocation(cluster: Cluster) -> None:
    a = cluster.join()
    ok(a)
    assert a.member_id and a.member_epoch == 1 and a.heartbeat_interval_ms == 500
    assert owned(a) == T(0, 1, 2, 3)
    b = cluster.join()
    ok(b)
    assert b.member_epoch == 2 and owned(b) == set()  # waits for a to revoke
    a2 = cluster.hb(member_id=a.member_id, member_epoch=1, owned=T(0, 1, 2, 3))
    ok(a2)
    assert a2.member_epoch == 1 and len(owned(a2)) == 2  # revoke first, same epoch
    b2 = cluster.hb(member_id=b.member_id, member_epoch=2, owned=set())
    assert owned(b2) == set()  # a still holds them
    a3 = cluster.hb(member_id=a.member_id, member_epoch=1, owned=owned(a2))
    assert a3.member_epoch == 2 and owned(a3) == owned(a2)
    b3 = cluster.hb(member_id=b.member_id, member_epoch=2, owned=set())
    assert b3.member_epoch == 2 and owned(b3) == T(0, 1, 2, 3) - owned(a2)
    b4 = cluster.hb(member_id=b.member_id, member_epoch=2, owned=owned(b3))
    ok(b4)
    d = cluster.describe()
    assert (d.protocol_type, d.group_state, d.generation_id) == ("consumer", "Stable", 2)


def test_not_coordinator_and_loading() -> None:
    loop = asyncio.new_event_loop()
    c = Cluster(loop)
    r = c.join()
    assert r.error_code == common_pb2.NOT_COORDINATOR
    loop.close()


def test_a_leave_hands_partitions_over(cluster: Cluster) -> None:
    a, b = cluster.join(), cluster.join()
    r = cluster.hb(member_id=a.member_id, member_epoch=-1)
    ok(r)
    assert r.member_epoch == -1
    b2 = cluster.hb(member_id=b.member_id, member_epoch=b.member_epoch, owned=set())
    assert owned(b2) == T(0, 1, 2, 3) and b2.member_epoch == 3


def test_session_expiry_by_the_timer(cluster: Cluster) -> None:
    a = cluster.join()
    b = cluster.join()
    cluster.now[0] += SESSION_MS - 1
    cluster.hb(member_id=b.member_id, member_epoch=b.member_epoch, owned=set())
    cluster.now[0] += 2
    cluster.run(cluster.runtime.tick())
    r = cluster.hb(member_id=a.member_id, member_epoch=a.member_epoch, owned=owned(a))
    assert r.error_code == common_pb2.UNKNOWN_MEMBER_ID
    b2 = cluster.hb(member_id=b.member_id, member_epoch=b.member_epoch, owned=set())
    assert owned(b2) == T(0, 1, 2, 3)


def test_regex_follows_the_metadata_cache(cluster: Cluster) -> None:
    a = cluster.hb(member_epoch=0, rebalance_timeout_ms=1000, subscribed_topic_regex="[tu]")
    ok(a)
    assert owned(a) == T(0, 1, 2, 3) | {("u", 0), ("u", 1)}
    cluster.metadata.topics["v"] = dict.fromkeys(range(1))  # type: ignore[assignment]
    cluster.metadata.topics.pop("u")
    cluster.run(cluster.runtime.tick())
    r = cluster.hb(member_id=a.member_id, member_epoch=a.member_epoch, owned=owned(a))
    assert owned(r) == T(0, 1, 2, 3)  # u is gone; v does not match


def test_classic_and_consumer_groups_do_not_mix(cluster: Cluster) -> None:
    join = pb.JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[pb.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )
    a = cluster.join()
    other = pb.JoinGroupRequest()
    other.CopyFrom(join)
    other.protocol_type = "connect"
    r = cluster.run(cluster.service.JoinGroup(other, _Context()))  # type: ignore[arg-type]
    assert r.error_code == common_pb2.INCONSISTENT_GROUP_PROTOCOL
    # (A consumer-type JoinGroup joins as a classic member: test_migration.py.)
    cluster.hb(member_id=a.member_id, member_epoch=-1)
    # An empty consumer group gives way to a classic one ...
    r = cluster.run(cluster.service.JoinGroup(join, _Context()))  # type: ignore[arg-type]
    assert r.error_code == common_pb2.MEMBER_ID_REQUIRED
    join.member_id = r.member_id
    r = cluster.run(cluster.service.JoinGroup(join, _Context()))  # type: ignore[arg-type]
    ok(r)
    # ... and a classic group with members is not a consumer group: it converts only
    # once Stable (tests/unit/groups/test_migration.py), and never on a non-join epoch.
    h = cluster.join()
    assert h.error_code == common_pb2.REBALANCE_IN_PROGRESS
    h = cluster.hb(member_id="x", member_epoch=3)
    assert h.error_code == common_pb2.GROUP_ID_NOT_FOUND
    assert "not a consumer group" in h.error_message


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        (
            {"group_id": "", "member_epoch": 0, "rebalance_timeout_ms": 1, "topics": ["t"]},
            "INVALID_REQUEST",
        ),
        ({"member_epoch": 0, "topics": ["t"]}, "INVALID_REQUEST"),  # no rebalance timeout
        ({"member_epoch": 0, "rebalance_timeout_ms": 1}, "INVALID_REQUEST"),  # no subscription
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 1, "topics": ["t"], "owned": T(0)},
            "INVALID_REQUEST",
        ),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 1, "topics": ["t"], "instance_id": ""},
            "INVALID_REQUEST",
        ),
        ({"member_epoch": 0, "rebalance_timeout_ms": 1, "topics": [""]}, "INVALID_REQUEST"),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 1, "subscribed_topic_regex": "("},
            "INVALID_REQUEST",
        ),
        (
            {
                "member_epoch": 0,
                "rebalance_timeout_ms": 1,
                "topics": ["t"],
                "server_assignor": "sticky",
            },
            "UNSUPPORTED_ASSIGNOR",
        ),
        ({"member_epoch": 1, "member_id": ""}, "INVALID_REQUEST"),
        ({"member_epoch": -3, "member_id": "x"}, "INVALID_REQUEST"),
        ({"member_epoch": -2, "member_id": "x"}, "INVALID_REQUEST"),  # no instance id
        ({"member_epoch": 1, "member_id": "nobody"}, "UNKNOWN_MEMBER_ID"),
        ({"member_epoch": 7, "member_id": "A"}, "FENCED_MEMBER_EPOCH"),
        ({"member_epoch": -1, "member_id": "nobody"}, "UNKNOWN_MEMBER_ID"),
        ({"group_id": "other", "member_epoch": 1, "member_id": "A"}, "GROUP_ID_NOT_FOUND"),
        (
            {"member_epoch": 0, "rebalance_timeout_ms": 1, "topics": ["t"], "instance_id": "i1"},
            "UNRELEASED_INSTANCE_ID",
        ),
    ],
)
def test_bad_input_answers_its_error_and_changes_nothing(
    cluster: Cluster, fields: dict[str, Any], code: str
) -> None:
    a = cluster.join(instance_id="i1")
    ok(a)
    if fields.get("member_id") == "A":
        fields["member_id"] = a.member_id
    before = cluster.describe()
    records = len(cluster.log.batches)
    r = cluster.hb(**fields)
    assert ErrorCode(r.error_code).name == code
    assert r.error_message
    assert cluster.describe() == before
    assert len(cluster.log.batches) == records
    assert "other" not in [g.group_id for g in cluster.runtime.list_groups()]
    still = cluster.hb(member_id=a.member_id, member_epoch=a.member_epoch, owned=owned(a))
    ok(still)
    assert still.member_epoch == a.member_epoch and owned(still) == owned(a)


def test_max_size(cluster: Cluster) -> None:
    for _ in range(3):
        ok(cluster.join())
    assert cluster.join().error_code == common_pb2.GROUP_MAX_SIZE_REACHED


def test_commit_and_fetch_check_the_member_epoch(cluster: Cluster) -> None:
    a = cluster.join()
    assert cluster.commit(a.member_id, a.member_epoch) is ErrorCode.NONE
    assert cluster.commit(a.member_id, a.member_epoch - 1) is ErrorCode.STALE_MEMBER_EPOCH
    assert cluster.commit(a.member_id, a.member_epoch + 1) is ErrorCode.FENCED_MEMBER_EPOCH
    assert cluster.commit("nobody", a.member_epoch) is ErrorCode.UNKNOWN_MEMBER_ID
    assert cluster.commit("", -1) is ErrorCode.UNKNOWN_MEMBER_ID  # not while it has members
    f = cluster.fetch(a.member_id, a.member_epoch)
    ok(f)
    assert [(p.topic, p.partition_index, p.committed_offset) for p in f.partitions] == [("t", 0, 5)]
    assert (
        cluster.fetch(a.member_id, a.member_epoch - 1).error_code == common_pb2.STALE_MEMBER_EPOCH
    )
    assert cluster.fetch("nobody", 1).error_code == common_pb2.UNKNOWN_MEMBER_ID
    ok(cluster.fetch())  # admin: no member id
    cluster.hb(member_id=a.member_id, member_epoch=-1)
    assert cluster.commit("", -1) is ErrorCode.NONE  # empty group: commits from outside
    r = cluster.run(
        cluster.service.DeleteGroups(pb.DeleteGroupsRequest(groups_names=["g"]), _Context())  # type: ignore[arg-type]
    )
    assert r.results[0].error_code == common_pb2.NONE
    assert list(cluster.fetch().partitions) == []
    assert cluster.runtime.list_groups() == []


def test_a_new_coordinator_keeps_epochs_assignments_and_offsets(cluster: Cluster) -> None:
    a = cluster.join()
    b = cluster.join()
    a2 = cluster.hb(member_id=a.member_id, member_epoch=1, owned=T(0, 1, 2, 3))
    assert cluster.commit(a.member_id, 1) is ErrorCode.NONE
    cluster.runtime.on_resign(0)
    assert cluster.hb(member_id=b.member_id, member_epoch=2).error_code == (
        common_pb2.NOT_COORDINATOR
    )
    new = Cluster(cluster.loop, log=cluster.log)  # another broker, reading the same log
    new.lead(epoch=1)
    try:
        d = new.describe()
        assert (d.protocol_type, d.generation_id, d.group_state) == ("consumer", 2, "Reconciling")
        # b still waits: a has not revoked yet (the revocation survived the move).
        assert owned(new.hb(member_id=b.member_id, member_epoch=2, owned=set())) == set()
        a3 = new.hb(member_id=a.member_id, member_epoch=1, owned=owned(a2))
        assert a3.member_epoch == 2 and owned(a3) == owned(a2)
        b3 = new.hb(member_id=b.member_id, member_epoch=2, owned=set())
        assert owned(b3) == T(0, 1, 2, 3) - owned(a2)
        f = new.fetch(a.member_id, 2)
        ok(f)
        assert [p.committed_offset for p in f.partitions] == [5]
    finally:
        new.run(new.runtime.close())


def test_describe_shows_epochs_states_and_both_assignments(cluster: Cluster) -> None:
    a = cluster.join(instance_id="i1")
    b = cluster.join(topics=["t"], subscribed_topic_regex="^$")
    cluster.hb(member_id=a.member_id, member_epoch=1, owned=T(0, 1, 2, 3))  # a revokes some
    d = cluster.describe()
    assert (d.group_type, d.protocol_type, d.protocol_data) == ("consumer", "consumer", "uniform")
    assert (d.group_epoch, d.assignment_epoch, d.generation_id) == (2, 2, 2)
    assert d.group_state == "Reconciling"
    members = {m.member_id: m for m in d.members}
    ma, mb = members[a.member_id], members[b.member_id]
    assert (ma.member_epoch, ma.member_state, ma.group_instance_id) == (
        1,
        "unrevoked_partitions",
        "i1",
    )
    held = {(tp.topic, tp.partition) for tp in ma.assignment}
    target = {(tp.topic, tp.partition) for tp in ma.target_assignment}
    assert held == T(0, 1, 2, 3) and target < held  # still holds what it must give up
    assert (mb.member_epoch, mb.member_state, list(mb.subscribed_topic_names)) == (
        2,
        "unreleased_partitions",
        ["t"],
    )
    assert mb.subscribed_topic_regex == "^$" and not mb.assignment
    assert {(tp.topic, tp.partition) for tp in mb.target_assignment} == T(0, 1, 2, 3) - target
    listed = cluster.run(cluster.service.ListGroups(pb.ListGroupsRequest(), _Context()))  # type: ignore[arg-type]
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed.groups] == [
        ("g", "consumer", "Reconciling")
    ]


def test_a_static_member_rejoins_its_assignment_after_a_coordinator_move(
    cluster: Cluster,
) -> None:
    a = cluster.join(instance_id="i1")
    b = cluster.join(instance_id="i2")
    a2 = cluster.hb(member_id=a.member_id, member_epoch=1, owned=T(0, 1, 2, 3))
    cluster.hb(member_id=a.member_id, member_epoch=1, owned=owned(a2))
    b2 = cluster.hb(member_id=b.member_id, member_epoch=2, owned=set())
    left = cluster.hb(member_id=b.member_id, member_epoch=-2, instance_id="i2")
    ok(left)
    assert left.member_epoch == -2
    cluster.runtime.on_resign(0)
    new = Cluster(cluster.loop, log=cluster.log)
    new.lead(epoch=1)
    try:
        back = new.join(instance_id="i2")
        ok(back)
        assert back.member_id != b.member_id
        assert (back.member_epoch, owned(back)) == (2, owned(b2))  # its place, no new epoch
        assert new.describe().generation_id == 2
        taken = new.join(instance_id="i1")
        assert taken.error_code == common_pb2.UNRELEASED_INSTANCE_ID
    finally:
        new.run(new.runtime.close())
