"""The group coordinator of one ``__consumer_offsets`` partition: a state machine, no I/O.

:class:`GroupCoordinator` is what the runtime
(:class:`headwater.groups.coordinator_runtime.GroupCoordinatorRuntime`) drives.  Its operations live
in two modules, layered by inheritance: :mod:`headwater.groups.classic.membership` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and rebalances; it also defines :class:`Decision`, what
every operation returns) and :mod:`headwater.groups.offsets` (OffsetCommit, OffsetFetch,
DeleteGroups, replay).  This module adds the timers -- one method,
:meth:`GroupCoordinator.tick`, that the runtime calls with the clock: session expiry, the
join and sync phase deadlines, ``group.initial.rebalance.delay.ms``, pending-member expiry
and offset retention -- plus DescribeGroups, ListGroups and the rebalance figures.

State is rebuilt on a new leader by :meth:`GroupCoordinator.replay` of every record in the
partition, in order (see :mod:`headwater.groups.records` for the format).

Groups of the next-generation protocol (KIP-848) live beside the classic ones, in
:attr:`GroupCoordinator.consumer` (:class:`headwater.groups.consumer.groups.ConsumerGroups`);
one group id is one or the other.  A ConsumerGroupHeartbeat joining a classic group with
members converts it when Kafka's rules allow (:mod:`headwater.groups.migration`; else
GROUP_ID_NOT_FOUND); its classic members stay, and their JoinGroup, SyncGroup, Heartbeat,
LeaveGroup and commits are answered from the consumer group, which new classic members
may join too (a restarted static one takes its old place).  When its last
consumer-protocol member is gone, a group of classic members goes back to classic if the
policy allows.  A JoinGroup of another protocol type for a consumer group with members
gets INCONSISTENT_GROUP_PROTOCOL; an *empty* group of the other kind gives way.
Committed offsets of both kinds are held by the classic
:class:`headwater.groups.classic.group.GroupMetadata` of the id (for a consumer group: an empty
one that only holds offsets), so commits, fetches and offset records stay one path; a
consumer group's commits and fetches are checked against member epochs (a classic
member's: its generation) first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from headwater.errors import ErrorCode
from headwater.groups import migration, records
from headwater.groups.classic.group import GroupMetadata
from headwater.groups.classic.membership import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    Decision,
    GroupMembership,
    Out,
    RebalanceStats,
    Reply,
    default_member_id,
)
from headwater.groups.consumer import records as consumer_records
from headwater.groups.consumer.group import JOIN_EPOCH, ConsumerGroup
from headwater.groups.consumer.groups import ConsumerGroups, new_consumer_member_id
from headwater.groups.offsets import GroupOffsets
from headwater.groups.values import (
    CONSUMER_PROTOCOL_TYPE,
    NO_GENERATION,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    GroupDescription,
    GroupOverview,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    MemberDescription,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from headwater.values import TopicPartition

__all__ = [
    "Decision",
    "GroupCoordinator",
    "GroupMembership",
    "RebalanceStats",
    "Reply",
    "default_member_id",
]


class GroupCoordinator(GroupOffsets):
    """Every group whose coordinator partition this is (see the module docstring).

    Not thread-safe and not re-entrant: the runtime calls one method at a time.
    """

    def __init__(
        self,
        *,
        config: GroupConfig | None = None,
        member_id_factory: Callable[[str], str] = default_member_id,
        consumer_member_id_factory: Callable[[], str] = new_consumer_member_id,
    ) -> None:
        super().__init__(config=config, member_id_factory=member_id_factory)
        self.consumer = ConsumerGroups(
            config=self.config, member_id_factory=consumer_member_id_factory
        )
        self._partition_counts: Mapping[str, int] = {}
        """The topics' partition counts last passed in (a heartbeat or tick), for
        classic-protocol calls that come without them."""

    def _counts(self, given: Mapping[str, int] | None) -> Mapping[str, int]:
        if given is not None:
            self._partition_counts = given
        return self._partition_counts

    # == the consumer protocol (KIP-848) ===============================================

    def consumer_group_heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        *,
        request_id: int,
        now_ms: int,
        partition_counts: Mapping[str, int],
    ) -> Decision:
        out = Out()
        self._counts(partition_counts)
        classic = self.groups.get(req.group_id)
        if classic is not None and not classic.is_(EMPTY, DEAD):
            response = self._upgrade(req, classic, now_ms, partition_counts, out)
        else:
            response, written = self.consumer.heartbeat(
                req, now_ms=now_ms, partition_counts=partition_counts
            )
            out.records.extend(written)
            self._maybe_downgrade(req.group_id, now_ms, out)
        out.reply(request_id, response)
        return out.decision()

    def _maybe_downgrade(self, group_id: str, now_ms: int, out: Out) -> None:
        """The last consumer-protocol member is gone and classic members remain: back
        to a classic group, rebalancing (:func:`headwater.groups.migration.to_classic`)."""
        group = self.consumer.groups.get(group_id)
        if group is None or not migration.downgradable(group, self.config):
            return
        classic = migration.to_classic(group, now_ms=now_ms)
        if classic is None:
            return  # they share no protocol: they stay classic members of this group
        out.records.extend(self.consumer.drop_converted(group_id))
        holder = self.groups.get(group_id)
        if holder is not None:
            classic.offsets = holder.offsets
        self.groups[group_id] = classic
        out.records.append(classic.record())
        self._prepare_rebalance(classic, now_ms, out)

    def _upgrade(
        self,
        req: ConsumerGroupHeartbeatRequest,
        classic: GroupMetadata,
        now_ms: int,
        partition_counts: Mapping[str, int],
        out: Out,
    ) -> ConsumerGroupHeartbeatResponse:
        """A ConsumerGroupHeartbeat for the non-empty ``classic`` group: convert it and
        join, or refuse (:mod:`headwater.groups.migration`)."""
        gid = req.group_id
        if req.member_epoch != JOIN_EPOCH:
            return self.consumer.refuse(
                req, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a consumer group."
            )
        refusal = migration.upgrade_refusal(classic, self.config)
        if refusal is not None:
            return self.consumer.refuse(req, *refusal)
        converted = self.consumer.new_group(gid)
        why = migration.convert(classic, converted, now_ms=now_ms)
        if why is not None:
            return self.consumer.refuse(
                req, ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {gid}: {why}"
            )
        response, written = self.consumer.heartbeat(
            req, now_ms=now_ms, partition_counts=partition_counts, converted=converted
        )
        if response.error_code is ErrorCode.NONE:
            # The classic group is gone (a tombstone, as Kafka); its offsets stay.
            holder = GroupMetadata(gid, now_ms=now_ms)
            holder.offsets = classic.offsets
            self.groups[gid] = holder
            out.records.append(records.group_record(records.GroupKey(gid), None))
            out.records.extend(written)
        return response

    def join_group(
        self,
        req: JoinGroupRequest,
        *,
        request_id: int,
        now_ms: int,
        partition_counts: Mapping[str, int] | None = None,
    ) -> Decision:
        group = self.consumer.groups.get(req.group_id)
        if group is None:
            return super().join_group(req, request_id=request_id, now_ms=now_ms)
        member = group.members.get(req.member_id)
        new_classic = (
            member is None and bool(group.members) and req.protocol_type == CONSUMER_PROTOCOL_TYPE
        )
        if (member is not None and member.is_classic) or new_classic:
            return self._classic_join(
                req, group, request_id, now_ms, self._counts(partition_counts)
            )
        if group.members:
            out = Out()
            message = f"Group {req.group_id} uses the consumer group protocol."
            out.reply(
                request_id,
                JoinGroupResponse(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id, error_message=message
                ),
            )
            return out.decision()
        tombstones = self.consumer.drop(req.group_id)  # an empty consumer group gives way
        joined = super().join_group(req, request_id=request_id, now_ms=now_ms)
        return Decision((*tombstones, *joined.records), joined.replies)

    # -- classic members of a converted group (headwater.groups.migration) -------------

    def _classic_join(
        self,
        req: JoinGroupRequest,
        group: ConsumerGroup,
        request_id: int,
        now_ms: int,
        partition_counts: Mapping[str, int],
    ) -> Decision:
        out = Out()
        cfg = self.config
        code, message = ErrorCode.NONE, ""
        sub: migration.ClassicSubscription | None = None
        if req.protocol_type != CONSUMER_PROTOCOL_TYPE or not req.protocols:
            code, message = ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "not the consumer protocol"
        elif not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            code, message = ErrorCode.INVALID_SESSION_TIMEOUT, "session.timeout.ms out of bounds"
        elif (
            req.member_id
            and req.group_instance_id is not None
            and group.static_members.get(req.group_instance_id, req.member_id) != req.member_id
        ):
            code, message = ErrorCode.FENCED_INSTANCE_ID, "the instance has a newer member"
        elif not req.member_id and req.group_instance_id is None:
            # A new dynamic classic member: Kafka's MEMBER_ID_REQUIRED dance.
            out.reply(
                request_id,
                JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, self.consumer.new_member_id()),
            )
            return out.decision()
        elif (
            req.member_id not in group.members
            and req.group_instance_id not in group.static_members
            and len(group.members) >= cfg.consumer_max_size
        ):
            code, message = (
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{cfg.consumer_max_size} members.",
            )
        else:
            try:
                sub = migration.decode_subscription(req.protocols[0].metadata)
            except (ValueError, UnicodeDecodeError) as exc:
                code, message = ErrorCode.INCONSISTENT_GROUP_PROTOCOL, str(exc)
        if code is not ErrorCode.NONE or sub is None:
            out.reply(request_id, JoinGroupResponse(code, req.member_id, error_message=message))
            return out.decision()
        before = consumer_records.image(group)
        member = migration.classic_join(
            group,
            req.member_id or self.consumer.new_member_id(),
            instance_id=req.group_instance_id,
            subscribed_topics=sub.topics,
            owned=sub.owned,
            protocols=req.protocols,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            now_ms=now_ms,
            partition_counts=partition_counts,
            create=True,
            client_id=req.client_id,
            client_host=req.client_host,
        )
        if member is None:  # its instance id belongs to a consumer-protocol member
            out.reply(
                request_id,
                JoinGroupResponse(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    req.member_id,
                    error_message=f"Instance {req.group_instance_id} is in use.",
                ),
            )
            return out.decision()
        out.records.extend(consumer_records.changes(before, consumer_records.image(group)))
        out.reply(
            request_id,
            JoinGroupResponse(
                ErrorCode.NONE,
                member.member_id,
                member.member_epoch,
                CONSUMER_PROTOCOL_TYPE,
                req.protocols[0].name,
                leader="",  # no member assigns: the coordinator did
            ),
        )
        return out.decision()

    def sync_group(self, req: SyncGroupRequest, *, request_id: int, now_ms: int) -> Decision:
        group = self.consumer.groups.get(req.group_id)
        member = group.members.get(req.member_id) if group is not None else None
        if group is None or member is None or not member.is_classic:
            return super().sync_group(req, request_id=request_id, now_ms=now_ms)
        code = migration.classic_check(group, req.member_id, req.generation_id, now_ms=now_ms)
        response = (
            SyncGroupResponse(
                code,
                migration.encode_assignment(member.assigned),
                CONSUMER_PROTOCOL_TYPE,
                req.protocol_name or (member.classic_protocols or ())[0].name,
            )
            if code is ErrorCode.NONE
            else SyncGroupResponse(code)
        )
        return Decision(replies=(Reply(request_id, response),))

    def heartbeat(self, req: HeartbeatRequest, *, request_id: int, now_ms: int) -> Decision:
        group = self.consumer.groups.get(req.group_id)
        if group is None or not group.members:
            return super().heartbeat(req, request_id=request_id, now_ms=now_ms)
        code = migration.classic_heartbeat(group, req.member_id, req.generation_id, now_ms=now_ms)
        return Decision(replies=(Reply(request_id, HeartbeatResponse(code)),))

    def leave_group(
        self,
        req: LeaveGroupRequest,
        *,
        request_id: int,
        now_ms: int,
        partition_counts: Mapping[str, int] | None = None,
    ) -> Decision:
        group = self.consumer.groups.get(req.group_id)
        if group is None or not group.members:
            return super().leave_group(req, request_id=request_id, now_ms=now_ms)
        out = Out()
        before = consumer_records.image(group)
        results: list[LeftMember] = []
        for ident in req.members:
            mid = ident.member_id
            if ident.group_instance_id is not None:
                mid = group.static_members.get(ident.group_instance_id, "")
            member = group.members.get(mid)
            if member is None or not member.is_classic:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            elif ident.member_id and ident.member_id != mid:
                code = ErrorCode.FENCED_INSTANCE_ID
            else:
                group.remove_member(mid, self._counts(partition_counts))
                code = ErrorCode.NONE
            results.append(LeftMember(ident.member_id, ident.group_instance_id, code))
        out.records.extend(consumer_records.changes(before, consumer_records.image(group)))
        out.reply(request_id, LeaveGroupResponse(ErrorCode.NONE, tuple(results)))
        return out.decision()

    def commit_offsets(self, req: OffsetCommitRequest, *, request_id: int, now_ms: int) -> Decision:
        group = self.consumer.groups.get(req.group_id)
        if group is None:
            return super().commit_offsets(req, request_id=request_id, now_ms=now_ms)
        code = self.consumer.check_commit(group, req.member_id, req.generation_id)
        if code is not ErrorCode.NONE:
            out = Out()
            failed = tuple((TopicPartition(c.topic, c.partition), code) for c in req.partitions)
            out.reply(request_id, OffsetCommitResponse(code, failed))
            return out.decision()
        # Accepted: store it as a commit from outside the group into the offsets holder.
        simple = OffsetCommitRequest(
            req.group_id,
            req.partitions,
            producer_id=req.producer_id,
            producer_epoch=req.producer_epoch,
        )
        return super().commit_offsets(simple, request_id=request_id, now_ms=now_ms)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> OffsetFetchResponse:
        group = self.consumer.groups.get(group_id)
        if group is not None:
            code = self.consumer.check_fetch(group, member_id, member_epoch)
            if code is not ErrorCode.NONE:
                return OffsetFetchResponse(code)
        return super().fetch_offsets(group_id, partitions, require_stable=require_stable)

    def delete_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition],
        *,
        request_id: int,
        now_ms: int,
    ) -> Decision:
        """Kafka's OffsetDelete: tombstone the group's committed offsets of ``partitions``.

        The reply is an :class:`OffsetDeleteResponse`.  A group that does not exist is
        GROUP_ID_NOT_FOUND; a classic group with members of another protocol type than
        ``consumer`` is NON_EMPTY_GROUP; otherwise each partition of a topic a member
        subscribes to is GROUP_SUBSCRIBED_TO_TOPIC (its offset stays), and every other
        partition's offset is deleted (NONE, also when nothing was committed).  The group
        itself stays, as Kafka's.
        """
        out = Out()
        consumer = self.consumer.groups.get(group_id)
        holder = self.groups.get(group_id)
        code, subscribed = ErrorCode.NONE, frozenset[str]()
        if consumer is not None:
            subscribed = frozenset().union(*(m.subscription for m in consumer.members.values()))
        elif holder is None or holder.is_(DEAD):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        elif holder.is_(EMPTY):
            pass
        elif holder.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = _classic_subscriptions(holder)
        else:
            code = ErrorCode.NON_EMPTY_GROUP
        results: list[tuple[TopicPartition, ErrorCode]] = []
        if code is ErrorCode.NONE:
            for tp in dict.fromkeys(TopicPartition(*p) for p in partitions):
                if tp.topic in subscribed:
                    results.append((tp, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                    continue
                if holder is not None and holder.offsets.pop(tp, None) is not None:
                    out.records.append(
                        records.offset_record(records.OffsetKey(group_id, *tp), None)
                    )
                results.append((tp, ErrorCode.NONE))
        out.reply(request_id, OffsetDeleteResponse(code, tuple(results)))
        return out.decision()

    def delete_groups(self, group_ids: Iterable[str], *, request_id: int, now_ms: int) -> Decision:
        out = Out()
        results: list[tuple[str, ErrorCode]] = []
        for gid in group_ids:
            group = self.consumer.groups.get(gid)
            if group is None:
                d = super().delete_groups([gid], request_id=request_id, now_ms=now_ms)
                out.records.extend(d.records)
                ((_, response),) = d.replies
                assert isinstance(response, tuple)
                results.extend(response)
            elif group.members:
                results.append((gid, ErrorCode.NON_EMPTY_GROUP))
            else:
                out.records.extend(self.consumer.drop(gid))
                holder = self.groups.get(gid)
                if holder is not None:
                    self._drop(holder, list(holder.offsets), now_ms, out)
                results.append((gid, ErrorCode.NONE))
        out.reply(request_id, tuple(results))
        return out.decision()

    def replay(self, key: bytes, value: bytes | None, *, now_ms: int) -> None:
        """Apply one record of the partition, in log order, to rebuild the state."""
        if consumer_records.key_version(key) in consumer_records.KEY_VERSIONS:
            self.consumer.replay(key, value, now_ms=now_ms)
        else:
            super().replay(key, value, now_ms=now_ms)

    # == administration ================================================================

    def describe_group(self, group_id: str) -> GroupDescription:
        if group_id in self.consumer.groups:
            return self.consumer.describe(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return GroupDescription(group_id, str(DEAD), "", "", NO_GENERATION, ())
        protocol = group.protocol or ""
        return GroupDescription(
            group_id=group_id,
            state=str(group.state),
            protocol_type=group.protocol_type,
            protocol=protocol if group.is_(STABLE, COMPLETING) else "",
            generation_id=group.generation_id,
            members=tuple(
                MemberDescription(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata_for(protocol) if protocol else b"",
                    m.assignment if group.is_(STABLE) else b"",
                )
                for m in group.members.values()
            ),
        )

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupOverview]:
        wanted = {s.lower() for s in states}
        consumer = [
            GroupOverview(g.group_id, "consumer", g.state.value, "consumer")
            for g in self.consumer.groups.values()
            if not wanted or g.state.value.lower() in wanted
        ]
        return consumer + [
            GroupOverview(g.group_id, g.protocol_type, str(g.state))
            for g in self.groups.values()
            if not g.is_(DEAD)
            and g.group_id not in self.consumer.groups
            and (not wanted or str(g.state).lower() in wanted)
        ]

    # == timers ========================================================================

    def tick(self, *, now_ms: int, partition_counts: Mapping[str, int] | None = None) -> Decision:
        """Expire sessions, pending members, rebalance phases and offsets due by ``now_ms``;
        consumer-protocol groups too when ``partition_counts`` (their topics) are given."""
        out = Out()
        if partition_counts is not None:
            self._counts(partition_counts)
            out.records.extend(self.consumer.tick(now_ms=now_ms, partition_counts=partition_counts))
            for gid in list(self.consumer.groups):
                self._maybe_downgrade(gid, now_ms, out)
        for group in list(self.groups.values()):
            consumer = self.consumer.groups.get(group.group_id)
            if consumer is not None and consumer.members:
                continue  # an active consumer group's offsets do not expire
            self._tick_group(group, now_ms, out)
        return out.decision()

    def _tick_group(self, group: GroupMetadata, now_ms: int, out: Out) -> None:
        expired_pending = [m for m, t in group.pending_members.items() if now_ms >= t]
        for mid in expired_pending:
            del group.pending_members[mid]
        if expired_pending:
            self._maybe_complete_join(group, now_ms, out)
        for m in list(group.members.values()):
            alive = m.awaiting_join is not None or m.awaiting_sync is not None
            if not alive and now_ms >= m.heartbeat_deadline_ms and m.member_id in group.members:
                self._remove_and_rebalance(group, m, now_ms, out)
        deadline = group.rebalance_deadline_ms
        if deadline is not None and now_ms >= deadline:
            if group.is_(PREPARING):
                group.initial_rebalance_start_ms = None
                group.pending_members.clear()
                self._complete_join(group, now_ms, out)
            elif group.is_(COMPLETING):
                # The leader's SyncGroup never came (or some members never synced).
                group.rebalance_deadline_ms = None
                laggards = [m for m in group.members.values() if m.awaiting_sync is None]
                for m in laggards:
                    self._remove(group, m, out)
                self._prepare_rebalance(group, now_ms, out)
        if group.is_(EMPTY) and not group.pending_members:
            retention = self.config.offsets_retention_ms
            expired = [
                tp
                for tp, off in group.offsets.items()
                if now_ms >= max(off.commit_timestamp_ms, group.state_timestamp_ms) + retention
            ]
            if expired or not group.offsets:
                self._drop(group, expired, now_ms, out)

    # == metrics =======================================================================

    def rebalance_stats(self) -> dict[str, RebalanceStats]:
        return {
            gid: RebalanceStats(
                n, self._last_rebalance_ms.get(gid, 0), self._total_rebalance_ms[gid]
            )
            for gid, n in self._rebalances.items()
        }


def _classic_subscriptions(group: GroupMetadata) -> frozenset[str]:
    """The topics the members of a classic ``consumer`` group subscribe to, from their
    metadata for the group's protocol (none before the first protocol is chosen, as
    Kafka's); a member whose subscription does not decode counts as subscribed to none."""
    if group.protocol is None:
        return frozenset()
    topics: set[str] = set()
    for m in group.members.values():
        try:
            topics |= migration.decode_subscription(m.metadata_for(group.protocol)).topics
        except (KeyError, ValueError):
            continue
    return frozenset(topics)
