"""Bad input to the Group service of a real broker gets a clear error and changes
nothing: commits from an old generation or an unknown member, an unknown group,
oversized member metadata, a session timeout out of bounds."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import grpc
import headwater
import pytest
from headwater import errors
from headwater.errors import ErrorCode
from headwater.v1 import group_pb2, group_pb2_grpc

from tests.e2e.groups.conftest import Member, wait_until

pytestmark = pytest.mark.e2e


def commit(stub: Any, group: str, topic: str, *, generation: int, member: str) -> int:
    resp = stub.OffsetCommit(
        group_pb2.OffsetCommitRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            partitions=[
                group_pb2.OffsetCommitRequestPartition(
                    topic=topic, partition_index=0, committed_offset=3
                )
            ],
        ),
        timeout=10,
    )
    return int(resp.error_code or resp.partitions[0].error_code)


def test_commits_from_old_generation_or_unknown_member_are_refused(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(1), f"grp-{uuid.uuid4().hex[:8]}"
    m: Member = members(cluster.bootstrap, group, name, enable_auto_commit=False)
    wait_until(lambda: bool(m.assignment), timeout_s=30, what="the member's assignment")
    d = admin.describe_groups([group])[group]
    member_id = d.members[0].member_id
    with grpc.insecure_channel(d.coordinator) as channel:
        stub = group_pb2_grpc.GroupStub(channel)
        old = commit(stub, group, name, generation=d.generation_id - 1, member=member_id)
        assert old == ErrorCode.ILLEGAL_GENERATION
        unknown = commit(stub, group, name, generation=d.generation_id, member="nobody")
        assert unknown == ErrorCode.UNKNOWN_MEMBER_ID
        hb = stub.Heartbeat(
            group_pb2.HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody"),
            timeout=10,
        )
        assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert admin.list_consumer_group_offsets(group) == {}, "nothing was committed"
        ok = commit(stub, group, name, generation=d.generation_id, member=member_id)
        assert ok == ErrorCode.NONE


def test_unknown_group(admin: headwater.Admin) -> None:
    group = f"never-{uuid.uuid4().hex[:8]}"
    d = admin.describe_groups([group])[group]
    assert (d.state, d.members) == ("Dead", ())
    assert admin.list_consumer_group_offsets(group) == {}
    with pytest.raises(errors.GroupIdNotFoundError):
        admin.delete_groups([group])
    assert group not in {g.group_id for g in admin.list_groups()}


def test_oversized_metadata_and_bad_session_timeout(admin: headwater.Admin) -> None:
    group = f"grp-{uuid.uuid4().hex[:8]}"
    coordinator = admin.describe_groups([group])[group].coordinator

    def join(metadata: bytes, session_timeout_ms: int = 6000) -> Any:
        with grpc.insecure_channel(coordinator) as channel:
            return group_pb2_grpc.GroupStub(channel).JoinGroup(
                group_pb2.JoinGroupRequest(
                    group_id=group,
                    session_timeout_ms=session_timeout_ms,
                    rebalance_timeout_ms=6000,
                    protocol_type="consumer",
                    protocols=[group_pb2.JoinGroupRequestProtocol(name="range", metadata=metadata)],
                ),
                timeout=10,
            )

    big = join(b"x" * (1024 * 1024 + 1))
    assert big.error_code == ErrorCode.INVALID_REQUEST and "metadata" in big.error_message
    short = join(b"", session_timeout_ms=10)
    assert short.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert admin.describe_groups([group])[group].state == "Dead", "nothing was created"
