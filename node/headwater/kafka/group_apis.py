"""The Kafka listener's classic consumer-group APIs, in front of the group coordinator.

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
DescribeGroups, ListGroups, DeleteGroups, and KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe turn ``kio`` requests (any supported version)
into the :mod:`headwater.groups.values` the
:class:`~headwater.groups.coordinator_runtime.GroupCoordinatorRuntime` takes, as the gRPC
Group servicer does, with the same ACL checks; a group is one group whichever door its
members use.  FindCoordinator answers with the coordinator's address on this Kafka
listener; the first FindCoordinator of a cluster creates ``__consumer_offsets`` and
answers COORDINATOR_NOT_AVAILABLE until it has leaders, and clients retry.

ConsumerGroupHeartbeat and ConsumerGroupDescribe name topics by id on the wire and by
name in the coordinator: :mod:`headwater.kafka.topic_ids` maps one to the other, and a
partition of a topic id the cluster does not know (a deleted topic) is left out of what
the member says it owns.

JoinGroup starts at v4: from v4 on, Kafka makes a new member rejoin with the member id
it is given (MEMBER_ID_REQUIRED), which is what the coordinator does for every member.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any, cast

from headwater.errors import ErrorCode
from headwater.groups import values as gv
from headwater.groups.consumer.subscription_authorization import authorize_subscription
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.placement import (
    OFFSETS_TOPIC,
)
from headwater.kafka import coordinators
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.kafka.topic_ids import TopicIds
from headwater.security.acls import AclOperation as Op
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)
"""The authorizer reads the identity from its context variable, never from this."""


def _ms(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


class KafkaGroupApis:
    """Group handlers of one Kafka listener (event-loop only)."""

    def __init__(
        self,
        *,
        listener: str,
        groups: GroupCoordinatorRuntime,
        metadata: MetadataCache,
        authz: RequestAuthorizer,
        ensure_offsets_topic: Callable[[], None],
    ) -> None:
        """``ensure_offsets_topic`` starts creating ``__consumer_offsets`` (once at a time)."""
        self._listener = listener
        self._groups = groups
        self._metadata = metadata
        self._authz = authz
        self._ensure_offsets_topic = ensure_offsets_topic
        self._topic_ids = TopicIds(metadata)

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.find_coordinator,
            11: self.join_group,
            12: self.heartbeat,
            13: self.leave_group,
            14: self.sync_group,
            15: self.describe_groups,
            16: self.list_groups,
            42: self.delete_groups,
            47: self.offset_delete,
            68: self.consumer_group_heartbeat,
            69: self.consumer_group_describe,
        }

    # -- FindCoordinator ----------------------------------------------------------------

    async def find_coordinator(self, request: Request) -> Any:
        return coordinators.answer(request, self._coordinator_of)

    def _coordinator_of(self, key: str, key_type: int) -> coordinators.Coordinator:
        error = coordinators.no_coordinator
        if key_type != 0:
            return error(ErrorCode.INVALID_REQUEST, "only group coordinators (key_type 0)")
        if not key:
            return error(ErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        if not self._authz.group(_NO_GRPC_CONTEXT, Op.DESCRIBE, key):
            return error(ErrorCode.GROUP_AUTHORIZATION_FAILED, f"not authorized on group {key!r}")
        parts = self._metadata.topics.get(OFFSETS_TOPIC)
        if not parts:
            self._ensure_offsets_topic()
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {OFFSETS_TOPIC}")
        ps = parts.get(self._groups.partition_for(key))
        return coordinators.leader_on_listener(self._metadata, self._listener, ps)

    # -- membership ---------------------------------------------------------------------

    async def join_group(self, request: Request) -> Any:
        body, module = request.body, response_module(11, request.api_version)
        if not self._authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            return build(
                module.JoinGroupResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                generation_id=-1,
                protocol_type=None,
                protocol_name=None if request.api_version >= 7 else "",
                leader="",
                member_id=body.member_id,
                members=(),
            )
        session_ms = _ms(body.session_timeout)
        r = await self._groups.join_group(
            gv.JoinGroupRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                protocol_type=body.protocol_type,
                protocols=tuple(gv.Protocol(p.name, bytes(p.metadata)) for p in body.protocols),
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=_ms(body.rebalance_timeout) or session_ms,
                group_instance_id=getattr(body, "group_instance_id", None) or None,
                client_id=request.client_id or "",
                client_host=current_identity(_NO_GRPC_CONTEXT).host,
                reason=getattr(body, "reason", None) or "",
            )
        )
        return build(
            module.JoinGroupResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(r.error_code),
            generation_id=r.generation_id,
            protocol_type=r.protocol_type or None,
            # Nullable from v7; before, Kafka writes an empty name while none is chosen.
            protocol_name=r.protocol_name or (None if request.api_version >= 7 else ""),
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=tuple(
                build(
                    module.JoinGroupResponseMember,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    metadata=m.metadata,
                )
                for m in r.members
            ),
        )

    async def sync_group(self, request: Request) -> Any:
        body, module = request.body, response_module(14, request.api_version)
        if not self._authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            return build(
                module.SyncGroupResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                protocol_type=None,
                protocol_name=None,
                assignment=b"",
            )
        r = await self._groups.sync_group(
            gv.SyncGroupRequest(
                group_id=body.group_id,
                generation_id=body.generation_id,
                member_id=body.member_id,
                group_instance_id=getattr(body, "group_instance_id", None) or None,
                protocol_type=getattr(body, "protocol_type", None) or "",
                protocol_name=getattr(body, "protocol_name", None) or "",
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments),
            )
        )
        return build(
            module.SyncGroupResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(r.error_code),
            protocol_type=r.protocol_type or None,
            protocol_name=r.protocol_name or None,
            assignment=r.assignment,
        )

    async def heartbeat(self, request: Request) -> Any:
        body, module = request.body, response_module(12, request.api_version)
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if self._authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            r = await self._groups.heartbeat(
                gv.HeartbeatRequest(
                    body.group_id,
                    body.generation_id,
                    body.member_id,
                    getattr(body, "group_instance_id", None) or None,
                )
            )
            code = r.error_code
        return build(
            module.HeartbeatResponse, throttle_time=_NO_THROTTLE, error_code=error_code(code)
        )

    async def leave_group(self, request: Request) -> Any:
        body, module = request.body, response_module(13, request.api_version)
        if not self._authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            return build(
                module.LeaveGroupResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                members=(),
            )
        members = (
            tuple(
                gv.MemberIdentity(m.member_id, m.group_instance_id or None, m.reason or "")
                for m in body.members
            )
            if hasattr(body, "members")
            else (gv.MemberIdentity(body.member_id, None, ""),)
        )
        r = await self._groups.leave_group(gv.LeaveGroupRequest(body.group_id, members))
        code = r.error_code
        if not hasattr(body, "members") and code is ErrorCode.NONE and r.members:
            code = r.members[0].error_code  # v0-v2: the one member's error is the answer
        return build(
            module.LeaveGroupResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            members=tuple(
                build(
                    module.MemberResponse,
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    error_code=error_code(m.error_code),
                )
                for m in r.members
            )
            if hasattr(module, "MemberResponse")
            else (),
        )

    # -- consumer protocol (KIP-848) ------------------------------------------------------

    async def consumer_group_heartbeat(self, request: Request) -> Any:
        """ConsumerGroupHeartbeat, with the gRPC servicer's ACL decision
        (:func:`authorize_subscription`) and the coordinator's answers (UNKNOWN_MEMBER_ID,
        FENCED_MEMBER_EPOCH, INVALID_REQUEST, ...)."""
        body, module = request.body, response_module(68, request.api_version)
        authz, ids = self._authz, self._topic_ids
        names = (
            tuple(body.subscribed_topic_names) if body.subscribed_topic_names is not None else None
        )
        group_read = authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id)  # first, as Kafka
        decided = authorize_subscription(
            group_id=body.group_id,
            group_read=group_read,
            subscribed_topic_names=names,
            describe_refused=(authz.topics(_NO_GRPC_CONTEXT, Op.DESCRIBE, names or ()) or ())
            if group_read
            else (),
            describable_topics=authz.allowed_topics(
                _NO_GRPC_CONTEXT, Op.DESCRIBE, self._metadata.topics, version=self._metadata.version
            )
            if group_read
            else None,
        )
        if decided.refused:
            r = gv.ConsumerGroupHeartbeatResponse(
                decided.error_code, decided.error_message, body.member_id, body.member_epoch
            )
        else:
            owned = None
            if body.topic_partitions is not None:
                owned = tuple(
                    TopicPartition(name, p)
                    for t in body.topic_partitions
                    if (name := ids.name_of(t.topic_id)) is not None
                    for p in t.partitions
                )
            r = await self._groups.consumer_group_heartbeat(
                gv.ConsumerGroupHeartbeatRequest(
                    group_id=body.group_id,
                    member_id=body.member_id,
                    member_epoch=body.member_epoch,
                    instance_id=body.instance_id,
                    rack_id=body.rack_id,
                    rebalance_timeout_ms=_ms(body.rebalance_timeout),
                    subscribed_topic_names=names,
                    subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
                    server_assignor=body.server_assignor,
                    topic_partitions=owned,
                    client_id=request.client_id or "",
                    client_host=current_identity(_NO_GRPC_CONTEXT).host,
                    describable_topics=decided.describable_topics,
                )
            )
        return build(
            module.ConsumerGroupHeartbeatResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(r.error_code),
            error_message=r.error_message or None,
            member_id=r.member_id or None,
            member_epoch=r.member_epoch,
            heartbeat_interval=datetime.timedelta(milliseconds=r.heartbeat_interval_ms),
            assignment=None
            if r.assignment is None
            else build(
                module.Assignment,
                topic_partitions=self._by_topic_id(module.TopicPartitions, r.assignment),
            ),
        )

    def _by_topic_id(
        self, entity: Any, tps: tuple[TopicPartition, ...], *, names: bool = False
    ) -> Any:
        """``tps`` as Kafka's ``TopicPartitions`` (one per topic, by id; ``names=True``
        adds the topic name, as ConsumerGroupDescribe has it)."""
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return tuple(
            build(
                entity,
                topic_id=self._topic_ids.id_of(topic),
                partitions=tuple(parts),
                **({"topic_name": topic} if names else {}),
            )
            for topic, parts in by_topic.items()
        )

    async def consumer_group_describe(self, request: Request) -> Any:
        """ConsumerGroupDescribe: DESCRIBE on each group; a classic group is
        GROUP_ID_NOT_FOUND here, as in Kafka (DescribeGroups describes it)."""
        body, module = request.body, response_module(69, request.api_version)

        def group(gid: str, code: ErrorCode, message: str | None) -> Any:
            return build(
                module.DescribedGroup,
                error_code=error_code(code),
                error_message=message,
                group_id=gid,
                group_state="",
                group_epoch=-1,
                assignment_epoch=-1,
                assignor_name="",
                members=(),
                authorized_operations=-2147483648,
            )

        out = []
        for gid in body.group_ids:
            if not self._authz.group(_NO_GRPC_CONTEXT, Op.DESCRIBE, gid):
                out.append(
                    group(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED, "not authorized on the group")
                )
                continue
            d = self._groups.describe_group(gid)
            if d.error_code is not ErrorCode.NONE:
                out.append(group(gid, d.error_code, None))
                continue
            if d.group_type != "consumer":
                message = (
                    f"Group {gid} not found."
                    if not d.members and d.state.lower() == "dead"
                    else f"Group {gid} is not a consumer group."
                )
                out.append(group(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
                continue
            out.append(
                build(
                    module.DescribedGroup,
                    error_code=error_code(ErrorCode.NONE),
                    error_message=None,
                    group_id=gid,
                    group_state=d.state,
                    group_epoch=d.group_epoch,
                    assignment_epoch=d.assignment_epoch,
                    assignor_name=d.protocol,
                    members=tuple(
                        build(
                            module.Member,
                            member_id=m.member_id,
                            instance_id=m.group_instance_id,
                            rack_id=None,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=m.subscribed_topics,
                            subscribed_topic_regex=m.subscribed_regex or None,
                            assignment=build(
                                module.Assignment,
                                topic_partitions=self._by_topic_id(
                                    module.TopicPartitions, m.owned, names=True
                                ),
                            ),
                            target_assignment=build(
                                module.Assignment,
                                topic_partitions=self._by_topic_id(
                                    module.TopicPartitions, m.target, names=True
                                ),
                            ),
                        )
                        for m in d.members
                    ),
                    authorized_operations=-2147483648,
                )
            )
        return build(
            module.ConsumerGroupDescribeResponse, throttle_time=_NO_THROTTLE, groups=tuple(out)
        )

    # -- administration -----------------------------------------------------------------

    async def describe_groups(self, request: Request) -> Any:
        body, module = request.body, response_module(15, request.api_version)
        out = []
        for gid in body.groups:
            if not self._authz.group(_NO_GRPC_CONTEXT, Op.DESCRIBE, gid):
                out.append(
                    build(
                        module.DescribedGroup,
                        error_code=error_code(ErrorCode.GROUP_AUTHORIZATION_FAILED),
                        group_id=gid,
                        group_state="",
                        protocol_type="",
                        protocol_data="",
                        members=(),
                    )
                )
                continue
            d = self._groups.describe_group(gid)
            out.append(
                build(
                    module.DescribedGroup,
                    error_code=error_code(d.error_code),
                    group_id=gid,
                    group_state=d.state,
                    protocol_type=d.protocol_type,
                    protocol_data=d.protocol,
                    members=tuple(
                        build(
                            module.DescribedGroupMember,
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=m.metadata,
                            member_assignment=m.assignment,
                        )
                        for m in d.members
                    ),
                )
            )
        return build(module.DescribeGroupsResponse, throttle_time=_NO_THROTTLE, groups=tuple(out))

    async def list_groups(self, request: Request) -> Any:
        body, module = request.body, response_module(16, request.api_version)
        authz = self._authz
        every = authz.cluster(_NO_GRPC_CONTEXT, Op.DESCRIBE)  # else the groups one may describe
        types = {t.lower() for t in getattr(body, "types_filter", ())}  # v5: classic, consumer
        return build(
            module.ListGroupsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(ErrorCode.NONE),
            groups=tuple(
                build(
                    module.ListedGroup,
                    group_id=g.group_id,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type=g.group_type,
                )
                for g in self._groups.list_groups(getattr(body, "states_filter", ()))
                if (not types or g.group_type in types)
                and (every or authz.group(_NO_GRPC_CONTEXT, Op.DESCRIBE, g.group_id))
            ),
        )

    async def delete_groups(self, request: Request) -> Any:
        body, module = request.body, response_module(42, request.api_version)
        names = list(body.groups_names)
        refused = [g for g in names if not self._authz.group(_NO_GRPC_CONTEXT, Op.DELETE, g)]
        results = await self._groups.delete_groups([g for g in names if g not in refused])
        denied = [(g, ErrorCode.GROUP_AUTHORIZATION_FAILED) for g in refused]
        return build(
            module.DeleteGroupsResponse,
            throttle_time=_NO_THROTTLE,
            results=tuple(
                build(module.DeletableGroupResult, group_id=gid, error_code=error_code(code))
                for gid, code in [*results, *denied]
            ),
        )

    # -- offsets ------------------------------------------------------------------------

    async def offset_delete(self, request: Request) -> Any:
        """OffsetDelete: DELETE on the group (else GROUP_AUTHORIZATION_FAILED for all),
        READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions); a
        partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION; the rest is
        the coordinator's (:meth:`GroupCoordinator.delete_offsets`)."""
        body, module = request.body, response_module(47, request.api_version)
        requested = [
            TopicPartition(t.name, p.partition_index) for t in body.topics for p in t.partitions
        ]
        answers: dict[TopicPartition, ErrorCode] = {}
        code = ErrorCode.NONE
        if not self._authz.group(_NO_GRPC_CONTEXT, Op.DELETE, body.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.READ, (tp.topic for tp in requested))
            for tp in requested:
                if refused is not None and tp.topic in refused:
                    answers[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif tp.partition not in self._metadata.topics.get(tp.topic, {}):
                    answers[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result = await self._groups.delete_offsets(
                body.group_id, [tp for tp in requested if tp not in answers]
            )
            code = result.error_code
            answers.update(result.partitions)
        by_topic: dict[str, list[Any]] = {}
        for tp in requested if code is ErrorCode.NONE else ():
            by_topic.setdefault(tp.topic, []).append(
                build(
                    module.OffsetDeleteResponsePartition,
                    partition_index=tp.partition,
                    error_code=error_code(answers[tp]),
                )
            )
        return build(
            module.OffsetDeleteResponse,
            error_code=error_code(code),
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                build(module.OffsetDeleteResponseTopic, name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )

    async def offset_commit(self, request: Request) -> Any:
        body, module = request.body, response_module(8, request.api_version)
        authz = self._authz
        requested = [(t.name, p) for t in body.topics for p in t.partitions]
        if not authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            results = [
                (n, p.partition_index, ErrorCode.GROUP_AUTHORIZATION_FAILED) for n, p in requested
            ]
        else:
            refused = authz.topics(_NO_GRPC_CONTEXT, Op.READ, (n for n, _ in requested)) or ()
            r = await self._groups.commit_offsets(
                gv.OffsetCommitRequest(
                    group_id=body.group_id,
                    partitions=tuple(
                        gv.OffsetCommit(
                            n,
                            p.partition_index,
                            p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1),
                            p.committed_metadata or "",
                        )
                        for n, p in requested
                        if n not in refused
                    ),
                    generation_id=body.generation_id_or_member_epoch,
                    member_id=body.member_id,
                    group_instance_id=getattr(body, "group_instance_id", None) or None,
                )
            )
            results = [(tp.topic, tp.partition, code) for tp, code in r.partitions]
            if r.error_code is not ErrorCode.NONE and not r.partitions:
                results = [
                    (n, p.partition_index, r.error_code) for n, p in requested if n not in refused
                ]
            results += [
                (n, p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for n, p in requested
                if n in refused
            ]
        by_topic: dict[str, list[Any]] = {}
        for name, partition, code in results:
            by_topic.setdefault(name, []).append(
                build(
                    module.OffsetCommitResponsePartition,
                    partition_index=partition,
                    error_code=error_code(code),
                )
            )
        return build(
            module.OffsetCommitResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                build(module.OffsetCommitResponseTopic, name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
        )

    async def offset_fetch(self, request: Request) -> Any:
        """GROUP DESCRIBE, then TOPIC DESCRIBE per topic.  With ``require_stable`` (v7+,
        KIP-447) a partition whose transactional offset commit is still pending answers
        UNSTABLE_OFFSET_COMMIT instead of its last stable offset: the consumer retries
        once the transaction ends."""
        body, module = request.body, response_module(9, request.api_version)
        authz = self._authz
        wanted = (
            [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
            if body.topics is not None
            else []
        )
        if not authz.group(_NO_GRPC_CONTEXT, Op.DESCRIBE, body.group_id):
            return build(
                module.OffsetFetchResponse,
                throttle_time=_NO_THROTTLE,
                topics=(),
                error_code=error_code(ErrorCode.GROUP_AUTHORIZATION_FAILED),
            )
        r = self._groups.fetch_offsets(
            body.group_id, wanted or None, require_stable=getattr(body, "require_stable", False)
        )
        offsets = sorted(r.offsets.items())
        refused = authz.topics(_NO_GRPC_CONTEXT, Op.DESCRIBE, (tp.topic for tp, _ in offsets)) or ()
        by_topic: dict[str, list[Any]] = {}
        for tp, off in offsets:
            if tp.topic in refused and not wanted:
                continue  # listing every offset: the refused topics are hidden (Kafka)
            code = (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if tp.topic in refused
                else ErrorCode.UNSTABLE_OFFSET_COMMIT
                if tp in r.unstable
                else ErrorCode.NONE
            )
            shown = off if code is ErrorCode.NONE else None
            by_topic.setdefault(tp.topic, []).append(
                build(
                    module.OffsetFetchResponsePartition,
                    partition_index=tp.partition,
                    committed_offset=shown.offset if shown is not None else -1,
                    committed_leader_epoch=shown.leader_epoch if shown is not None else -1,
                    metadata=shown.metadata if shown is not None else "",
                    error_code=error_code(code),
                )
            )
        if r.error_code is not ErrorCode.NONE and not hasattr(
            module.OffsetFetchResponse, "error_code"
        ):
            # v1 has no top-level error: Kafka puts it on every partition asked for.
            by_topic = {}
            for tp in wanted:
                by_topic.setdefault(tp.topic, []).append(
                    build(
                        module.OffsetFetchResponsePartition,
                        partition_index=tp.partition,
                        committed_offset=-1,
                        metadata="",
                        error_code=error_code(r.error_code),
                    )
                )
        return build(
            module.OffsetFetchResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                build(module.OffsetFetchResponseTopic, name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()
            ),
            error_code=error_code(r.error_code),
        )
