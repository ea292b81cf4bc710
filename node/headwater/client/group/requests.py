"""The group RPCs' requests built, and their answers read, as pure functions.

Kept apart from :mod:`.classic.coordinator` (which decides when to send what) so that the
protobuf shapes of JoinGroup, SyncGroup, ConsumerGroupHeartbeat, OffsetCommit and
OffsetFetch live in one place and the leader's assignment is computed from a JoinGroup
answer without any I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from headwater import errors
from headwater.client.group.classic import protocol
from headwater.client.group.classic.assignors import Subscription, assign
from headwater.client.group.classic.member import JoinStart
from headwater.client.group.consumer.member import HeartbeatPlan
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.v1 import common_pb2, group_pb2


def join_group(
    *,
    group_id: str,
    start: JoinStart,
    topics: Iterable[str],
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    group_instance_id: str | None,
    assignors: Iterable[str],
    client_id: str,
) -> group_pb2.JoinGroupRequest:
    """The JoinGroup for ``start``: one protocol per assignor, each with the subscription."""
    metadata = protocol.encode_subscription(
        protocol.ConsumerSubscription(
            tuple(topics), tuple(sorted(start.owned)), start.generation_id
        )
    )
    return group_pb2.JoinGroupRequest(
        group_id=group_id,
        session_timeout_ms=session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        member_id=start.member_id,
        group_instance_id=group_instance_id or "",
        protocol_type="consumer",
        protocols=[
            group_pb2.JoinGroupRequestProtocol(name=a, metadata=metadata) for a in assignors
        ],
        client_id=client_id,
    )


def subscribed_topics(join: Any) -> list[str]:
    """Every topic some member of a JoinGroup answer subscribes to (the leader's view)."""
    topics = {t for m in join.members for t in protocol.decode_subscription(m.metadata).topics}
    return sorted(topics)


def leader_assignments(
    join: Any, partition_counts: Mapping[str, int]
) -> list[group_pb2.SyncGroupRequestAssignment]:
    """The leader's SyncGroup assignments for a JoinGroup answer, by its chosen assignor."""
    subs: dict[str, Subscription] = {}
    for m in join.members:
        s = protocol.decode_subscription(m.metadata)
        subs[m.member_id] = Subscription(
            s.topics, s.owned_partitions, s.generation, m.group_instance_id or None
        )
    result = assign(join.protocol_name, dict(partition_counts), subs)
    return [
        group_pb2.SyncGroupRequestAssignment(
            member_id=m,
            assignment=protocol.encode_assignment(protocol.ConsumerAssignment(tuple(tps))),
        )
        for m, tps in result.items()
    ]


def offset_commit(
    *,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> group_pb2.OffsetCommitRequest:
    return group_pb2.OffsetCommitRequest(
        group_id=group_id,
        generation_id=generation_id,
        member_id=member_id,
        group_instance_id=group_instance_id or "",
        retention_time_ms=-1,
        partitions=[
            group_pb2.OffsetCommitRequestPartition(
                topic=tp.topic,
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata,
            )
            for tp, om in offsets.items()
        ],
    )


def offset_fetch(
    group_id: str,
    tps: Iterable[TopicPartition],
    *,
    member_id: str = "",
    member_epoch: int = -1,
    require_stable: bool = False,
) -> group_pb2.OffsetFetchRequest:
    """A consumer-protocol member names itself and its epoch (Kafka's OffsetFetch v9);
    a read_committed consumer requires stable offsets (KIP-447)."""
    return group_pb2.OffsetFetchRequest(
        group_id=group_id,
        partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in sorted(tps)],
        member_id=member_id,
        member_epoch=member_epoch,
        require_stable=require_stable,
    )


def consumer_group_heartbeat(
    group_id: str, plan: HeartbeatPlan
) -> group_pb2.ConsumerGroupHeartbeatRequest:
    """The ConsumerGroupHeartbeat for ``plan``: its None fields are left absent."""
    req = group_pb2.ConsumerGroupHeartbeatRequest(
        group_id=group_id, member_id=plan.member_id, member_epoch=plan.member_epoch
    )
    if plan.instance_id is not None:
        req.instance_id = plan.instance_id
    if plan.rebalance_timeout_ms is not None:
        req.rebalance_timeout_ms = plan.rebalance_timeout_ms
    if plan.topics is not None:
        req.subscribed_topic_names.SetInParent()  # present even when empty
        req.subscribed_topic_names.names.extend(sorted(plan.topics))
    if plan.regex is not None:
        req.subscribed_topic_regex = plan.regex
    if plan.server_assignor is not None:
        req.server_assignor = plan.server_assignor
    if plan.owned is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(plan.owned):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        req.topic_partitions.SetInParent()
        req.topic_partitions.topic_partitions.extend(
            group_pb2.ConsumerGroupHeartbeatTopicPartitions(topic=t, partitions=ps)
            for t, ps in by_topic.items()
        )
    return req


def heartbeat_assignment(resp: Any) -> list[TopicPartition] | None:
    """The assignment a ConsumerGroupHeartbeat answer carries; None: unchanged."""
    if not resp.HasField("assignment"):
        return None
    return [
        TopicPartition(t.topic, p) for t in resp.assignment.topic_partitions for p in t.partitions
    ]


def parse_offset_fetch(
    resp: Any, wanted: Iterable[TopicPartition]
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """Each wanted partition's committed offset (None: none); raises the group's error,
    and UnstableOffsetCommitError (retriable) while a transactional commit is pending."""
    if resp.error_code:
        raise errors.for_code(resp.error_code, resp.error_message)
    found: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted)
    for p in resp.partitions:
        if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
            raise errors.UnstableOffsetCommitError(
                f"{p.topic}-{p.partition_index} has a transactional offset commit pending"
            )
        if p.committed_offset >= 0:
            found[TopicPartition(p.topic, p.partition_index)] = OffsetAndMetadata(
                p.committed_offset, p.metadata, p.committed_leader_epoch
            )
    return found
