"""Requests, responses and settings of the group coordinator, as small immutable values.

These mirror ``proto/headwater/v1/group.proto`` field for field (Kafka's names), so the
servicer's conversion is mechanical; the coordinator itself never sees protobuf (the
``groups`` layer may not import ``headwater.v1``).  Error codes are
:class:`headwater.errors.ErrorCode` values.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.values import TopicPartition

NO_GENERATION = -1
NO_LEADER_EPOCH = -1
CONSUMER_PROTOCOL_TYPE = "consumer"


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
"""Kafka's ``group.consumer.migration.policy`` values (Kafka 4's default first)."""


@dataclasses.dataclass(frozen=True)
class GroupConfig:
    """Broker settings of the group coordinator (Kafka's names, same defaults)."""

    group_min_session_timeout_ms: int = 6000
    """``group.min.session.timeout.ms``: shorter session timeouts are refused."""
    group_max_session_timeout_ms: int = 1_800_000
    """``group.max.session.timeout.ms``: longer session timeouts are refused."""
    group_initial_rebalance_delay_ms: int = 3000
    """``group.initial.rebalance.delay.ms``: an empty group waits this long (after the
    last new member, at most the rebalance timeout) so that members starting together
    land in one rebalance."""
    group_max_size: int = 2**31 - 1
    """``group.max.size``: joins beyond this many members get GROUP_MAX_SIZE_REACHED."""
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    """``offsets.retention.minutes`` (in ms): offsets of an empty group expire this long
    after it became empty (or after the commit, if later)."""
    offset_metadata_max_bytes: int = 4096
    """``offset.metadata.max.bytes``: longer commit metadata gets OFFSET_METADATA_TOO_LARGE."""
    member_metadata_max_bytes: int = 1024 * 1024
    """Largest subscription/assignment a member may send (INVALID_REQUEST beyond)."""
    consumer_heartbeat_interval_ms: int = 5000
    """``group.consumer.heartbeat.interval.ms``: told to consumer-protocol members."""
    consumer_session_timeout_ms: int = 45_000
    """``group.consumer.session.timeout.ms``: a consumer-protocol member's session."""
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    """``group.consumer.assignors``; the first is the default."""
    consumer_max_size: int = 2**31 - 1
    """``group.consumer.max.size``: joins beyond get GROUP_MAX_SIZE_REACHED."""
    consumer_migration_policy: str = "bidirectional"
    """``group.consumer.migration.policy`` (one of :data:`MIGRATION_POLICIES`): whether a
    non-empty classic group may convert to a consumer group (upgrade) and back
    (downgrade).  Empty groups give way to the other kind whatever the policy."""

    @property
    def upgrade_allowed(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_allowed(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "downgrade")


class Protocol(NamedTuple):
    name: str
    metadata: bytes


@dataclasses.dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: tuple[Protocol, ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    reason: str = ""


class JoinedMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclasses.dataclass(frozen=True)
class JoinGroupResponse:
    error_code: ErrorCode
    member_id: str = ""
    generation_id: int = NO_GENERATION
    protocol_type: str = ""
    protocol_name: str = ""
    leader: str = ""
    members: tuple[JoinedMember, ...] = ()
    skip_assignment: bool = False
    error_message: str = ""


@dataclasses.dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str = ""
    protocol_name: str = ""
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclasses.dataclass(frozen=True)
class SyncGroupResponse:
    error_code: ErrorCode
    assignment: bytes = b""
    protocol_type: str = ""
    protocol_name: str = ""
    error_message: str = ""


@dataclasses.dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclasses.dataclass(frozen=True)
class HeartbeatResponse:
    error_code: ErrorCode
    error_message: str = ""


class MemberIdentity(NamedTuple):
    member_id: str
    group_instance_id: str | None = None
    reason: str = ""


@dataclasses.dataclass(frozen=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]


class LeftMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error_code: ErrorCode


@dataclasses.dataclass(frozen=True)
class LeaveGroupResponse:
    error_code: ErrorCode
    members: tuple[LeftMember, ...] = ()
    error_message: str = ""


class OffsetCommit(NamedTuple):
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""


@dataclasses.dataclass(frozen=True)
class OffsetCommitRequest:
    group_id: str
    partitions: tuple[OffsetCommit, ...]
    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_instance_id: str | None = None
    producer_id: int = -1
    """>= 0: a TxnOffsetCommit of this transactional producer (pending until its marker)."""
    producer_epoch: int = -1


@dataclasses.dataclass(frozen=True)
class OffsetCommitResponse:
    error_code: ErrorCode
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...] = ()
    error_message: str = ""


@dataclasses.dataclass(frozen=True)
class OffsetDeleteResponse:
    """OffsetDelete: the group's error, else each partition's (NONE: its offset is gone)."""

    error_code: ErrorCode
    partitions: tuple[tuple[TopicPartition, ErrorCode], ...] = ()


class CommittedOffset(NamedTuple):
    """A committed offset as the coordinator holds it."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


@dataclasses.dataclass(frozen=True)
class OffsetFetchResponse:
    error_code: ErrorCode
    offsets: dict[TopicPartition, CommittedOffset | None] = dataclasses.field(default_factory=dict)
    error_message: str = ""
    unstable: frozenset[TopicPartition] = frozenset()
    """With ``require_stable``: the partitions of ``offsets`` whose transactional offset
    commit is pending (answered UNSTABLE_OFFSET_COMMIT, KIP-447)."""


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    # Consumer-protocol (KIP-848) members only:
    member_epoch: int = -1
    member_state: str = ""
    owned: tuple[TopicPartition, ...] = ()
    """Assigned now (pending revocations included: the member still holds them)."""
    target: tuple[TopicPartition, ...] = ()
    subscribed_topics: tuple[str, ...] = ()
    subscribed_regex: str = ""


@dataclasses.dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation_id: int
    members: tuple[MemberDescription, ...]
    error_code: ErrorCode = ErrorCode.NONE
    group_type: str = "classic"
    """``classic`` or ``consumer`` (KIP-848), Kafka's ``GroupType``."""
    group_epoch: int = -1
    assignment_epoch: int = -1


class GroupOverview(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"
    """``classic`` or ``consumer`` (KIP-848), Kafka's ``GroupType``."""


@dataclasses.dataclass(frozen=True)
class ConsumerGroupHeartbeatRequest:
    """Kafka's ``ConsumerGroupHeartbeatRequest`` (KIP-848); None: unchanged since the last."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    """-1: unchanged; required on a join (epoch 0)."""
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[TopicPartition, ...] | None = None
    """The partitions the member owns now."""
    client_id: str = ""
    client_host: str = ""
    describable_topics: frozenset[str] | None = None
    """Not on the wire: the topics the principal may DESCRIBE, which bound what its
    regex matches (:mod:`headwater.groups.consumer.subscription_authorization`); None: all."""


@dataclasses.dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse:
    error_code: ErrorCode
    error_message: str = ""
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: tuple[TopicPartition, ...] | None = None
    """What the member may own now (it revokes anything else); None with an error."""


Response = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | ConsumerGroupHeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | OffsetDeleteResponse
    | tuple[tuple[str, ErrorCode], ...]
)
"""What a reply carries (DeleteGroups replies with ``((group_id, code), ...)``)."""
