"""Online upgrade of a classic group to the consumer protocol (KIP-848), pure.

When a member restarted with ``group_protocol="consumer"`` sends its first
``ConsumerGroupHeartbeat`` (epoch 0) for a classic group that still has members, the
coordinator converts the group (Kafka's ``GroupMetadataManager.convertToConsumerGroup``)
if ``group.consumer.migration.policy`` allows the upgrade and the group qualifies
(:func:`upgrade_refusal`).  The classic members stay in the converted group as
*classic members* (:attr:`ConsumerMember.classic_protocols`): they keep the generation
as their member epoch, keep the partitions of their classic assignment, and keep
speaking JoinGroup/SyncGroup/Heartbeat, answered from the consumer group:

- a Heartbeat gets REBALANCE_IN_PROGRESS while the member does not hold its target at
  the target epoch;
- its JoinGroup (carrying what it still owns) moves it towards its target like a
  consumer-protocol heartbeat -- revocations first, then what no other member holds --
  and is answered at once, with the member's epoch as the generation and no leader
  work to do; its SyncGroup then hands it ``assigned``.

These answers are this module's :func:`classic_join`, :func:`classic_check` (SyncGroup,
OffsetCommit) and :func:`classic_heartbeat`: the adapter between the classic protocol's
requests and the consumer group's state machine.

So the consumer group's invariant (no partition held by two members; a partition goes
to its new owner only after the old owner gave it up) covers both kinds of members.

Headwater is stricter than Kafka in one place: Kafka converts a group in any state and
fails the pending joins and syncs with REBALANCE_IN_PROGRESS; here only a **Stable**
group converts (its members' assignments are what they hold), and the heartbeat of a
group mid-rebalance gets REBALANCE_IN_PROGRESS, which the client retries after its
backoff, by when the classic group has settled.

**Downgrade** (Kafka's ``convertToClassicGroup``): when the last consumer-protocol member
of a group leaves (or is removed) while classic members remain, and the policy allows
downgrade, the group goes back to classic (:func:`to_classic`): the classic members with
their protocols and their current assignment, at the group epoch as generation, and a
rebalance starts at once -- the classic protocol's own rules (eager members revoke
before rejoining; cooperative ones keep only what they own and hand over next round)
then move partitions.  The consumer group's records are tombstoned and the classic group
metadata written.

Committed offsets are untouched: they are keyed by group id and held apart from the
members.  The conversion writes a tombstone for the classic group metadata and the
consumer group's records (Kafka's order), so a new coordinator replays the converted
group.  The classic members' ConsumerProtocol bytes are decoded here (the broker does
not import the client).
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable, Mapping

from headwater.errors import ErrorCode
from headwater.groups.classic.group import GroupMetadata, MemberMetadata
from headwater.groups.classic.state import GroupState
from headwater.groups.consumer.group import NOTHING, ConsumerGroup, ConsumerMember, MemberState
from headwater.groups.records import Reader
from headwater.groups.values import CONSUMER_PROTOCOL_TYPE, GroupConfig, Protocol
from headwater.values import TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
ASSIGNMENT_VERSION = 1


class ClassicSubscription:
    """What a classic member's JoinGroup metadata (Kafka's ConsumerProtocol
    subscription, any version) says: the topics and the partitions it still owns."""

    def __init__(self, topics: frozenset[str], owned: frozenset[TopicPartition]) -> None:
        self.topics = topics
        self.owned = owned


def _read_partitions(r: Reader) -> frozenset[TopicPartition]:
    out: set[TopicPartition] = set()
    for _ in range(r.i32()):
        topic = r.str()
        out.update(TopicPartition(topic, r.i32()) for _ in range(r.i32()))
    return frozenset(out)


def _done(r: Reader) -> bool:
    return r.pos >= len(r.data)


def decode_subscription(data: bytes) -> ClassicSubscription:
    """``version int16, topics [string], user_data nbytes, owned_partitions (v1+),
    generation (v2+)``; ValueError if malformed."""
    r = Reader(data)
    if r.i16() < 0:
        raise ValueError("bad consumer protocol subscription version")
    topics = frozenset(r.str() for _ in range(r.i32()))
    if _done(r) or _I32.unpack_from(r.data, r.pos)[0] == -1:
        r.pos += 4  # user data: null (or absent)
    else:
        r.bytes()
    owned = _read_partitions(r) if not _done(r) else NOTHING
    return ClassicSubscription(topics, owned)


def decode_assignment(data: bytes) -> frozenset[TopicPartition]:
    """The partitions of a ConsumerProtocol assignment (empty bytes: none)."""
    if not data:
        return NOTHING
    r = Reader(data)
    if r.i16() < 0:
        raise ValueError("bad consumer protocol assignment version")
    return _read_partitions(r)


def encode_assignment(tps: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = [_I16.pack(ASSIGNMENT_VERSION), _I32.pack(len(by_topic))]
    for topic, ps in by_topic.items():
        raw = topic.encode()
        parts += [_I16.pack(len(raw)), raw, _I32.pack(len(ps)), *(_I32.pack(p) for p in ps)]
    parts.append(_I32.pack(-1))  # user data: null
    return b"".join(parts)


def upgrade_refusal(classic: GroupMetadata, config: GroupConfig) -> tuple[ErrorCode, str] | None:
    """Why the non-empty ``classic`` group may not convert now (Kafka's
    ``validateOnlineUpgrade``: GROUP_ID_NOT_FOUND), or None.  A group mid-rebalance gets
    REBALANCE_IN_PROGRESS (see the module docstring), a retriable answer."""
    gid = classic.group_id
    if not config.upgrade_allowed:
        return ErrorCode.GROUP_ID_NOT_FOUND, (
            f"Cannot upgrade classic group {gid} to consumer group because the online "
            f"upgrade is disabled (group.consumer.migration.policy="
            f"{config.consumer_migration_policy})."
        )
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return ErrorCode.GROUP_ID_NOT_FOUND, (
            f"Cannot upgrade classic group {gid} to consumer group because the group does "
            f"not use the consumer embedded protocol."
        )
    if len(classic.members) > config.consumer_max_size:
        return ErrorCode.GROUP_ID_NOT_FOUND, (
            f"Cannot upgrade classic group {gid} to consumer group because the group size "
            f"exceeds the consumer group maximum size."
        )
    if not classic.is_(GroupState.STABLE):
        return ErrorCode.REBALANCE_IN_PROGRESS, (
            f"Classic group {gid} is rebalancing ({classic.state}); it converts once Stable."
        )
    return None


def convert(classic: GroupMetadata, group: ConsumerGroup, *, now_ms: int) -> str | None:
    """Fill the new, empty ``group`` from the Stable ``classic`` group (see the module
    docstring); returns why it cannot (malformed member metadata, or two members
    claiming one partition), else None.  ``classic`` is left unchanged."""
    assert not group.members, "only a new consumer group is filled from a classic one"
    generation = classic.generation_id
    protocol = classic.protocol or ""
    claimed: set[TopicPartition] = set()
    members: list[ConsumerMember] = []
    for cm in classic.members.values():
        try:
            sub = decode_subscription(cm.metadata_for(protocol))
            assigned = decode_assignment(cm.assignment)
        except (KeyError, ValueError, UnicodeDecodeError) as exc:
            return f"the embedded consumer protocol of member {cm.member_id} is malformed: {exc}"
        pending = sub.owned - assigned  # a cooperative member that has not revoked yet
        held = assigned | pending
        if claimed & held:
            return f"member {cm.member_id} claims partitions another member holds"
        claimed |= held
        members.append(
            ConsumerMember(
                cm.member_id,
                cm.group_instance_id,
                sub.topics,
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.UNREVOKED_PARTITIONS if pending else MemberState.STABLE,
                assigned=assigned,
                pending_revocation=pending,
                rebalance_timeout_ms=cm.rebalance_timeout_ms,
                client_id=cm.client_id,
                client_host=cm.client_host,
                classic_protocols=cm.protocols,
                classic_session_timeout_ms=cm.session_timeout_ms,
            )
        )
    group.group_epoch = group.target_epoch = generation
    for m in members:
        group.members[m.member_id] = m
        group.target[m.member_id] = m.assigned
    group.restore(now_ms=now_ms)
    return None


def downgradable(group: ConsumerGroup, config: GroupConfig) -> bool:
    """Kafka's ``validateOnlineDowngrade``: the policy allows it and every member left
    is a classic one."""
    members = group.members.values()
    return config.downgrade_allowed and bool(members) and all(m.is_classic for m in members)


def to_classic(group: ConsumerGroup, *, now_ms: int) -> GroupMetadata | None:
    """The classic group of ``group``'s (all classic) members, Stable at the group epoch
    (the caller starts its rebalance); None if they share no protocol."""
    classic = GroupMetadata(group.group_id, now_ms=now_ms)
    for m in group.members.values():
        assert m.classic_protocols is not None, "only classic members go back"
        classic.add(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                session_timeout_ms=m.classic_session_timeout_ms,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=m.classic_protocols,
                assignment=encode_assignment(m.assigned),
                heartbeat_deadline_ms=now_ms + m.classic_session_timeout_ms,
            )
        )
    if not classic.candidate_protocols():
        return None
    classic.protocol = classic.select_protocol()
    classic.generation_id = group.group_epoch
    classic.state = GroupState.STABLE  # constructed, as a replayed group is: no transition
    return classic


# -- classic members of a consumer group -------------------------------------------------


def classic_join(
    group: ConsumerGroup,
    member_id: str,
    *,
    subscribed_topics: frozenset[str],
    owned: frozenset[TopicPartition],
    protocols: tuple[Protocol, ...],
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    now_ms: int,
    partition_counts: Mapping[str, int],
    create: bool = False,
    instance_id: str | None = None,
    client_id: str = "",
    client_host: str = "",
) -> ConsumerMember | None:
    """A JoinGroup from a classic member (None if ``member_id`` is not one; with
    ``create``, an unknown one joins as a new classic member, bumping the epoch): it
    takes its subscription and what it says it still owns (the subscription's owned
    partitions; an eager member revoked everything before rejoining) and moves
    towards its target as a heartbeat would -- releasing pending revocations it no
    longer owns, then taking what no other member holds.  Its answer is
    ``member.assigned`` at ``member.member_epoch`` (the generation)."""
    m = group.members.get(member_id)
    if m is None and create:
        m = _new_classic_member(
            group, member_id, instance_id, subscribed_topics, protocols, client_id, client_host
        )
    if m is None or not m.is_classic:
        return None
    m.classic_protocols, m.classic_session_timeout_ms = protocols, session_timeout_ms
    m.rebalance_timeout_ms = rebalance_timeout_ms
    m.session_deadline_ms = now_ms + session_timeout_ms
    if subscribed_topics != m.subscribed_topics:
        m.subscribed_topics = subscribed_topics
        group.bump_epoch()
    group.maybe_compute_target(partition_counts)
    group.reconcile(m, owned, now_ms=now_ms)
    if m.state is MemberState.UNREVOKED_PARTITIONS:
        group.reconcile(m, owned, now_ms=now_ms)  # it may have revoked them already
    group.update_state()
    return m


def _new_classic_member(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    topics: frozenset[str],
    protocols: tuple[Protocol, ...],
    client_id: str,
    client_host: str,
) -> ConsumerMember | None:
    """A classic member joins; a static one whose instance id a classic member holds
    takes that member's place and partitions (KIP-345: the old process is gone, and
    its member id is fenced).  None if a consumer-protocol member holds the id."""
    old_id = group.static_members.get(instance_id) if instance_id is not None else None
    if old_id is not None:
        old = group.members[old_id]
        if not old.is_classic:
            return None
        del group.members[old_id]
        m = dataclasses.replace(old, member_id=member_id, client_id=client_id)
        if old_id in group.target:
            group.target[member_id] = group.target.pop(old_id)
    else:
        m = ConsumerMember(
            member_id,
            instance_id,
            topics,
            classic_protocols=protocols,
            client_id=client_id,
            client_host=client_host,
        )
        group.bump_epoch()
    group.members[member_id] = m
    if instance_id is not None:
        group.static_members[instance_id] = member_id
    return m


def classic_check(
    group: ConsumerGroup, member_id: str, generation_id: int, *, now_ms: int
) -> ErrorCode:
    """A SyncGroup, Heartbeat or OffsetCommit from a classic member: it must be one,
    at its current generation (its member epoch); refreshes its session."""
    m = group.members.get(member_id)
    if m is None or not m.is_classic:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != m.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION
    m.session_deadline_ms = now_ms + m.classic_session_timeout_ms
    return ErrorCode.NONE


def classic_heartbeat(
    group: ConsumerGroup, member_id: str, generation_id: int, *, now_ms: int
) -> ErrorCode:
    """A classic member's Heartbeat: REBALANCE_IN_PROGRESS while it does not hold
    its target at the target epoch (it rejoins, and its JoinGroup moves it on)."""
    code = classic_check(group, member_id, generation_id, now_ms=now_ms)
    if code is not ErrorCode.NONE:
        return code
    m = group.members[member_id]
    settled = (
        group.group_epoch == group.target_epoch
        and m.state is MemberState.STABLE
        and m.member_epoch == group.target_epoch
    )
    return ErrorCode.NONE if settled else ErrorCode.REBALANCE_IN_PROGRESS
