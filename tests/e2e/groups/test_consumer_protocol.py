"""The consumer group protocol (KIP-848) on a real cluster, driven with raw gRPC calls:
two members of one group, the second receives partitions only after the first revoked
them, and epochs, assignments and commits survive the coordinator broker being killed.
(Its own module, so its own cluster: the test kills a broker.)"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import grpc
import headwater
import pytest
from headwater.errors import ErrorCode
from headwater.v1 import group_pb2 as pb
from headwater.v1 import group_pb2_grpc

from tests.e2e.groups.conftest import wait_until

pytestmark = pytest.mark.e2e

Partitions = set[tuple[str, int]]


class Member:
    """One member's raw ConsumerGroupHeartbeats, following the coordinator when it moves."""

    def __init__(self, cluster: Any, group: str, topic: str) -> None:
        self.cluster, self.group, self.topic = cluster, group, topic
        self.member_id, self.epoch = "", 0
        self.owned: Partitions = set()

    def coordinator(self) -> str:
        """``host:port`` of the group's coordinator, asked of any live broker."""
        for broker in self.cluster.brokers.values():
            try:
                with grpc.insecure_channel(broker.address) as ch:
                    r = group_pb2_grpc.GroupStub(ch).FindCoordinator(
                        pb.FindCoordinatorRequest(key=self.group), timeout=5
                    )
            except grpc.RpcError:
                continue
            if r.error_code == 0:
                return f"{r.host}:{r.port}"
        raise AssertionError("no broker names a coordinator")

    def heartbeat(self, **fields: Any) -> pb.ConsumerGroupHeartbeatResponse:
        request = pb.ConsumerGroupHeartbeatRequest(
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            topic_partitions=pb.ConsumerGroupHeartbeatAssignment(
                topic_partitions=[
                    pb.ConsumerGroupHeartbeatTopicPartitions(
                        topic=self.topic, partitions=sorted(p for _, p in self.owned)
                    )
                ]
            )
            if self.epoch > 0
            else None,
            **fields,
        )
        deadline = time.monotonic() + 90
        while True:  # retry while the coordinator moves or loads, as a client would
            try:
                with grpc.insecure_channel(self.coordinator()) as ch:
                    r = group_pb2_grpc.GroupStub(ch).ConsumerGroupHeartbeat(request, timeout=15)
            except (grpc.RpcError, AssertionError):
                r = None
            retriable = r is None or ErrorCode(r.error_code) in (
                ErrorCode.NOT_COORDINATOR,
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            )
            if not retriable:
                break
            assert time.monotonic() < deadline, "the coordinator never answered"
            time.sleep(0.5)
        assert r is not None and r.error_code == 0, (ErrorCode(r.error_code), r.error_message)
        self.member_id, self.epoch = r.member_id, r.member_epoch
        return r

    def join(self) -> Partitions:
        r = self.heartbeat(
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=pb.ConsumerGroupHeartbeatTopicNames(names=[self.topic]),
        )
        return self._take(r)

    def beat(self) -> Partitions:
        return self._take(self.heartbeat())

    def _take(self, r: pb.ConsumerGroupHeartbeatResponse) -> Partitions:
        """Own exactly what the coordinator says (revoke the rest, take the new)."""
        self.owned = {(t.topic, p) for t in r.assignment.topic_partitions for p in t.partitions}
        return self.owned


def test_two_members_hand_over_partitions_and_survive_a_coordinator_kill(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str]
) -> None:
    name, group = topic(4), f"grp-{uuid.uuid4().hex[:8]}"
    everything = {(name, p) for p in range(4)}
    a, b = Member(cluster, group, name), Member(cluster, group, name)
    assert a.join() == everything and a.epoch == 1
    assert a.beat() == everything
    assert b.join() == set() and b.epoch == 2  # a still owns them all
    assert a.beat() < everything and a.epoch == 1  # a must revoke first, at its old epoch
    kept = a.owned
    assert b.beat() == set()  # not before a reported them revoked
    assert a.beat() == kept and a.epoch == 2  # revoked: a takes the new epoch
    assert b.beat() == everything - kept and b.epoch == 2
    assert b.beat() == everything - kept

    d = admin.describe_groups([group])[group]
    assert (d.group_type, d.state, d.group_epoch, d.target_assignment_epoch) == (
        "consumer",
        "Stable",
        2,
        2,
    )
    members = {m.member_id: m for m in d.members}
    assert set(members[b.member_id].assignment) == {headwater.TopicPartition(*tp) for tp in b.owned}
    assert members[a.member_id].member_epoch == 2 and members[a.member_id].state == "stable"

    commit = pb.OffsetCommitRequest(
        group_id=group,
        generation_id=a.epoch,
        member_id=a.member_id,
        partitions=[
            pb.OffsetCommitRequestPartition(topic=t, partition_index=p, committed_offset=7)
            for t, p in sorted(kept)
        ],
    )
    with grpc.insecure_channel(a.coordinator()) as ch:
        r = group_pb2_grpc.GroupStub(ch).OffsetCommit(commit, timeout=15)
    assert r.error_code == 0, ErrorCode(r.error_code)

    old = a.coordinator()
    victim = next(i for i, p in cluster.brokers.items() if p.address == old)
    cluster.kill(victim)

    def moved() -> bool:
        try:
            return a.coordinator() != old
        except AssertionError:  # no coordinator named yet
            return False

    wait_until(moved, timeout_s=60, what="a new coordinator")

    # The new coordinator knows both members at their epochs, with their assignments.
    assert a.beat() == kept and a.epoch == 2
    assert b.beat() == everything - kept and b.epoch == 2
    d = admin.describe_groups([group])[group]
    assert (d.group_type, d.state, d.group_epoch) == ("consumer", "Stable", 2)
    assert d.coordinator != old
    offsets = admin.list_consumer_group_offsets(group)
    assert {(tp.topic, tp.partition): o.offset for tp, o in offsets.items()} == dict.fromkeys(
        kept, 7
    )
    # b leaving hands its partitions to a, now on the new coordinator.
    b.epoch = -1
    b.heartbeat()
    assert a.beat() == everything and a.epoch == 3
