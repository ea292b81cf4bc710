"""Group membership of one ``__consumer_offsets`` partition: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and the rebalance they drive.  A state machine, no I/O.

Kafka's ``GroupCoordinator`` for the classic protocol, in the shape of Kafka's newer
coordinator runtime (docs/style.md): every operation takes a request value, a ``request_id``
chosen by the caller and the current time, and returns a :class:`Decision` -- the records
to append to the partition, then the replies to send.  The caller
(:class:`headwater.groups.coordinator_runtime.GroupCoordinatorRuntime`) appends the records with
``acks=all`` and only then delivers the replies, so a client never hears "synced" for
something a new coordinator would not find in the log.

Replies may answer *other* requests than the one being handled: a JoinGroup is parked
until the rebalance completes, and the join (or timer tick, or leave) that completes it
answers every parked JoinGroup at once; the leader's SyncGroup answers every parked
SyncGroup.

The coordinator is split in three layers, each a subclass of the one before:
:class:`GroupMembership` (here), :class:`headwater.groups.offsets.GroupOffsets` (commits,
offset fetches, deletion, replay of the log) and
:class:`headwater.groups.coordinator.GroupCoordinator` (timers, description, metrics).
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable
from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.groups import records
from headwater.groups.classic.group import GroupMetadata, MemberMetadata
from headwater.groups.classic.state import GroupState
from headwater.groups.values import (
    GroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeftMember,
    Response,
    SyncGroupRequest,
    SyncGroupResponse,
)

EMPTY = GroupState.EMPTY
PREPARING = GroupState.PREPARING_REBALANCE
COMPLETING = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD


class Reply(NamedTuple):
    request_id: int
    response: Response


class Decision(NamedTuple):
    """Records to append (first), then replies to send (after the append succeeded)."""

    records: tuple[records.CoordinatorRecord, ...] = ()
    replies: tuple[Reply, ...] = ()
    producer: tuple[int, int] | None = None
    """``(producer id, epoch)``: append the records as that producer's transactional
    batch (a TxnOffsetCommit); they count once its COMMIT marker is written."""


class RebalanceStats(NamedTuple):
    rebalances: int
    last_duration_ms: int
    total_duration_ms: int


def default_member_id(client_id: str) -> str:
    """Kafka's member id form: ``<client id>-<uuid4>``."""
    return f"{client_id or 'member'}-{uuid.uuid4()}"


class Out:
    """Collects one operation's records and replies."""

    def __init__(self) -> None:
        self.records: list[records.CoordinatorRecord] = []
        self.replies: list[Reply] = []
        self.producer: tuple[int, int] | None = None

    def reply(self, request_id: int, response: Response) -> None:
        self.replies.append(Reply(request_id, response))

    def decision(self) -> Decision:
        return Decision(tuple(self.records), tuple(self.replies), self.producer)


class GroupMembership:
    """Members and rebalances of every group of one coordinator partition.

    Not thread-safe and not re-entrant: the runtime calls one method at a time.
    """

    def __init__(
        self,
        *,
        config: GroupConfig | None = None,
        member_id_factory: Callable[[str], str] = default_member_id,
    ) -> None:
        self.config = config or GroupConfig()
        self._new_member_id = member_id_factory
        self.groups: dict[str, GroupMetadata] = {}
        self._rebalances: collections.Counter[str] = collections.Counter()
        self._last_rebalance_ms: dict[str, int] = {}
        self._total_rebalance_ms: collections.Counter[str] = collections.Counter()

    # == JoinGroup =====================================================================

    def join_group(self, req: JoinGroupRequest, *, request_id: int, now_ms: int) -> Decision:
        out = Out()
        cfg = self.config

        def fail(code: ErrorCode, message: str = "") -> Decision:
            out.reply(request_id, JoinGroupResponse(code, req.member_id, error_message=message))
            return out.decision()

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID, "group id must not be empty")
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return fail(
                ErrorCode.INVALID_SESSION_TIMEOUT,
                f"session.timeout.ms must be within [{cfg.group_min_session_timeout_ms}, "
                f"{cfg.group_max_session_timeout_ms}], not {req.session_timeout_ms}",
            )
        if not req.protocol_type or not req.protocols:
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "no protocol type or protocols")
        if any(len(p.metadata) > cfg.member_metadata_max_bytes for p in req.protocols):
            return fail(
                ErrorCode.INVALID_REQUEST,
                f"member metadata larger than {cfg.member_metadata_max_bytes} bytes",
            )
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"group {req.group_id} is unknown")
            group = self.groups[req.group_id] = GroupMetadata(req.group_id, now_ms=now_ms)
        if group.is_(DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group is being removed")
        if not group.supports(req.protocol_type, req.protocols):
            return fail(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                "protocol type or protocols do not match the group's",
            )
        iid = req.group_instance_id
        if not req.member_id:
            if len(group.members) + len(group.pending_members) >= cfg.group_max_size and not (
                iid is not None and iid in group.static_members
            ):
                return fail(
                    ErrorCode.GROUP_MAX_SIZE_REACHED, f"group.max.size={cfg.group_max_size}"
                )
            new_id = self._new_member_id(req.client_id)
            if iid is not None:
                if iid in group.static_members:
                    self._rejoin_static(group, new_id, req, request_id, now_ms, out)
                else:
                    self._add_member_and_rebalance(group, new_id, req, request_id, now_ms, out)
            else:
                group.pending_members[new_id] = now_ms + req.session_timeout_ms
                out.reply(request_id, JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, new_id))
            return out.decision()
        member = group.members.get(req.member_id)
        if self._fenced(group, req.member_id, iid):
            return fail(ErrorCode.FENCED_INSTANCE_ID, f"instance {iid} has a newer member")
        if req.member_id in group.pending_members:
            del group.pending_members[req.member_id]
            self._add_member_and_rebalance(group, req.member_id, req, request_id, now_ms, out)
        elif member is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID, f"member {req.member_id} is unknown")
        else:
            self._rejoin_existing(group, member, req, request_id, now_ms, out)
        return out.decision()

    @staticmethod
    def _fenced(group: GroupMetadata, member_id: str, instance_id: str | None) -> bool:
        """Kafka's ``isStaticMemberFenced``: the instance id belongs to another member id."""
        if instance_id is None:
            return False
        current = group.static_members.get(instance_id)
        return current is not None and current != member_id

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        req: JoinGroupRequest,
        request_id: int,
        now_ms: int,
        out: Out,
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
            heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
            awaiting_join=request_id,
            is_new=True,
        )
        group.add(member)
        if group.is_(PREPARING):
            if group.initial_rebalance_start_ms is not None:
                # Another member while an empty group waits: wait the delay again, but
                # never past the rebalance timeout counted from the first join.
                group.rebalance_deadline_ms = min(
                    now_ms + self.config.group_initial_rebalance_delay_ms,
                    group.initial_rebalance_start_ms + group.max_rebalance_timeout_ms(),
                )
            self._maybe_complete_join(group, now_ms, out)
        else:
            self._prepare_rebalance(group, now_ms, out)

    def _update_member(self, member: MemberMetadata, req: JoinGroupRequest, now_ms: int) -> None:
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id or member.client_id
        member.client_host = req.client_host or member.client_host
        member.heartbeat_deadline_ms = now_ms + req.session_timeout_ms

    def _park_join(self, member: MemberMetadata, request_id: int, out: Out) -> None:
        if member.awaiting_join is not None and member.awaiting_join != request_id:
            out.reply(
                member.awaiting_join,
                JoinGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id),
            )
        member.awaiting_join = request_id

    def _rejoin_existing(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        req: JoinGroupRequest,
        request_id: int,
        now_ms: int,
        out: Out,
    ) -> None:
        same = member.same_protocols(req.protocols)
        self._update_member(member, req, now_ms)
        if group.is_(PREPARING):
            self._park_join(member, request_id, out)
            self._maybe_complete_join(group, now_ms, out)
        elif same and (
            group.is_(COMPLETING) or (group.is_(STABLE) and member.member_id != group.leader_id)
        ):
            out.reply(request_id, self._join_response(group, member))
        else:  # changed protocols, or the leader rejoining: a new rebalance
            self._park_join(member, request_id, out)
            self._prepare_rebalance(group, now_ms, out)

    def _rejoin_static(
        self,
        group: GroupMetadata,
        new_id: str,
        req: JoinGroupRequest,
        request_id: int,
        now_ms: int,
        out: Out,
    ) -> None:
        """A known ``group.instance.id`` joins again with a new member id (a restart)."""
        assert req.group_instance_id is not None
        old = group.members[group.static_members[req.group_instance_id]]
        for parked in (old.awaiting_join, old.awaiting_sync):
            if parked is not None:
                fenced = ErrorCode.FENCED_INSTANCE_ID
                response: Response = (
                    JoinGroupResponse(fenced, old.member_id)
                    if parked == old.awaiting_join
                    else SyncGroupResponse(fenced)
                )
                out.reply(parked, response)
        old.awaiting_join = old.awaiting_sync = None
        member = group.replace_static_member(req.group_instance_id, new_id)
        self._update_member(member, req, now_ms)
        # Kafka's rule: the restart needs no rebalance unless it changes the protocol the
        # group would select.  The metadata bytes are not compared: a restarted consumer
        # no longer lists the partitions it owned, yet it subscribes to the same topics.
        candidates = group.candidate_protocols()
        same = group.protocol in candidates and group.select_protocol() == group.protocol
        if group.is_(STABLE) and same:
            # KIP-345: no rebalance; the restarted member syncs to get its old assignment
            # back.  A restarted leader must not reassign (KIP-814).
            out.records.append(group.record())
            is_leader = group.leader_id == new_id
            response = self._join_response(group, member)
            if is_leader:
                response = JoinGroupResponse(
                    ErrorCode.NONE,
                    new_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol or "",
                    new_id,
                    group.joined_members(),
                    skip_assignment=True,
                )
            out.reply(request_id, response)
        elif group.is_(PREPARING):
            member.awaiting_join = request_id
            self._maybe_complete_join(group, now_ms, out)
        else:
            member.awaiting_join = request_id
            self._prepare_rebalance(group, now_ms, out)

    def _join_response(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResponse:
        is_leader = member.member_id == group.leader_id
        return JoinGroupResponse(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol or "",
            group.leader_id or "",
            group.joined_members() if is_leader else (),
        )

    def _prepare_rebalance(self, group: GroupMetadata, now_ms: int, out: Out) -> None:
        if group.is_(COMPLETING):
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    out.reply(m.awaiting_sync, SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))
                    m.awaiting_sync = None
        delay = self.config.group_initial_rebalance_delay_ms
        if group.is_(EMPTY) and delay > 0:
            group.initial_rebalance_start_ms = now_ms
            group.rebalance_deadline_ms = now_ms + min(delay, group.max_rebalance_timeout_ms())
        else:
            group.initial_rebalance_start_ms = None
            group.rebalance_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
        if group.rebalance_started_ms is None:
            group.rebalance_started_ms = now_ms
        group.transition_to(PREPARING, now_ms=now_ms)
        self._maybe_complete_join(group, now_ms, out)

    def _maybe_complete_join(self, group: GroupMetadata, now_ms: int, out: Out) -> None:
        if (
            group.is_(PREPARING)
            and group.initial_rebalance_start_ms is None
            and group.all_joined()
            and not group.pending_members
        ):
            self._complete_join(group, now_ms, out)

    def _complete_join(self, group: GroupMetadata, now_ms: int, out: Out) -> None:
        for m in list(group.members.values()):
            # Dynamic members that did not rejoin in time are gone; static members stay
            # (only their session timeout removes them, KIP-345).
            if m.awaiting_join is None and m.group_instance_id is None:
                self._remove(group, m, out)
        group.pending_members.clear()
        group.initial_rebalance_start_ms = None
        group.generation_id += 1
        if group.is_empty:
            group.protocol = None
            group.leader_id = None
            group.rebalance_deadline_ms = None
            group.transition_to(EMPTY, now_ms=now_ms)
            out.records.append(group.record())
            self._finish_rebalance(group, now_ms)
            return
        group.protocol = group.select_protocol()
        leader = group.members.get(group.leader_id or "")
        if leader is None or leader.awaiting_join is None:
            joined = [m for m in group.members.values() if m.awaiting_join is not None]
            group.leader_id = (joined or list(group.members.values()))[0].member_id
        group.transition_to(COMPLETING, now_ms=now_ms)
        group.rebalance_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
        for m in group.members.values():
            if m.awaiting_join is not None:
                out.reply(m.awaiting_join, self._join_response(group, m))
                m.awaiting_join = None
            m.is_new = False
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def _finish_rebalance(self, group: GroupMetadata, now_ms: int) -> None:
        started = group.rebalance_started_ms
        if started is not None:
            self._rebalances[group.group_id] += 1
            self._last_rebalance_ms[group.group_id] = now_ms - started
            self._total_rebalance_ms[group.group_id] += now_ms - started
        group.rebalance_started_ms = None

    def _remove(self, group: GroupMetadata, member: MemberMetadata, out: Out) -> None:
        if member.awaiting_join is not None:
            out.reply(member.awaiting_join, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        if member.awaiting_sync is not None:
            out.reply(member.awaiting_sync, SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)

    def _remove_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, now_ms: int, out: Out
    ) -> None:
        self._remove(group, member, out)
        if group.is_(STABLE, COMPLETING):
            self._prepare_rebalance(group, now_ms, out)
        elif group.is_(PREPARING):
            self._maybe_complete_join(group, now_ms, out)

    # == SyncGroup / Heartbeat / LeaveGroup =============================================

    def _check_member(
        self, group: GroupMetadata | None, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if group is None or group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self._fenced(group, member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.group_instance_id != instance_id and instance_id is not None:
            return ErrorCode.FENCED_INSTANCE_ID
        return ErrorCode.NONE

    def sync_group(self, req: SyncGroupRequest, *, request_id: int, now_ms: int) -> Decision:
        out = Out()
        group = self.groups.get(req.group_id)
        code = self._check_member(group, req.member_id, req.group_instance_id)
        if code is ErrorCode.NONE:
            assert group is not None
            if req.generation_id != group.generation_id:
                code = ErrorCode.ILLEGAL_GENERATION
            elif (req.protocol_type and req.protocol_type != group.protocol_type) or (
                req.protocol_name and req.protocol_name != group.protocol
            ):
                code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            elif group.is_(PREPARING):
                code = ErrorCode.REBALANCE_IN_PROGRESS
        if code is not ErrorCode.NONE:
            out.reply(request_id, SyncGroupResponse(code))
            return out.decision()
        assert group is not None
        member = group.members[req.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.is_(STABLE):
            out.reply(request_id, self._sync_response(group, member))
            return out.decision()
        member.awaiting_sync = request_id
        if req.member_id == group.leader_id:
            assignments = dict(req.assignments)
            too_big = [
                m for m, a in assignments.items() if len(a) > self.config.member_metadata_max_bytes
            ]
            if too_big:
                member.awaiting_sync = None
                out.reply(request_id, SyncGroupResponse(ErrorCode.INVALID_REQUEST))
                return out.decision()
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition_to(STABLE, now_ms=now_ms)
            group.rebalance_deadline_ms = None
            self._finish_rebalance(group, now_ms)
            out.records.append(group.record())
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    out.reply(m.awaiting_sync, self._sync_response(group, m))
                    m.awaiting_sync = None
        return out.decision()

    @staticmethod
    def _sync_response(group: GroupMetadata, member: MemberMetadata) -> SyncGroupResponse:
        return SyncGroupResponse(
            ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol or ""
        )

    def heartbeat(self, req: HeartbeatRequest, *, request_id: int, now_ms: int) -> Decision:
        group = self.groups.get(req.group_id)
        code = self._check_member(group, req.member_id, req.group_instance_id)
        if code is ErrorCode.NONE:
            assert group is not None
            if req.generation_id != group.generation_id:
                code = ErrorCode.ILLEGAL_GENERATION
            else:
                member = group.members[req.member_id]
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                if group.is_(PREPARING):
                    code = ErrorCode.REBALANCE_IN_PROGRESS
        return Decision(replies=(Reply(request_id, HeartbeatResponse(code)),))

    def leave_group(self, req: LeaveGroupRequest, *, request_id: int, now_ms: int) -> Decision:
        out = Out()
        group = self.groups.get(req.group_id)
        results: list[LeftMember] = []
        for ident in req.members:
            code = ErrorCode.NONE
            if group is None or group.is_(DEAD):
                code = ErrorCode.UNKNOWN_MEMBER_ID
            elif ident.group_instance_id is not None:
                mid = group.static_members.get(ident.group_instance_id)
                if mid is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                elif ident.member_id and ident.member_id != mid:
                    code = ErrorCode.FENCED_INSTANCE_ID
                else:
                    self._remove_and_rebalance(group, group.members[mid], now_ms, out)
            elif ident.member_id in group.pending_members:
                del group.pending_members[ident.member_id]
                self._maybe_complete_join(group, now_ms, out)
            elif ident.member_id in group.members:
                self._remove_and_rebalance(group, group.members[ident.member_id], now_ms, out)
            else:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            results.append(LeftMember(ident.member_id, ident.group_instance_id, code))
        out.reply(request_id, LeaveGroupResponse(ErrorCode.NONE, tuple(results)))
        return out.decision()
