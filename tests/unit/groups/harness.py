"""A driver for the pure group coordinator: virtual time, request ids, a fake log."""

from __future__ import annotations

import itertools

from headwater.errors import ErrorCode
from headwater.groups import records
from headwater.groups.coordinator import Decision, GroupCoordinator
from headwater.groups.values import (
    GroupConfig,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    OffsetCommit,
    OffsetCommitRequest,
    OffsetCommitResponse,
    Protocol,
    Response,
    SyncGroupRequest,
    SyncGroupResponse,
)

RANGE = (Protocol("range", b"sub"),)


class Harness:
    """Drives one :class:`GroupCoordinator`; every record it returns goes to ``log``."""

    def __init__(self, config: GroupConfig | None = None, *, group: str = "g") -> None:
        self.config = config or GroupConfig(group_initial_rebalance_delay_ms=0)
        counter = itertools.count(1)
        self.coordinator = GroupCoordinator(
            config=self.config, member_id_factory=lambda cid: f"{cid or 'm'}-{next(counter)}"
        )
        self.group = group
        self.now = 1_000
        self._ids = itertools.count(1)
        self.replies: dict[int, Response] = {}
        self.log: list[records.CoordinatorRecord] = []

    def _apply(self, decision: Decision) -> None:
        self.log.extend(decision.records)
        for rid, resp in decision.replies:
            assert rid not in self.replies, f"request {rid} answered twice"
            self.replies[rid] = resp

    def advance(self, ms: int) -> None:
        self.now += ms
        self._apply(self.coordinator.tick(now_ms=self.now))

    # -- requests ---------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        instance: str | None = None,
        protocols: tuple[Protocol, ...] = RANGE,
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        client_id: str = "",
        protocol_type: str = "consumer",
    ) -> int:
        rid = next(self._ids)
        req = JoinGroupRequest(
            group_id=self.group,
            member_id=member_id,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms,
            group_instance_id=instance,
            client_id=client_id,
        )
        self._apply(self.coordinator.join_group(req, request_id=rid, now_ms=self.now))
        return rid

    def join_response(self, rid: int) -> JoinGroupResponse:
        resp = self.replies[rid]
        assert isinstance(resp, JoinGroupResponse)
        return resp

    def new_member(self, **kwargs: object) -> str:
        """The MEMBER_ID_REQUIRED dance's first step: returns the issued member id."""
        resp = self.join_response(self.join(**kwargs))  # type: ignore[arg-type]
        assert resp.error_code is ErrorCode.MEMBER_ID_REQUIRED
        return resp.member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance: str | None = None,
    ) -> int:
        rid = next(self._ids)
        req = SyncGroupRequest(
            group_id=self.group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            assignments=tuple((assignments or {}).items()),
        )
        self._apply(self.coordinator.sync_group(req, request_id=rid, now_ms=self.now))
        return rid

    def sync_response(self, rid: int) -> SyncGroupResponse:
        resp = self.replies[rid]
        assert isinstance(resp, SyncGroupResponse)
        return resp

    def heartbeat(
        self, member_id: str, generation: int, *, instance: str | None = None
    ) -> ErrorCode:
        rid = next(self._ids)
        req = HeartbeatRequest(self.group, generation, member_id, instance)
        self._apply(self.coordinator.heartbeat(req, request_id=rid, now_ms=self.now))
        resp = self.replies[rid]
        assert isinstance(resp, HeartbeatResponse)
        return resp.error_code

    def leave(self, member_id: str, *, instance: str | None = None) -> ErrorCode:
        rid = next(self._ids)
        req = LeaveGroupRequest(self.group, (MemberIdentity(member_id, instance),))
        self._apply(self.coordinator.leave_group(req, request_id=rid, now_ms=self.now))
        resp = self.replies[rid]
        assert isinstance(resp, LeaveGroupResponse)
        return resp.members[0].error_code

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str = "",
        generation: int = -1,
        instance: str | None = None,
        metadata: str = "",
    ) -> OffsetCommitResponse:
        rid = next(self._ids)
        req = OffsetCommitRequest(
            group_id=self.group,
            partitions=tuple(
                OffsetCommit(t, p, o, metadata=metadata) for (t, p), o in offsets.items()
            ),
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )
        self._apply(self.coordinator.commit_offsets(req, request_id=rid, now_ms=self.now))
        resp = self.replies[rid]
        assert isinstance(resp, OffsetCommitResponse)
        return resp

    def committed(self, topic: str, partition: int) -> int | None:
        found = self.coordinator.fetch_offsets(self.group, [(topic, partition)])  # type: ignore[list-item]
        off = next(iter(found.offsets.values()))
        return off.offset if off is not None else None

    # -- whole scenarios --------------------------------------------------------------

    def form_group(self, n: int, **kwargs: object) -> tuple[list[str], int]:
        """n dynamic members join and sync; returns (member ids, generation)."""
        ids = [self.new_member(**kwargs) for _ in range(n)]
        rids = [self.join(mid, **kwargs) for mid in ids]  # type: ignore[arg-type]
        responses = [self.join_response(r) for r in rids]
        assert all(r.error_code is ErrorCode.NONE for r in responses)
        gen = responses[0].generation_id
        leader = responses[0].leader
        syncs = [self.sync(m, gen) for m in ids if m != leader]
        syncs.append(self.sync(leader, gen, {m: m.encode() for m in ids}))
        assert all(self.sync_response(r).error_code is ErrorCode.NONE for r in syncs)
        return ids, gen

    def state(self) -> str:
        return self.coordinator.describe_group(self.group).state

    def replayed(self) -> GroupCoordinator:
        """A fresh coordinator rebuilt from the log (what a new leader does)."""
        fresh = GroupCoordinator(config=self.config)
        for rec in self.log:
            fresh.replay(rec.key, rec.value, now_ms=self.now)
        return fresh
