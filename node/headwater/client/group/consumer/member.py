"""The consumer's membership of a consumer-protocol group (KIP-848), without I/O.

With ``group_protocol="consumer"`` the broker computes every member's assignment; a
member only heartbeats (``ConsumerGroupHeartbeat``), reports the partitions it owns and
reconciles toward the assignment each answer carries.  No JoinGroup/SyncGroup barrier
holds anybody up, and the broker hands a partition to its new owner only after the
old owner reported it revoked.  :class:`ConsumerMember` is Kafka's
``ConsumerMembershipManager`` as a state machine: the
:class:`~headwater.client.group.consumer.coordinator.ConsumerProtocolCoordinator` asks it
what to send (:meth:`ConsumerMember.heartbeat_due`), reports each answer, and performs
the reconciliation it asks for on the consumer's thread.  Every move goes through
:meth:`MemberState.transition_to`, which refuses an edge the table does not have::

    UNJOINED ──join sent (epoch 0)──▶ JOINING ──answer──▶ RECONCILING ◀──new target──┐
       ▲  ▲                             │                    │ revoked, then assigned │
       │  └──error / failed call────────┘                    ▼                       │
       │                                              ACKNOWLEDGING ──answer──▶ STABLE
       ├──lost partitions released── FENCED ◀── fenced epoch / unknown member (any joined)
       ├──next poll──────────────── STALE  ◀── no poll for max_poll_interval_ms
       └──left (unsubscribe)─────── LEAVING ◀── unsubscribe / close
    any ──fatal answer──▶ FATAL       any ──close──▶ CLOSED

Rules (Kafka's client): join with epoch 0, the subscription (topic names or a regex),
the rebalance timeout and the remote assignor; afterwards send only what changed, plus
the owned partitions whenever they changed; keep the member id and epoch of each answer;
heartbeat every ``heartbeat_interval_ms`` the broker names, and at once after owning
less or more; leave with epoch -1 (-2 for a static member).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping

from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class IllegalStateTransition(Exception):
    """The member was asked to move along an edge its table does not have: a client bug."""


class MemberState(enum.Enum):
    """Where one consumer-protocol member stands in its group."""

    UNJOINED = "unjoined"
    """No epoch: a join (epoch 0) is due if subscribed, after ``next_join_ms``."""
    JOINING = "joining"
    """The join heartbeat is in flight."""
    RECONCILING = "reconciling"
    """The assignment differs from what is owned: revoke, then take (consumer thread)."""
    ACKNOWLEDGING = "acknowledging"
    """Reconciled: a heartbeat reporting the owned partitions is due at once."""
    STABLE = "stable"
    """Owns its assignment; heartbeats every ``heartbeat_interval_ms``."""
    FENCED = "fenced"
    """The broker no longer knows this epoch: its partitions are lost; rejoin at 0."""
    STALE = "stale"
    """Left for not polling within ``max_poll_interval_ms``; the next poll rejoins."""
    LEAVING = "leaving"
    """Unsubscribing or closing: the leave heartbeat (epoch -1/-2) is due."""
    FATAL = "fatal"
    """The broker refused the group for good; every poll raises ``fatal_error``."""
    CLOSED = "closed"
    """Terminal: the consumer closed."""

    def transition_to(self, target: MemberState) -> MemberState:
        """Return ``target`` if the move is legal, else raise IllegalStateTransition."""
        if target not in TRANSITIONS[self]:
            raise IllegalStateTransition(f"consumer member {self.name} -> {target.name}")
        return target


S = MemberState
_JOINED = frozenset({S.RECONCILING, S.ACKNOWLEDGING, S.STABLE})
_ALWAYS = frozenset({S.FATAL, S.CLOSED})

TRANSITIONS: Mapping[MemberState, frozenset[MemberState]] = {
    S.UNJOINED: frozenset({S.JOINING}) | _ALWAYS,
    S.JOINING: frozenset({S.UNJOINED, S.RECONCILING, S.STABLE, S.FENCED, S.LEAVING}) | _ALWAYS,
    S.RECONCILING: frozenset({S.ACKNOWLEDGING, S.FENCED, S.STALE, S.LEAVING}) | _ALWAYS,
    S.ACKNOWLEDGING: frozenset({S.RECONCILING, S.STABLE, S.FENCED, S.STALE, S.LEAVING}) | _ALWAYS,
    S.STABLE: frozenset({S.RECONCILING, S.FENCED, S.STALE, S.LEAVING}) | _ALWAYS,
    S.FENCED: frozenset({S.UNJOINED}) | _ALWAYS,
    S.STALE: frozenset({S.UNJOINED}) | _ALWAYS,
    S.LEAVING: frozenset({S.UNJOINED}) | _ALWAYS,
    S.FATAL: frozenset({S.CLOSED}),
    S.CLOSED: frozenset(),
}
"""``state -> states it may move to``."""

COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
"""Answers meaning "ask FindCoordinator again, then heartbeat again"."""

FATAL_ERRORS = frozenset(
    {
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
)
"""Answers the member cannot recover from: raised from ``poll`` (Kafka's fatal errors)."""


class Outcome(enum.Enum):
    """What the I/O layer does after an answer."""

    NONE = "none"
    """Nothing more (the state says what comes next)."""
    FIND_COORDINATOR = "find_coordinator"
    """Forget the coordinator, look it up again, then heartbeat again."""


@dataclasses.dataclass(frozen=True)
class Subscription:
    """What the member subscribes to: topic names, or a regex the broker resolves."""

    topics: frozenset[str] = frozenset()
    regex: str | None = None


@dataclasses.dataclass(frozen=True)
class HeartbeatPlan:
    """The ConsumerGroupHeartbeat to send; None fields are "unchanged" (absent)."""

    member_id: str
    member_epoch: int
    instance_id: str | None
    rebalance_timeout_ms: int | None
    topics: frozenset[str] | None
    regex: str | None
    server_assignor: str | None
    owned: frozenset[TopicPartition] | None


class ConsumerMember:
    """One consumer's consumer-protocol membership (see the module docstring).

    Invariants: ``member_epoch`` is 0 in UNJOINED, JOINING, FENCED and STALE;
    ``owned`` is empty outside RECONCILING, ACKNOWLEDGING and STABLE (lost partitions
    wait in ``lost`` for the consumer thread); ``target`` is the last assignment the
    broker named (None before any, and after leaving or losing everything);
    STABLE means ``owned == target``.  At most one heartbeat is in flight
    (``in_flight``), and its answer is applied only if the member has not moved to
    another epoch meanwhile.  Not thread-safe: the coordinator holds its lock.
    """

    def __init__(
        self,
        *,
        group_instance_id: str | None,
        rebalance_timeout_ms: int,
        server_assignor: str | None,
        retry_backoff_ms: float,
        heartbeat_interval_ms: int,
        now_ms: float,
    ) -> None:
        self.group_instance_id = group_instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.retry_backoff_ms = retry_backoff_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.state = S.UNJOINED
        self.member_id = ""
        self.member_epoch = JOIN_EPOCH
        self.subscription: Subscription | None = None
        self.owned: frozenset[TopicPartition] = frozenset()
        self.target: frozenset[TopicPartition] | None = None
        self.lost: frozenset[TopicPartition] = frozenset()
        self.fatal_error: ErrorCode | None = None
        self.fatal_message = ""
        self.in_flight = False
        self.next_heartbeat_ms = now_ms
        self._sent_subscription: Subscription | None = None
        self._sent_owned: frozenset[TopicPartition] | None = None
        self._leave_closes = False

    def _move(self, target: MemberState) -> None:
        self.state = self.state.transition_to(target)

    @property
    def joined(self) -> bool:
        """Whether the member has an epoch (commits carry it)."""
        return self.state in _JOINED

    # -- the consumer thread -------------------------------------------------------------

    def subscribe(self, subscription: Subscription | None) -> None:
        """A new subscription (None: none): sent with the next heartbeat."""
        self.subscription = subscription
        self.next_heartbeat_ms = 0.0  # tell the broker (or join) at once

    def reconciliation(self) -> tuple[frozenset[TopicPartition], frozenset[TopicPartition]]:
        """``(revoke, assign)`` to do now, in that order; both empty unless RECONCILING."""
        if self.state is not S.RECONCILING or self.target is None:
            return frozenset(), frozenset()
        return self.owned - self.target, self.target - self.owned

    def revoked(self, tps: Iterable[TopicPartition]) -> None:
        """The consumer revoked ``tps`` (committed, listener called): owned shrinks and
        the broker hears of it at once, so their new owners can start."""
        if self.state is not S.RECONCILING:
            return  # fenced or left meanwhile: nothing is owned any more
        self.owned = self.owned - frozenset(tps)
        self.next_heartbeat_ms = 0.0

    def assigned(self, tps: Iterable[TopicPartition]) -> None:
        """The consumer took ``tps`` (listener called); reconciled once owned == target."""
        if self.state is not S.RECONCILING:
            return
        self.owned = self.owned | frozenset(tps)
        if self.owned == self.target:
            self._move(S.ACKNOWLEDGING)
        self.next_heartbeat_ms = 0.0

    def take_lost(self, now_ms: float) -> frozenset[TopicPartition]:
        """Partitions lost (for ``on_partitions_lost``), once; a FENCED or STALE member
        then rejoins at epoch 0."""
        lost, self.lost = self.lost, frozenset()
        if self.state in (S.FENCED, S.STALE):
            self._move(S.UNJOINED)
            self.next_heartbeat_ms = now_ms
        return lost

    def leave(self, *, closing: bool) -> HeartbeatPlan | None:
        """Unsubscribe or close: the leave heartbeat to send, or None if not a member.
        The caller revoked the owned partitions first."""
        if closing:
            self._leave_closes = True
        if self.state in (S.JOINING, *_JOINED) and self.member_id:
            self.owned, self.target = frozenset(), None
            self._move(S.LEAVING)
            epoch = STATIC_LEAVE_EPOCH if self.group_instance_id else LEAVE_EPOCH
            return self._plan(epoch=epoch, full=False)
        if closing:
            self.close()
        else:
            self.subscription = None
        return None

    def on_left(self) -> None:
        """The leave heartbeat was sent (whatever its answer): UNJOINED or CLOSED."""
        if self.state is not S.LEAVING:
            return
        self._move(S.UNJOINED)
        self._reset(member_id=True)
        if self._leave_closes:
            self.close()
        else:
            self.subscription = None

    def close(self) -> None:
        if self.state is not S.CLOSED:
            self._move(S.CLOSED)

    # -- heartbeats (the heartbeat thread) -------------------------------------------

    def heartbeat_due(self, now_ms: float) -> HeartbeatPlan | None:
        """The heartbeat to send now (the member then counts it in flight), or None."""
        if self.in_flight or now_ms < self.next_heartbeat_ms:
            return None
        if self.state is S.UNJOINED:
            if self.subscription is None:
                return None
            self._move(S.JOINING)
            plan = self._plan(epoch=JOIN_EPOCH, full=True)
        elif self.state in _JOINED:
            plan = self._plan(epoch=self.member_epoch, full=False)
        else:
            return None
        self.in_flight = True
        self._sent_subscription = self.subscription
        if plan.owned is not None or plan.member_epoch == JOIN_EPOCH:
            self._sent_owned = plan.owned or frozenset()  # a join owns nothing
        return plan

    def _plan(self, *, epoch: int, full: bool) -> HeartbeatPlan:
        """A full heartbeat (a join), or one with only what changed since the last."""
        sub = self.subscription or Subscription()
        topics: frozenset[str] | None = None
        regex: str | None = None
        if full or sub != self._sent_subscription:
            if sub.regex is not None:  # names cleared on a switch; absent on a join
                topics, regex = (None if full else frozenset()), sub.regex
            else:  # a regex dropped ("") on a switch; absent on a join
                topics, regex = sub.topics, (None if full else "")
        owned_changed = self.owned != self._sent_owned
        return HeartbeatPlan(
            member_id=self.member_id,
            member_epoch=epoch,
            instance_id=self.group_instance_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else None,
            topics=topics,
            regex=regex,
            server_assignor=self.server_assignor if full else None,
            owned=self.owned if epoch > JOIN_EPOCH and owned_changed else None,
        )

    def on_heartbeat_response(
        self,
        *,
        sent_epoch: int,
        error_code: ErrorCode,
        error_message: str = "",
        member_id: str,
        member_epoch: int,
        heartbeat_interval_ms: int,
        assignment: Iterable[TopicPartition] | None,
        now_ms: float,
    ) -> Outcome:
        """Apply the answer to the heartbeat sent with ``sent_epoch``."""
        self.in_flight = False
        if self.state not in (S.JOINING, *_JOINED) or (
            sent_epoch != JOIN_EPOCH and sent_epoch != self.member_epoch
        ):
            return Outcome.NONE  # the member moved on meanwhile: the answer is stale
        if error_code is not ErrorCode.NONE:
            return self._failed(error_code, error_message, now_ms)
        if heartbeat_interval_ms > 0:
            self.heartbeat_interval_ms = heartbeat_interval_ms
        self.next_heartbeat_ms = now_ms + self.heartbeat_interval_ms
        self.member_id, self.member_epoch = member_id, member_epoch
        if assignment is not None:
            self.target = frozenset(assignment)
        if self.target is None:
            self.target = frozenset()
        if self.owned != self.target:
            if self.state is not S.RECONCILING:
                self._move(S.RECONCILING)
        elif self.state is S.JOINING:
            self._move(S.STABLE)
        else:  # owns its target: acknowledged once an answer saw what it owns
            if self.state is S.RECONCILING:
                self._move(S.ACKNOWLEDGING)  # the target came back to what it owns
            if self.state is S.ACKNOWLEDGING and self._sent_owned == self.owned:
                self._move(S.STABLE)
        if self.state is not S.STABLE and self._sent_owned != self.owned:
            self.next_heartbeat_ms = now_ms  # what it owns changed while this was in flight
        return Outcome.NONE

    def on_call_failed(self, *, now_ms: float) -> Outcome:
        """The heartbeat call failed in transport (or timed out): find the coordinator
        again and retry after the backoff; a join starts over."""
        self.in_flight = False
        self._sent_subscription = self._sent_owned = None  # the next one says everything
        self.next_heartbeat_ms = now_ms + self.retry_backoff_ms
        if self.state is S.JOINING:
            self._move(S.UNJOINED)
        return Outcome.FIND_COORDINATOR

    def _failed(self, code: ErrorCode, message: str, now_ms: float) -> Outcome:
        if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            self.fence()
            return Outcome.NONE
        if code in FATAL_ERRORS:
            self.fatal_error, self.fatal_message = code, message
            self.lost, self.owned = self.lost | self.owned, frozenset()
            self._move(S.FATAL)
            return Outcome.NONE
        self._sent_subscription = self._sent_owned = None
        self.next_heartbeat_ms = now_ms + self.retry_backoff_ms
        if self.state is S.JOINING:
            self._move(S.UNJOINED)
        return Outcome.FIND_COORDINATOR if code in COORDINATOR_ERRORS else Outcome.NONE

    def fence(self) -> None:
        """The broker no longer knows this epoch (or member): everything owned is lost,
        and the member rejoins at epoch 0 once the consumer thread released it."""
        if self.state not in (S.JOINING, *_JOINED):
            return
        self.lost = self.lost | self.owned
        self._move(S.FENCED)
        self._reset(member_id=True)

    def poll_expired(self) -> HeartbeatPlan | None:
        """No poll for ``max_poll_interval_ms``: the leave heartbeat to send (the
        partitions are lost; the next poll rejoins), or None if not a member."""
        if self.state not in _JOINED:
            return None
        epoch = STATIC_LEAVE_EPOCH if self.group_instance_id else LEAVE_EPOCH
        plan = self._plan(epoch=epoch, full=False)
        self.lost = self.lost | self.owned
        self._move(S.STALE)
        self._reset(member_id=True)
        return plan

    def _reset(self, *, member_id: bool) -> None:
        self.owned, self.target = frozenset(), None
        self.member_epoch = JOIN_EPOCH
        self.in_flight = False
        self._sent_subscription = self._sent_owned = None
        if member_id:
            self.member_id = ""
