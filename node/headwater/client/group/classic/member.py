"""The consumer's group membership as a state machine: no I/O, the clock passed in.

Kafka's consumer keeps a JoinGroup or SyncGroup that has not been answered *in flight*
and carries it over to the next ``poll``: ``poll(timeout)`` returns when its time is up,
whatever the rebalance is doing.  So a group whose members all poll from one thread
settles in a few polls, and one whose member is slow to rejoin is not held up for a
session timeout.  :class:`GroupMember` is that logic without the I/O: the consumer's
:class:`~headwater.client.group.classic.coordinator.ConsumerCoordinator` asks it what to send
next, sends it without waiting past the poll's deadline, and reports each answer back.
Every move goes through :meth:`MemberState.transition_to`, which refuses an edge the
table below does not have::

    UNJOINED ──start_join──▶ JOINING ──joined──▶ SYNCING ──synced──▶ STABLE
       ▲  ▲                    │                   │                   │
       │  └──error / retry─────┘                   │                   │
       └────────error / rebalance in progress──────┘                   │
       └───────────────lost (heartbeat: unknown member, bad generation)┘
    STABLE ──rejoin (heartbeat said so, subscription changed, cooperative follow-up)──▶ JOINING
    any ──fenced──▶ FENCED       any ──close──▶ CLOSED

``MEMBER_ID_REQUIRED`` (KIP-394) is an answer, not an error: the member takes the id and
goes back to UNJOINED with no backoff, so the next ``poll`` sends the JoinGroup again.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping

from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode

NO_GENERATION = -1


class IllegalStateTransition(Exception):
    """The member was asked to move along an edge its table does not have: a client bug."""


class MemberState(enum.Enum):
    """Where one consumer stands in its group."""

    UNJOINED = "unjoined"
    """No generation: a JoinGroup is due (after ``next_join_ms``)."""
    JOINING = "joining"
    """A JoinGroup is in flight (Kafka's PREPARING_REBALANCE)."""
    SYNCING = "syncing"
    """Joined a generation; a SyncGroup is in flight (Kafka's COMPLETING_REBALANCE)."""
    STABLE = "stable"
    """Holds the assignment of the current generation; heartbeats."""
    FENCED = "fenced"
    """Terminal: another consumer took this ``group.instance.id``."""
    CLOSED = "closed"
    """Terminal: the consumer closed."""

    def transition_to(self, target: MemberState) -> MemberState:
        """Return ``target`` if the move is legal, else raise IllegalStateTransition."""
        if target not in TRANSITIONS[self]:
            raise IllegalStateTransition(f"group member {self.name} -> {target.name}")
        return target


_TERMINAL = frozenset({MemberState.FENCED, MemberState.CLOSED})

TRANSITIONS: Mapping[MemberState, frozenset[MemberState]] = {
    MemberState.UNJOINED: frozenset({MemberState.JOINING}) | _TERMINAL,
    MemberState.JOINING: frozenset({MemberState.UNJOINED, MemberState.SYNCING}) | _TERMINAL,
    MemberState.SYNCING: frozenset({MemberState.UNJOINED, MemberState.STABLE}) | _TERMINAL,
    MemberState.STABLE: frozenset({MemberState.UNJOINED, MemberState.JOINING}) | _TERMINAL,
    MemberState.FENCED: frozenset({MemberState.CLOSED}),
    MemberState.CLOSED: frozenset(),
}
"""``state -> states it may move to``."""

COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
"""Answers meaning "ask FindCoordinator again"."""


class Outcome(enum.Enum):
    """What the I/O layer does after an error answer or a failed call."""

    RETRY = "retry"
    """Nothing more: the member retries on a later poll."""
    FIND_COORDINATOR = "find_coordinator"
    """Forget the coordinator, look it up again, then retry."""
    FENCED = "fenced"
    """Raise FencedInstanceIdError to the user from now on."""
    FATAL = "fatal"
    """Raise the error to the user; the member retries on the next poll."""


@dataclasses.dataclass(frozen=True)
class JoinStart:
    """What :meth:`GroupMember.start_join` decided: the JoinGroup to send."""

    member_id: str
    generation_id: int
    owned: frozenset[TopicPartition]
    """Partitions to report as owned in the subscription (cooperative rebalancing)."""
    revoke: frozenset[TopicPartition]
    """Eager rebalancing: partitions to revoke (listener, commit) before sending."""


@dataclasses.dataclass(frozen=True)
class Joined:
    """A JoinGroup answer that succeeded: now SyncGroup, with assignments if leader."""

    generation_id: int
    member_id: str
    protocol: str
    is_leader: bool


@dataclasses.dataclass(frozen=True)
class AssignmentChange:
    """A SyncGroup answer applied: what the consumer thread tells its listener."""

    assignment: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    """Cooperative only: owned before and not any more (eager revoked at join time)."""
    added: frozenset[TopicPartition]


class GroupMember:
    """One consumer's membership (see the module docstring).

    Invariants: ``generation_id`` is NO_GENERATION outside SYNCING and STABLE;
    ``owned`` is empty outside STABLE except while a cooperative rejoin keeps its
    partitions; ``rejoin_needed`` only matters in STABLE.  Not thread-safe: the
    coordinator calls it holding its lock, from the consumer's thread (joins, syncs)
    and from the heartbeat thread (heartbeat answers, which carry the generation they
    were sent for, so an answer to an old generation changes nothing).
    """

    def __init__(
        self,
        *,
        group_instance_id: str | None,
        cooperative: bool,
        retry_backoff_ms: float,
        now_ms: float,
    ) -> None:
        self.group_instance_id = group_instance_id
        self.cooperative = cooperative
        self.retry_backoff_ms = retry_backoff_ms
        self.state = MemberState.UNJOINED
        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.protocol: str | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.rejoin_needed = False
        self.next_join_ms = now_ms
        self.lost: frozenset[TopicPartition] = frozenset()
        """Partitions lost since the consumer thread last took them (``take_lost``)."""

    def _move(self, target: MemberState) -> None:
        self.state = self.state.transition_to(target)

    # -- asked by the consumer thread ---------------------------------------------------

    @property
    def has_generation(self) -> bool:
        """Whether commits can carry a generation (STABLE, or SYNCING one)."""
        return self.state in (MemberState.SYNCING, MemberState.STABLE)

    def join_due(self, now_ms: float) -> bool:
        """Whether a JoinGroup should be sent now."""
        if self.state is MemberState.STABLE:
            return self.rejoin_needed
        return self.state is MemberState.UNJOINED and now_ms >= self.next_join_ms

    def request_rejoin(self) -> None:
        """The subscription changed (or a heartbeat said so): rejoin at the next poll."""
        self.rejoin_needed = True

    def start_join(self) -> JoinStart:
        """Move to JOINING; the caller sends the JoinGroup this returns."""
        revoke: frozenset[TopicPartition] = frozenset()
        if not self.cooperative:
            revoke, self.owned = self.owned, frozenset()
        self._move(MemberState.JOINING)
        self.rejoin_needed = False
        return JoinStart(self.member_id, self.generation_id, self.owned, revoke)

    def on_join_response(
        self,
        *,
        error_code: ErrorCode,
        member_id: str,
        generation_id: int,
        protocol: str,
        leader: str,
        now_ms: float,
    ) -> Joined | Outcome:
        """Apply a JoinGroup answer: Joined (send SyncGroup) or what to do instead."""
        if self.state is not MemberState.JOINING:
            return Outcome.RETRY  # closed or fenced meanwhile: the answer is stale
        if error_code is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = member_id
            self._back_off(now_ms, 0.0)
            return Outcome.RETRY
        if error_code is not ErrorCode.NONE:
            return self._join_failed(error_code, now_ms)
        self._move(MemberState.SYNCING)
        self.member_id, self.generation_id, self.protocol = member_id, generation_id, protocol
        return Joined(generation_id, member_id, protocol, leader == member_id)

    def on_sync_response(
        self,
        *,
        generation_id: int,
        error_code: ErrorCode,
        assignment: Iterable[TopicPartition],
        now_ms: float,
    ) -> AssignmentChange | Outcome:
        """Apply the answer to a SyncGroup sent for ``generation_id``: the new
        assignment, or what to do instead."""
        if self.state is not MemberState.SYNCING or generation_id != self.generation_id:
            return Outcome.RETRY  # lost, fenced or closed meanwhile: the answer is stale
        if error_code is not ErrorCode.NONE:
            return self._join_failed(error_code, now_ms)
        self._move(MemberState.STABLE)
        new = frozenset(assignment)
        revoked, added = self.owned - new, new - self.owned
        self.owned = new
        if self.cooperative and revoked:
            self.rejoin_needed = True  # the follow-up round hands the revoked ones over
        return AssignmentChange(new, revoked, added)

    def on_call_failed(self, *, retriable: bool, now_ms: float) -> Outcome:
        """A JoinGroup or SyncGroup call failed in transport (or timed out)."""
        if self.state not in (MemberState.JOINING, MemberState.SYNCING):
            return Outcome.RETRY  # the member moved on meanwhile
        self._unjoin(now_ms)
        return Outcome.FIND_COORDINATOR if retriable else Outcome.FATAL

    def _join_failed(self, code: ErrorCode, now_ms: float) -> Outcome:
        if code is ErrorCode.FENCED_INSTANCE_ID:
            self.fence()
            return Outcome.FENCED
        self._unjoin(now_ms)
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
        if code in COORDINATOR_ERRORS:
            return Outcome.FIND_COORDINATOR
        if code in (
            ErrorCode.UNKNOWN_MEMBER_ID,
            ErrorCode.ILLEGAL_GENERATION,
            ErrorCode.REBALANCE_IN_PROGRESS,
        ):
            return Outcome.RETRY
        return Outcome.FATAL

    def _unjoin(self, now_ms: float) -> None:
        """Back to UNJOINED after a failed join or sync (cooperative keeps ``owned``)."""
        self._move(MemberState.UNJOINED)
        self.generation_id, self.protocol = NO_GENERATION, None
        self._back_off(now_ms, self.retry_backoff_ms)

    def _back_off(self, now_ms: float, delay_ms: float) -> None:
        if self.state is not MemberState.UNJOINED:
            self._move(MemberState.UNJOINED)
        self.next_join_ms = now_ms + delay_ms

    def take_lost(self) -> frozenset[TopicPartition]:
        """Partitions lost since the last call (for ``on_partitions_lost``), once."""
        lost, self.lost = self.lost, frozenset()
        return lost

    # -- heartbeats (either thread) -----------------------------------------------------

    def heartbeat_due(self) -> tuple[int, str] | None:
        """``(generation, member_id)`` to heartbeat with, or None while not in a generation.

        A member heartbeats while its SyncGroup is in flight too (as Kafka's does in
        COMPLETING_REBALANCE), so a slow leader does not cost it its session."""
        if not self.has_generation:
            return None
        return self.generation_id, self.member_id

    def on_heartbeat_response(self, *, generation_id: int, error_code: ErrorCode) -> Outcome:
        """Apply the answer to a heartbeat sent for ``generation_id``."""
        if not self.has_generation or generation_id != self.generation_id:
            return Outcome.RETRY  # an answer about a generation this member has left
        if error_code is ErrorCode.REBALANCE_IN_PROGRESS:
            self.rejoin_needed = True
        elif error_code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID):
            self.mark_lost(reset_member_id=error_code is ErrorCode.UNKNOWN_MEMBER_ID)
        elif error_code is ErrorCode.FENCED_INSTANCE_ID:
            self.fence()
            return Outcome.FENCED
        elif error_code in COORDINATOR_ERRORS:
            return Outcome.FIND_COORDINATOR
        return Outcome.RETRY

    def mark_lost(self, *, reset_member_id: bool = True) -> None:
        """The group no longer counts this member (refused commit or heartbeat, or it
        left for exceeding ``max_poll_interval_ms``): its partitions are lost."""
        if self.state not in (MemberState.SYNCING, MemberState.STABLE):
            return
        self.lost = self.lost | self.owned
        self.owned = frozenset()
        self._move(MemberState.UNJOINED)
        self.generation_id, self.protocol = NO_GENERATION, None
        self.rejoin_needed = False
        if reset_member_id and not self.group_instance_id:
            self.member_id = ""

    def fence(self) -> None:
        if self.state is not MemberState.FENCED:
            self._move(MemberState.FENCED)

    def close(self) -> None:
        if self.state is not MemberState.CLOSED:
            self._move(MemberState.CLOSED)
