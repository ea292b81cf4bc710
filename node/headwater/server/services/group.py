"""The Group gRPC service: a thin converter in front of the group coordinator runtime.

Every RPC converts protobuf to :mod:`headwater.groups.values`, asks the
:class:`~headwater.groups.coordinator_runtime.GroupCoordinatorRuntime` and converts back
(docs/style.md, "Thin servicers").
FindCoordinator answers from the metadata cache: the leader of the group's
``__consumer_offsets`` partition; the first FindCoordinator of a cluster creates that
topic (``offsets.topic.num.partitions``, ``offsets.topic.replication.factor`` capped at
the live broker count, ``cleanup.policy=compact``) and answers
COORDINATOR_NOT_AVAILABLE until it has leaders -- clients retry.

The runtime's ``append``/``read`` seams over the broker's replicas are wired in
:mod:`headwater.server.runtime.groups`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import PartitionState
from headwater.errors import ErrorCode
from headwater.groups import values as gv
from headwater.groups.consumer.subscription_authorization import authorize_subscription
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.placement import (
    OFFSETS_TOPIC,
)
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer, denial
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context, pb_error
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.transactions.coordinator_runtime import TransactionCoordinatorRuntime
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC
from headwater.v1 import common_pb2, group_pb2, group_pb2_grpc
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
"""Kafka's ``CoordinatorType.TRANSACTION``."""

R = TypeVar("R")


def _group_denied(response: Callable[..., R], op: Op, group_id: str) -> R:
    """The whole-request refusal of a group RPC: GROUP_AUTHORIZATION_FAILED."""
    d = denial(op, ResourceType.GROUP, group_id)
    return response(error_code=pb_error(d.code), error_message=d.message)


def _opt(s: str) -> str | None:
    return s or None


def _tp_pb(tp: TopicPartition) -> common_pb2.TopicPartition:
    return common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)


def _partitions_from_pb(
    assignment: group_pb2.ConsumerGroupHeartbeatAssignment,
) -> tuple[TopicPartition, ...]:
    return tuple(
        TopicPartition(t.topic, p) for t in assignment.topic_partitions for p in t.partitions
    )


def _partitions_to_pb(
    tps: tuple[TopicPartition, ...],
) -> group_pb2.ConsumerGroupHeartbeatAssignment:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return group_pb2.ConsumerGroupHeartbeatAssignment(
        topic_partitions=[
            group_pb2.ConsumerGroupHeartbeatTopicPartitions(topic=t, partitions=ps)
            for t, ps in by_topic.items()
        ]
    )


class GroupService(group_pb2_grpc.GroupServicer):
    def __init__(
        self,
        *,
        runtime: GroupCoordinatorRuntime,
        metadata: MetadataCache,
        coordinator: Callable[[], BrokerCoordinator | None],
        ensure_offsets_topic: Callable[[], None] = lambda: None,
        authz: RequestAuthorizer = ALLOW_ALL,
        transactions: TransactionCoordinatorRuntime | None = None,
        ensure_transaction_state: Callable[[], None] = lambda: None,
    ) -> None:
        """``authz`` answers Kafka's ACL checks (docs/security.md), one line per RPC;
        ``transactions`` places transactional ids (FindCoordinator with key_type 1);
        ``ensure_offsets_topic`` and ``ensure_transaction_state`` start creating the
        missing internal topic (:mod:`headwater.server.runtime.internal_topics`, shared
        with the Kafka listeners)."""
        self._transactions = transactions
        self._ensure_transaction_state = ensure_transaction_state
        self._runtime = runtime
        self._authz = authz
        self._metadata = metadata
        self._coordinator = coordinator
        self._ensure_offsets_topic = ensure_offsets_topic

    # -- discovery ------------------------------------------------------------------------

    async def FindCoordinator(
        self, request: group_pb2.FindCoordinatorRequest, context: Context
    ) -> group_pb2.FindCoordinatorResponse:
        def error(code: ErrorCode, message: str) -> group_pb2.FindCoordinatorResponse:
            return group_pb2.FindCoordinatorResponse(
                error_code=pb_error(code), error_message=message, node_id=-1
            )

        if request.key_type == TRANSACTION_KEY_TYPE:
            return self._find_transaction_coordinator(request.key, context, error)
        if request.key_type != 0:
            return error(
                ErrorCode.INVALID_REQUEST,
                f"key_type {request.key_type} is neither 0 (group) nor 1 (transaction)",
            )
        if not request.key:
            return error(ErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        if not self._authz.group(context, Op.DESCRIBE, request.key):
            d = denial(Op.DESCRIBE, ResourceType.GROUP, request.key)
            return error(d.code, d.message)
        parts = self._metadata.topics.get(OFFSETS_TOPIC)
        if not parts:
            self._ensure_offsets_topic()
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {OFFSETS_TOPIC}")
        return self._coordinator_at(parts.get(self._runtime.partition_for(request.key)), context)

    def _find_transaction_coordinator(
        self,
        transactional_id: str,
        context: Context,
        error: Callable[[ErrorCode, str], group_pb2.FindCoordinatorResponse],
    ) -> group_pb2.FindCoordinatorResponse:
        if self._transactions is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no transaction coordinator")
        if not transactional_id:
            return error(ErrorCode.INVALID_REQUEST, "the transactional id must not be empty")
        if not self._authz.allowed(
            context, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            d = denial(Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id)
            return error(d.code, d.message)
        parts = self._metadata.topics.get(TRANSACTION_STATE_TOPIC)
        if not parts:
            self._ensure_transaction_state()
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {TRANSACTION_STATE_TOPIC}")
        return self._coordinator_at(
            parts.get(self._transactions.partition_for(transactional_id)), context
        )

    def _coordinator_at(
        self, ps: PartitionState | None, context: Context
    ) -> group_pb2.FindCoordinatorResponse:
        def error(code: ErrorCode, message: str) -> group_pb2.FindCoordinatorResponse:
            return group_pb2.FindCoordinatorResponse(
                error_code=pb_error(code), error_message=message, node_id=-1
            )

        leader = ps.leader_and_isr.leader if ps is not None else -1
        broker = self._metadata.brokers.get(leader)
        if broker is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator has no leader")
        listener = current_identity(context).listener
        address = broker.endpoint_for(listener)  # Kafka: the listener the request came in on
        if address is None:
            return error(
                ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the coordinator has no listener {listener}"
            )
        return group_pb2.FindCoordinatorResponse(
            error_code=pb_error(ErrorCode.NONE), node_id=leader, host=address[0], port=address[1]
        )

    # -- membership -----------------------------------------------------------------------

    async def JoinGroup(
        self, request: group_pb2.JoinGroupRequest, context: Context
    ) -> group_pb2.JoinGroupResponse:
        if not self._authz.group(context, Op.READ, request.group_id):
            return _group_denied(group_pb2.JoinGroupResponse, Op.READ, request.group_id)
        host = request.client_host or (context.peer() or "").rsplit(":", 1)[0]
        r = await self._runtime.join_group(
            gv.JoinGroupRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                protocol_type=request.protocol_type,
                protocols=tuple(gv.Protocol(p.name, p.metadata) for p in request.protocols),
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=request.rebalance_timeout_ms or request.session_timeout_ms,
                group_instance_id=_opt(request.group_instance_id),
                client_id=request.client_id,
                client_host=host,
                reason=request.reason,
            )
        )
        return group_pb2.JoinGroupResponse(
            error_code=pb_error(r.error_code),
            error_message=r.error_message,
            generation_id=r.generation_id,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            leader=r.leader,
            member_id=r.member_id,
            members=[
                group_pb2.JoinGroupResponseMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or "",
                    metadata=m.metadata,
                )
                for m in r.members
            ],
            skip_assignment=r.skip_assignment,
        )

    async def SyncGroup(
        self, request: group_pb2.SyncGroupRequest, context: Context
    ) -> group_pb2.SyncGroupResponse:
        if not self._authz.group(context, Op.READ, request.group_id):
            return _group_denied(group_pb2.SyncGroupResponse, Op.READ, request.group_id)
        r = await self._runtime.sync_group(
            gv.SyncGroupRequest(
                group_id=request.group_id,
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=_opt(request.group_instance_id),
                protocol_type=request.protocol_type,
                protocol_name=request.protocol_name,
                assignments=tuple((a.member_id, a.assignment) for a in request.assignments),
            )
        )
        return group_pb2.SyncGroupResponse(
            error_code=pb_error(r.error_code),
            error_message=r.error_message,
            protocol_type=r.protocol_type,
            protocol_name=r.protocol_name,
            assignment=r.assignment,
        )

    async def Heartbeat(
        self, request: group_pb2.HeartbeatRequest, context: Context
    ) -> group_pb2.HeartbeatResponse:
        if not self._authz.group(context, Op.READ, request.group_id):
            return _group_denied(group_pb2.HeartbeatResponse, Op.READ, request.group_id)
        r = await self._runtime.heartbeat(
            gv.HeartbeatRequest(
                request.group_id,
                request.generation_id,
                request.member_id,
                _opt(request.group_instance_id),
            )
        )
        return group_pb2.HeartbeatResponse(error_code=pb_error(r.error_code))

    async def LeaveGroup(
        self, request: group_pb2.LeaveGroupRequest, context: Context
    ) -> group_pb2.LeaveGroupResponse:
        if not self._authz.group(context, Op.READ, request.group_id):
            return _group_denied(group_pb2.LeaveGroupResponse, Op.READ, request.group_id)
        r = await self._runtime.leave_group(
            gv.LeaveGroupRequest(
                request.group_id,
                tuple(
                    gv.MemberIdentity(m.member_id, _opt(m.group_instance_id), m.reason)
                    for m in request.members
                ),
            )
        )
        return group_pb2.LeaveGroupResponse(
            error_code=pb_error(r.error_code),
            members=[
                group_pb2.LeaveGroupMemberResponse(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or "",
                    error_code=pb_error(m.error_code),
                )
                for m in r.members
            ],
        )

    async def ConsumerGroupHeartbeat(
        self, request: group_pb2.ConsumerGroupHeartbeatRequest, context: Context
    ) -> group_pb2.ConsumerGroupHeartbeatResponse:
        names = (
            tuple(request.subscribed_topic_names.names)
            if request.HasField("subscribed_topic_names")
            else None
        )
        authz = self._authz
        group_read = authz.group(context, Op.READ, request.group_id)  # asked first, as Kafka
        decided = authorize_subscription(
            group_id=request.group_id,
            group_read=group_read,
            subscribed_topic_names=names,
            describe_refused=(authz.topics(context, Op.DESCRIBE, names or ()) or ())
            if group_read
            else (),
            describable_topics=authz.allowed_topics(
                context, Op.DESCRIBE, self._metadata.topics, version=self._metadata.version
            )
            if group_read
            else None,
        )
        if decided.refused:
            return group_pb2.ConsumerGroupHeartbeatResponse(
                error_code=pb_error(decided.error_code),
                error_message=decided.error_message,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
            )

        def opt(field: str) -> str | None:
            return getattr(request, field) if request.HasField(field) else None  # type: ignore[arg-type]

        r = await self._runtime.consumer_group_heartbeat(
            gv.ConsumerGroupHeartbeatRequest(
                group_id=request.group_id,
                member_id=request.member_id,
                member_epoch=request.member_epoch,
                instance_id=opt("instance_id"),
                rack_id=opt("rack_id"),
                rebalance_timeout_ms=(
                    request.rebalance_timeout_ms if request.HasField("rebalance_timeout_ms") else -1
                ),
                subscribed_topic_names=names,
                subscribed_topic_regex=opt("subscribed_topic_regex"),
                server_assignor=opt("server_assignor"),
                topic_partitions=(
                    _partitions_from_pb(request.topic_partitions)
                    if request.HasField("topic_partitions")
                    else None
                ),
                client_host=(context.peer() or "").rsplit(":", 1)[0],
                describable_topics=decided.describable_topics,
            )
        )
        return group_pb2.ConsumerGroupHeartbeatResponse(
            error_code=pb_error(r.error_code),
            error_message=r.error_message,
            member_id=r.member_id,
            member_epoch=r.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=_partitions_to_pb(r.assignment) if r.assignment is not None else None,
        )

    # -- offsets --------------------------------------------------------------------------

    async def OffsetCommit(
        self, request: group_pb2.OffsetCommitRequest, context: Context
    ) -> group_pb2.OffsetCommitResponse:
        authz = self._authz
        if not authz.group(context, Op.READ, request.group_id):
            return _group_denied(group_pb2.OffsetCommitResponse, Op.READ, request.group_id)
        refused = authz.topics(context, Op.READ, (p.topic for p in request.partitions)) or ()
        r = await self._runtime.commit_offsets(
            gv.OffsetCommitRequest(
                group_id=request.group_id,
                partitions=tuple(
                    gv.OffsetCommit(
                        p.topic,
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata,
                    )
                    for p in request.partitions
                    if p.topic not in refused
                ),
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=_opt(request.group_instance_id),
            )
        )
        return group_pb2.OffsetCommitResponse(
            error_code=pb_error(r.error_code),
            partitions=[
                group_pb2.OffsetCommitResponsePartition(
                    topic=tp.topic, partition_index=tp.partition, error_code=pb_error(code)
                )
                for tp, code in r.partitions
            ]
            + [
                group_pb2.OffsetCommitResponsePartition(
                    topic=p.topic,
                    partition_index=p.partition_index,
                    error_code=pb_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                )
                for p in request.partitions
                if p.topic in refused
            ],
        )

    async def OffsetFetch(
        self, request: group_pb2.OffsetFetchRequest, context: Context
    ) -> group_pb2.OffsetFetchResponse:
        authz = self._authz
        if not authz.group(context, Op.DESCRIBE, request.group_id):
            return _group_denied(group_pb2.OffsetFetchResponse, Op.DESCRIBE, request.group_id)
        wanted = [TopicPartition(p.topic, p.partition) for p in request.partitions]
        r = self._runtime.fetch_offsets(
            request.group_id,
            wanted or None,
            member_id=_opt(request.member_id),
            member_epoch=request.member_epoch,
            require_stable=request.require_stable,
        )
        offsets = sorted(r.offsets.items())
        refused = authz.topics(context, Op.DESCRIBE, (tp.topic for tp, _ in offsets)) or ()
        return group_pb2.OffsetFetchResponse(
            error_code=pb_error(r.error_code),
            partitions=[
                group_pb2.OffsetFetchResponsePartition(
                    topic=tp.topic,
                    partition_index=tp.partition,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    error_code=pb_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                )
                for tp, _ in offsets
                if wanted and tp.topic in refused  # asked for: refused; all: hidden (Kafka)
            ]
            + [
                group_pb2.OffsetFetchResponsePartition(
                    topic=tp.topic,
                    partition_index=tp.partition,
                    committed_offset=off.offset if off is not None else -1,
                    committed_leader_epoch=off.leader_epoch if off is not None else -1,
                    metadata=off.metadata if off is not None else "",
                )
                for tp, off in offsets
                if tp.topic not in refused and tp not in r.unstable
            ]
            + [
                group_pb2.OffsetFetchResponsePartition(
                    topic=tp.topic,
                    partition_index=tp.partition,
                    committed_offset=-1,
                    committed_leader_epoch=-1,
                    error_code=pb_error(ErrorCode.UNSTABLE_OFFSET_COMMIT),
                )
                for tp, _ in offsets
                if tp.topic not in refused and tp in r.unstable
            ],
        )

    # -- administration -------------------------------------------------------------------

    async def DescribeGroups(
        self, request: group_pb2.DescribeGroupsRequest, context: Context
    ) -> group_pb2.DescribeGroupsResponse:
        out = []
        for gid in request.groups:
            if not self._authz.group(context, Op.DESCRIBE, gid):
                out.append(_group_denied(group_pb2.DescribedGroup, Op.DESCRIBE, gid))
                out[-1].group_id = gid
                continue
            d = self._runtime.describe_group(gid)
            out.append(
                group_pb2.DescribedGroup(
                    error_code=pb_error(d.error_code),
                    group_id=gid,
                    group_state=d.state,
                    protocol_type=d.protocol_type,
                    protocol_data=d.protocol,
                    generation_id=d.generation_id,
                    group_type=d.group_type,
                    group_epoch=d.group_epoch,
                    assignment_epoch=d.assignment_epoch,
                    members=[
                        group_pb2.DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id or "",
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                            member_epoch=m.member_epoch,
                            member_state=m.member_state,
                            assignment=[_tp_pb(tp) for tp in m.owned],
                            target_assignment=[_tp_pb(tp) for tp in m.target],
                            subscribed_topic_names=m.subscribed_topics,
                            subscribed_topic_regex=m.subscribed_regex,
                        )
                        for m in d.members
                    ],
                )
            )
        return group_pb2.DescribeGroupsResponse(groups=out)

    async def ListGroups(
        self, request: group_pb2.ListGroupsRequest, context: Context
    ) -> group_pb2.ListGroupsResponse:
        authz = self._authz
        every = authz.cluster(context, Op.DESCRIBE)  # else only the groups one may describe
        return group_pb2.ListGroupsResponse(
            error_code=pb_error(ErrorCode.NONE),
            groups=[
                group_pb2.ListedGroup(
                    group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state
                )
                for g in self._runtime.list_groups(request.states_filter)
                if every or authz.group(context, Op.DESCRIBE, g.group_id)
            ],
        )

    async def DeleteGroups(
        self, request: group_pb2.DeleteGroupsRequest, context: Context
    ) -> group_pb2.DeleteGroupsResponse:
        names = list(request.groups_names)
        refused = [g for g in names if not self._authz.group(context, Op.DELETE, g)]
        results = await self._runtime.delete_groups([g for g in names if g not in refused])
        denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in refused]
        return group_pb2.DeleteGroupsResponse(
            results=[
                group_pb2.DeletableGroupResult(group_id=gid, error_code=pb_error(code))
                for gid, code in [*results, *denied]
            ]
        )
