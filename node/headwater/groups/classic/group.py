"""One group's in-memory state: members, generation, protocol, committed offsets.

Kafka's ``GroupMetadata`` / ``MemberMetadata``: plain mutable containers with the
state machine's guard (:meth:`GroupMetadata.transition_to`), vote-based protocol
selection and the conversions to and from the ``__consumer_offsets`` records.  The
rules (who may join, when a rebalance completes) live in
:mod:`headwater.groups.coordinator`; nothing here does I/O or reads a clock.

Only the coordinator that owns the group's ``__consumer_offsets`` partition touches
it, from one task at a time (the runtime serialises calls per partition).
"""

from __future__ import annotations

import collections
import dataclasses

from headwater.groups import records
from headwater.groups.classic.state import GroupState, check_transition
from headwater.groups.values import (
    NO_GENERATION,
    CommittedOffset,
    JoinedMember,
    Protocol,
)
from headwater.values import TopicPartition


@dataclasses.dataclass
class MemberMetadata:
    """A member of a group (Kafka's ``MemberMetadata``)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    heartbeat_deadline_ms: int = 0
    """When the session expires unless a heartbeat (or join/sync/commit) arrives."""
    awaiting_join: int | None = None
    """The request id of a parked JoinGroup, answered when the rebalance completes."""
    awaiting_sync: int | None = None
    """The request id of a parked SyncGroup, answered when the leader's assignment arrives."""
    is_new: bool = False
    """Joined during this rebalance (Kafka's ``isNew``)."""

    def metadata_for(self, protocol: str) -> bytes:
        for p in self.protocols:
            if p.name == protocol:
                return p.metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def same_protocols(self, protocols: tuple[Protocol, ...]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for p in self.protocols:
            if p.name in candidates:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")


class GroupMetadata:
    """One group (see the module docstring); invariants:

    - ``leader_id`` is None or a key of ``members``;
    - ``static_members`` maps each static member's instance id to its current member id;
    - the group is EMPTY or DEAD exactly when it has no members, outside a rebalance.
    """

    def __init__(self, group_id: str, *, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.protocol_type = ""
        self.protocol: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}
        self.pending_members: dict[str, int] = {}
        """Member ids issued with MEMBER_ID_REQUIRED, with the time they expire."""
        self.offsets: dict[TopicPartition, CommittedOffset] = {}
        self.rebalance_deadline_ms: int | None = None
        """When the join phase (PreparingRebalance) or sync phase (CompletingRebalance) ends."""
        self.initial_rebalance_start_ms: int | None = None
        """Set while an empty group's first join waits out group.initial.rebalance.delay.ms."""
        self.rebalance_started_ms: int | None = None

    # -- state ------------------------------------------------------------------------

    def transition_to(self, target: GroupState, *, now_ms: int) -> None:
        self.state = check_transition(self.state, target)
        self.state_timestamp_ms = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    # -- members ----------------------------------------------------------------------

    def add(self, member: MemberMetadata) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        iid = member.group_instance_id
        if iid is not None and self.static_members.get(iid) == member_id:
            del self.static_members[iid]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id, keeping everything else (KIP-345)."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member

    def all_joined(self) -> bool:
        return all(m.awaiting_join is not None for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols --------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        sets = [{p.name for p in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: tuple[Protocol, ...]) -> bool:
        """Could a member with these protocols join (Kafka's ``supportsProtocols``)?"""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        names = {p.name for p in protocols}
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Every member votes for its first choice among the common protocols; most wins.

        Ties go to the protocol listed first by the first member (deterministic).
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError(f"group {self.group_id}: members share no protocol")
        votes = collections.Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        order = [p.name for p in first.protocols if p.name in candidates]
        return max(order, key=lambda name: (votes[name], -order.index(name)))

    def joined_members(self) -> tuple[JoinedMember, ...]:
        assert self.protocol is not None
        protocol = self.protocol
        return tuple(
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(protocol))
            for m in self.members.values()
        )

    # -- records ----------------------------------------------------------------------

    def to_value(self) -> records.GroupValue:
        protocol = self.protocol
        return records.GroupValue(
            protocol_type=self.protocol_type,
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                records.MemberValue(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol else b"",
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )

    def record(self) -> records.CoordinatorRecord:
        return records.group_record(records.GroupKey(self.group_id), self.to_value())

    def load(self, value: records.GroupValue, *, now_ms: int) -> None:
        """Adopt a replayed group metadata record (members come back Stable)."""
        self.members.clear()
        self.static_members.clear()
        self.pending_members.clear()
        self.protocol_type = value.protocol_type
        self.generation_id = value.generation
        self.protocol = value.protocol
        self.leader_id = None
        for mv in value.members:
            assert value.protocol is not None
            self.add(
                MemberMetadata(
                    member_id=mv.member_id,
                    group_instance_id=mv.group_instance_id,
                    client_id=mv.client_id,
                    client_host=mv.client_host,
                    session_timeout_ms=mv.session_timeout_ms,
                    rebalance_timeout_ms=mv.rebalance_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=(Protocol(value.protocol, mv.subscription),),
                    assignment=mv.assignment,
                    heartbeat_deadline_ms=now_ms + mv.session_timeout_ms,
                )
            )
        if value.leader is not None and value.leader in self.members:
            self.leader_id = value.leader
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY
        self.state_timestamp_ms = value.current_state_timestamp_ms
        self.rebalance_deadline_ms = None
        self.initial_rebalance_start_ms = None

    def describe_generation(self) -> int:
        return self.generation_id if self.members or self.generation_id else NO_GENERATION
