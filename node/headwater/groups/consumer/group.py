"""A consumer group of the next-generation protocol (KIP-848): a state machine, no I/O.

With ``group_protocol="consumer"`` there is no JoinGroup barrier.  Members send
``ConsumerGroupHeartbeat``s carrying their subscription and the partitions they own;
the coordinator keeps a *group epoch* (bumped whenever membership or a subscription
changes), computes a *target assignment* for that epoch with a server-side assignor
(:mod:`headwater.groups.consumer.assignors`), and moves each member towards its target
one step per heartbeat, each member on its own (Kafka's ``CurrentAssignmentBuilder``):

1. A member that holds partitions its target does not contain must first *revoke* them:
   it stays at its epoch, in UNREVOKED_PARTITIONS, and is told to keep only
   ``owned & target``.  Its next heartbeat reporting them gone releases them.
2. Then it takes the new *member epoch* and the partitions of its target that no other
   member still holds; any still held elsewhere wait (UNRELEASED_PARTITIONS) and are
   handed over at a later heartbeat, once their old owner has revoked them.
3. A member holding exactly its target at the target epoch is STABLE.

Invariant (checked after every operation by the unit tests): no partition is held --
assigned or pending revocation -- by two members at once.  So a partition is handed to
its new owner only after the old owner gave it up, and members the change does not
concern never stop fetching.

Member epochs fence zombies: a heartbeat must carry the member's current epoch (or the
previous one, if it owns nothing beyond what it is assigned: the answer to its last
heartbeat was lost), else FENCED_MEMBER_EPOCH.  Epoch 0 joins, -1 leaves, -2 leaves
temporarily as a static member, whose place (and assignment) a restart with the same
``group.instance.id`` takes over within the session timeout.

A regex subscription matches only the topics the member's principal may DESCRIBE, as
its last heartbeat said (``Heartbeat.describable_topics``, decided in
:mod:`headwater.groups.consumer.subscription_authorization`): a topic created since waits for the
next heartbeat, one it may no longer describe is revoked.

Time is passed in (``now_ms``); partition counts are passed in, since topic metadata is
the runtime's.  Not thread-safe: the runtime calls one method at a time.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Mapping

from headwater.errors import ErrorCode
from headwater.groups.consumer.assignors import ASSIGNORS
from headwater.groups.consumer.subscription_authorization import regex_authorized
from headwater.groups.values import Protocol
from headwater.values import TopicPartition

JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH = 0, -1, -2
NOTHING: frozenset[TopicPartition] = frozenset()


class IllegalStateTransition(RuntimeError):
    """A move the state table does not allow: a coordinator bug, never a client error."""


class MemberState(enum.Enum):
    """Where a member stands in its reconciliation (Kafka's ``MemberState``)."""

    STABLE = "stable"
    """Holds exactly its target at the target epoch."""
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    """Must revoke partitions before it may take the new epoch."""
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    """At the new epoch; waits for partitions other members still hold."""

    def transition_to(self, target: MemberState) -> MemberState:
        if target not in MEMBER_TRANSITIONS[self]:
            raise IllegalStateTransition(f"consumer group member {self.name} -> {target.name}")
        return target


MEMBER_TRANSITIONS: Mapping[MemberState, frozenset[MemberState]] = {
    # STABLE -> STABLE: a new epoch whose target gives the member nothing to move.
    MemberState.STABLE: frozenset(set(MemberState)),
    # UNREVOKED -> UNREVOKED: the target changed again while revoking.
    MemberState.UNREVOKED_PARTITIONS: frozenset(set(MemberState)),
    MemberState.UNRELEASED_PARTITIONS: frozenset(
        {MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS}
    ),
}


class GroupState(enum.Enum):
    """A consumer group's state, as Kafka's tools print it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    """The group epoch moved; the target assignment is not computed yet."""
    RECONCILING = "Reconciling"
    """Some member does not hold its target yet."""
    STABLE = "Stable"
    DEAD = "Dead"

    def transition_to(self, target: GroupState) -> GroupState:
        if target not in GROUP_TRANSITIONS[self]:
            raise IllegalStateTransition(f"consumer group {self.value} -> {target.value}")
        return target


_G = GroupState
GROUP_TRANSITIONS: Mapping[GroupState, frozenset[GroupState]] = {
    _G.EMPTY: frozenset({_G.ASSIGNING, _G.DEAD}),
    _G.ASSIGNING: frozenset({_G.RECONCILING, _G.STABLE, _G.EMPTY}),
    _G.RECONCILING: frozenset({_G.ASSIGNING, _G.STABLE, _G.EMPTY}),
    _G.STABLE: frozenset({_G.ASSIGNING, _G.EMPTY}),
    _G.DEAD: frozenset(),
}


@dataclasses.dataclass(frozen=True)
class Heartbeat:
    """A ``ConsumerGroupHeartbeat`` request; None fields are unchanged since the last."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    subscribed_topics: frozenset[str] | None = None
    owned: frozenset[TopicPartition] | None = None
    rebalance_timeout_ms: int | None = 300_000
    """None: unchanged."""
    server_assignor: str | None = None
    """``group.remote.assignor``: one of the broker's ``group.consumer.assignors``."""
    subscribed_topic_regex: str | None = None
    """Topics whose whole name matches (re.fullmatch), besides ``subscribed_topics``;
    "" drops the regex."""
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    describable_topics: frozenset[str] | None = None
    """The topics the member's principal may DESCRIBE, asked afresh for every heartbeat
    (:mod:`headwater.groups.consumer.subscription_authorization`); its regex matches no other.
    None: authorization is off, every topic."""


@dataclasses.dataclass(frozen=True)
class HeartbeatResult:
    error_code: ErrorCode
    member_id: str = ""
    member_epoch: int = LEAVE_EPOCH
    assignment: frozenset[TopicPartition] = NOTHING
    """What the member may own now: it revokes anything else it owns."""


@dataclasses.dataclass
class ConsumerMember:
    """One member's view held by the coordinator."""

    member_id: str
    instance_id: str | None
    subscribed_topics: frozenset[str] = frozenset()
    server_assignor: str | None = None
    subscribed_regex: str | None = None
    regex_topics: frozenset[str] = frozenset()
    """The topics ``subscribed_regex`` matched when the coordinator last looked."""
    regex_authorized: frozenset[str] | None = None
    """The topics ``subscribed_regex`` may match: those of its last heartbeat's
    ``describable_topics`` it matched (a topic created since waits for the next
    heartbeat); None: any."""
    member_epoch: int = JOIN_EPOCH
    previous_member_epoch: int = JOIN_EPOCH
    state: MemberState = MemberState.STABLE
    assigned: frozenset[TopicPartition] = NOTHING
    pending_revocation: frozenset[TopicPartition] = NOTHING
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    rebalance_timeout_ms: int = 300_000
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    classic_protocols: tuple[Protocol, ...] | None = None
    """A member still on the classic protocol (JoinGroup/SyncGroup/Heartbeat) in a group
    converted from classic (:mod:`headwater.groups.migration`): the protocols of its
    last JoinGroup.  None for a consumer-protocol member."""
    classic_session_timeout_ms: int = 0
    """A classic member's own ``session.timeout.ms`` (its session is that, not the
    group's ``group.consumer.session.timeout.ms``)."""

    @property
    def is_classic(self) -> bool:
        return self.classic_protocols is not None

    @property
    def held(self) -> frozenset[TopicPartition]:
        return self.assigned | self.pending_revocation

    @property
    def subscription(self) -> frozenset[str]:
        return self.subscribed_topics | self.regex_topics


class ConsumerGroup:
    """One KIP-848 consumer group (see the module docstring)."""

    def __init__(
        self,
        group_id: str,
        *,
        assignors: tuple[str, ...] = ("uniform", "range"),
        session_timeout_ms: int = 45_000,
        member_id_factory: Callable[[], str],
    ) -> None:
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(f"assignors {unknown or '()'}: expected some of {list(ASSIGNORS)}")
        self.group_id = group_id
        self.assignors = assignors
        """``group.consumer.assignors``; the first is the default."""
        self.session_timeout_ms = session_timeout_ms
        self._new_member_id = member_id_factory
        self.state = GroupState.EMPTY
        self.group_epoch = 0
        self.target_epoch = 0
        self.target: dict[str, frozenset[TopicPartition]] = {}
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        """``instance id -> member id``."""

    # -- the heartbeat ------------------------------------------------------------------

    def heartbeat(
        self, hb: Heartbeat, *, now_ms: int, partition_counts: Mapping[str, int]
    ) -> HeartbeatResult:
        """Apply one heartbeat and answer it (see the module docstring)."""
        if self.state is GroupState.DEAD:
            return HeartbeatResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if hb.server_assignor is not None and hb.server_assignor not in self.assignors:
            return HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR, hb.member_id)
        if hb.subscribed_topic_regex and not _valid_regex(hb.subscribed_topic_regex):
            return HeartbeatResult(ErrorCode.INVALID_REQUEST, hb.member_id)
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(hb, now_ms=now_ms, partition_counts=partition_counts)
        if hb.member_epoch == JOIN_EPOCH:
            joined = self._join(hb, now_ms=now_ms, partition_counts=partition_counts)
            if isinstance(joined, ErrorCode):
                return HeartbeatResult(joined, hb.member_id)
            member = joined
        else:
            found = self.members.get(hb.member_id)
            if found is None:
                return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, hb.member_id)
            if not self._epoch_ok(found, hb):
                return HeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH, hb.member_id)
            member = found
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        if hb.rebalance_timeout_ms is not None:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        changed = False
        if hb.subscribed_topics is not None and hb.subscribed_topics != member.subscribed_topics:
            member.subscribed_topics, changed = hb.subscribed_topics, True
        if hb.server_assignor is not None and hb.server_assignor != member.server_assignor:
            member.server_assignor, changed = hb.server_assignor, True
        if hb.subscribed_topic_regex is not None:
            member.subscribed_regex = hb.subscribed_topic_regex or None
        member.regex_authorized = regex_authorized(member.subscribed_regex, hb.describable_topics)
        if self._resolve_regexes(partition_counts):  # a topic created or deleted
            changed = True
        if changed:
            self.bump_epoch()
        self.maybe_compute_target(partition_counts)
        self.reconcile(member, hb.owned, now_ms=now_ms)
        self.update_state()
        return HeartbeatResult(
            ErrorCode.NONE, member.member_id, member.member_epoch, member.assigned
        )

    def _epoch_ok(self, member: ConsumerMember, hb: Heartbeat) -> bool:
        if hb.member_epoch == member.member_epoch:
            return True
        # The answer that moved it to the current epoch was lost: accept the previous
        # epoch if the member owns nothing it is not assigned (Kafka's rule).
        return (
            hb.member_epoch == member.previous_member_epoch
            and hb.owned is not None
            and hb.owned <= member.assigned
        )

    def _join(
        self, hb: Heartbeat, *, now_ms: int, partition_counts: Mapping[str, int]
    ) -> ConsumerMember | ErrorCode:
        if hb.subscribed_topics is None and not hb.subscribed_topic_regex:
            return ErrorCode.INVALID_REQUEST  # a join must say what it subscribes to
        instance = hb.instance_id
        old_id = self.static_members.get(instance) if instance is not None else None
        if old_id is not None:
            old = self.members[old_id]
            if old.member_epoch != STATIC_LEAVE_EPOCH:
                return ErrorCode.UNRELEASED_INSTANCE_ID
            # A restarted static member takes over its place and assignment.
            del self.members[old_id]
            member = dataclasses.replace(old, member_id=hb.member_id or self._new_member_id())
            member.member_epoch = old.previous_member_epoch
            if old_id in self.target:
                self.target[member.member_id] = self.target.pop(old_id)
        else:
            member = ConsumerMember(
                hb.member_id or self._new_member_id(),
                instance,
                hb.subscribed_topics or frozenset(),
                hb.server_assignor,
                hb.subscribed_topic_regex or None,
                rack_id=hb.rack_id,
                client_id=hb.client_id,
                client_host=hb.client_host,
            )
            member.regex_authorized = regex_authorized(
                member.subscribed_regex, hb.describable_topics
            )
            self._resolve_regexes(partition_counts, only=member)
        self.members[member.member_id] = member
        if instance is not None:
            self.static_members[instance] = member.member_id
        member.session_deadline_ms = now_ms + self.session_timeout_ms
        if old_id is None:
            self.bump_epoch()
        return member

    def _leave(
        self, hb: Heartbeat, *, now_ms: int, partition_counts: Mapping[str, int]
    ) -> HeartbeatResult:
        member = self.members.get(hb.member_id)
        if member is None:
            return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, hb.member_id)
        if hb.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # Keeps its assignment for a restart within the session timeout.
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.session_deadline_ms = now_ms + self.session_timeout_ms
            return HeartbeatResult(ErrorCode.NONE, member.member_id, STATIC_LEAVE_EPOCH)
        self._remove(member, partition_counts)
        return HeartbeatResult(ErrorCode.NONE, member.member_id, LEAVE_EPOCH)

    # -- timers ------------------------------------------------------------------------

    def tick(self, *, now_ms: int, partition_counts: Mapping[str, int]) -> list[str]:
        """Remove members whose session expired or who did not revoke within their
        rebalance timeout, and follow topics created or deleted under members' regexes;
        returns the ids of the members removed."""
        if self._resolve_regexes(partition_counts):
            self.bump_epoch()
            self.maybe_compute_target(partition_counts)
            self.update_state()
        gone = [
            m
            for m in self.members.values()
            if now_ms >= m.session_deadline_ms
            or (m.revocation_deadline_ms is not None and now_ms >= m.revocation_deadline_ms)
        ]
        for m in gone:
            self._remove(m, partition_counts)
        return [m.member_id for m in gone]

    def remove_member(self, member_id: str, partition_counts: Mapping[str, int]) -> None:
        """A member left outside the heartbeat (a classic member's LeaveGroup)."""
        self._remove(self.members[member_id], partition_counts)

    def delete(self) -> None:
        """DeleteGroups: only an empty group may go."""
        self.state = self.state.transition_to(GroupState.DEAD)

    # -- the machinery ------------------------------------------------------------------

    def _remove(self, member: ConsumerMember, partition_counts: Mapping[str, int]) -> None:
        del self.members[member.member_id]
        self.target.pop(member.member_id, None)
        if member.instance_id is not None:
            self.static_members.pop(member.instance_id, None)
        self.bump_epoch()
        self.maybe_compute_target(partition_counts)
        self.update_state()

    def bump_epoch(self) -> None:
        """Membership or a subscription changed: a new group epoch (and target to come)."""
        self.group_epoch += 1
        self.update_state()

    def maybe_compute_target(self, partition_counts: Mapping[str, int]) -> None:
        """Compute the target assignment of the group epoch, unless it is computed."""
        if self.target_epoch >= self.group_epoch:
            return
        subscriptions = {m.member_id: m.subscription for m in self.members.values()}
        self.target = ASSIGNORS[self.assignor](subscriptions, partition_counts, self.target)
        self.target_epoch = self.group_epoch

    @property
    def assignor(self) -> str:
        """The assignor most members ask for (ties: configured order), else the default."""
        asked = [m.server_assignor for m in self.members.values() if m.server_assignor]
        if not asked:
            return self.assignors[0]
        return max(self.assignors, key=lambda a: (asked.count(a), -self.assignors.index(a)))

    def _resolve_regexes(
        self, partition_counts: Mapping[str, int], *, only: ConsumerMember | None = None
    ) -> bool:
        """Match members' regexes against the topics; whether any match changed.
        Internal topics (names starting with ``__``) and topics outside a member's
        ``regex_authorized`` are never matched."""
        changed = False
        for m in [only] if only is not None else list(self.members.values()):
            found: frozenset[str] = frozenset()
            if m.subscribed_regex:
                pattern = re.compile(m.subscribed_regex)
                allowed = m.regex_authorized
                found = frozenset(
                    t
                    for t in partition_counts
                    if not t.startswith("__")
                    and (allowed is None or t in allowed)
                    and pattern.fullmatch(t)
                )
            if found != m.regex_topics:
                m.regex_topics, changed = found, True
        return changed

    def _held_by_others(self, member: ConsumerMember) -> frozenset[TopicPartition]:
        others = (m.held for m in self.members.values() if m is not member)
        return frozenset().union(*others)

    def reconcile(
        self, m: ConsumerMember, owned: frozenset[TopicPartition] | None, *, now_ms: int
    ) -> None:
        """Move ``m`` one step towards its target (Kafka's ``CurrentAssignmentBuilder``)."""
        if m.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & m.pending_revocation:
                return  # still revoking
            m.pending_revocation, m.revocation_deadline_ms = NOTHING, None
        target = self.target.get(m.member_id, NOTHING)
        revoke = m.held - target
        if revoke:
            m.state = m.state.transition_to(MemberState.UNREVOKED_PARTITIONS)
            m.assigned, m.pending_revocation = m.held & target, revoke
            m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms
            return
        if m.member_epoch != self.target_epoch:
            m.previous_member_epoch, m.member_epoch = m.member_epoch, self.target_epoch
        m.assigned = target - self._held_by_others(m)
        done = m.assigned == target
        new = MemberState.STABLE if done else MemberState.UNRELEASED_PARTITIONS
        if new is not m.state or new is MemberState.STABLE:
            m.state = m.state.transition_to(new)

    def restore(
        self, *, now_ms: int, regex_topics: Mapping[str, frozenset[str]] | None = None
    ) -> None:
        """After a replay of the group's records (a new coordinator): rebuild what the
        records do not hold -- the static member index, the topics each member's regex
        matched (``regex_topics``, by regex, which bound what it may match until its next
        heartbeat says what its principal may DESCRIBE), fresh session deadlines (Kafka restarts
        every session on load), revocation deadlines of members still revoking and the
        group state -- without checking transitions (there was no transition)."""
        self.static_members = {
            m.instance_id: m.member_id for m in self.members.values() if m.instance_id is not None
        }
        for m in self.members.values():
            if m.subscribed_regex and regex_topics is not None:
                m.regex_topics = regex_topics.get(m.subscribed_regex, frozenset())
                # Whether its principal may DESCRIBE more is known at its next heartbeat.
                m.regex_authorized = m.regex_topics
            m.session_deadline_ms = now_ms + (
                m.classic_session_timeout_ms if m.is_classic else self.session_timeout_ms
            )
            revoking = m.state is MemberState.UNREVOKED_PARTITIONS
            m.revocation_deadline_ms = now_ms + m.rebalance_timeout_ms if revoking else None
        self.state = self._derived_state()

    def update_state(self) -> None:
        """Move to the state its members now give the group (a checked transition)."""
        new = self._derived_state()
        if new is not self.state:
            self.state = self.state.transition_to(new)

    def _derived_state(self) -> GroupState:
        if not self.members:
            new = GroupState.EMPTY
        elif self.group_epoch > self.target_epoch:
            new = GroupState.ASSIGNING
        elif any(
            m.state is not MemberState.STABLE or m.member_epoch != self.target_epoch
            for m in self.members.values()
            if m.member_epoch != STATIC_LEAVE_EPOCH
        ):
            new = GroupState.RECONCILING
        else:
            new = GroupState.STABLE
        return new


def _valid_regex(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True
