"""The group coordinator of one ``__consumer_offsets`` partition: a state machine, no I/O.

:class:`GroupCoordinator` is what the runtime
(:class:`headwater.groups.runtime.GroupCoordinatorRuntime`) drives.  Its operations live
in two modules, layered by inheritance: :mod:`headwater.groups.membership` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup and rebalances; it also defines :class:`Decision`, what
every operation returns) and :mod:`headwater.groups.offsets` (OffsetCommit, OffsetFetch,
DeleteGroups, replay).  This module adds the timers -- one method,
:meth:`GroupCoordinator.tick`, that the runtime calls with the clock: session expiry, the
join and sync phase deadlines, ``group.initial.rebalance.delay.ms``, pending-member expiry
and offset retention -- plus DescribeGroups, ListGroups and the rebalance figures.

State is rebuilt on a new leader by :meth:`GroupCoordinator.replay` of every record in the
partition, in order (see :mod:`headwater.groups.records` for the format).
"""

from __future__ import annotations

from collections.abc import Iterable

from headwater.groups.group import GroupMetadata
from headwater.groups.membership import (
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
from headwater.groups.offsets import GroupOffsets
from headwater.groups.values import (
    NO_GENERATION,
    GroupDescription,
    GroupOverview,
    MemberDescription,
)

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

    # == administration ================================================================

    def describe_group(self, group_id: str) -> GroupDescription:
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
        return [
            GroupOverview(g.group_id, g.protocol_type, str(g.state))
            for g in self.groups.values()
            if not g.is_(DEAD) and (not wanted or str(g.state).lower() in wanted)
        ]

    # == timers ========================================================================

    def tick(self, *, now_ms: int) -> Decision:
        """Expire sessions, pending members, rebalance phases and offsets due by ``now_ms``."""
        out = Out()
        for group in list(self.groups.values()):
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
