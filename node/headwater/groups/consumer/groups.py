"""The consumer-protocol (KIP-848) groups of one ``__consumer_offsets`` partition.

:class:`ConsumerGroups` sits between the coordinator of a partition
(:class:`headwater.groups.coordinator.GroupCoordinator`) and the per-group state machine
(:class:`headwater.groups.consumer.group.ConsumerGroup`).  It does what Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` does around the state machine:

- validates the request (Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``) and
  answers every bad input with its Kafka error *before* touching any state: an empty
  group id, a join without subscription or rebalance timeout or with owned partitions,
  a missing member id, an epoch below -2, an empty instance id, an unknown assignor;
- creates a group only for a join (epoch 0); any other epoch for an unknown group is
  GROUP_ID_NOT_FOUND, as in Kafka; a group created by a refused join is dropped again;
- enforces ``group.consumer.max.size`` (GROUP_MAX_SIZE_REACHED);
- validates the member epoch of offset commits and fetches (Kafka's
  ``ConsumerGroup.validateOffsetCommit``/``validateOffsetFetch``);
- turns every change into ``__consumer_offsets`` records (Kafka's KIP-848 record types,
  :mod:`headwater.groups.consumer.records`): an operation returns the records that turn
  the group's previous image into its new one, and :meth:`ConsumerGroups.replay` rebuilds
  the groups from them on a new coordinator.

Whether a classic group holds the id is the caller's question (it owns those groups).
Pure: time and partition counts are passed in.  Not thread-safe.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from headwater.errors import ErrorCode
from headwater.groups.consumer import records as consumer_records
from headwater.groups.consumer.group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    Heartbeat,
)
from headwater.groups.records import CoordinatorRecord
from headwater.groups.values import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    GroupDescription,
    MemberDescription,
)


def new_consumer_member_id() -> str:
    """Server-chosen member ids are random UUIDs, as Kafka's."""
    return str(uuid.uuid4())


def invalid_heartbeat(req: ConsumerGroupHeartbeatRequest) -> str | None:
    """Why the request is malformed (Kafka's INVALID_REQUEST checks), or None."""
    if not req.group_id:
        return "GroupId can't be empty."
    if req.instance_id is not None and not req.instance_id:
        return "InstanceId can't be empty."
    if req.rack_id is not None and not req.rack_id:
        return "RackId can't be empty."
    if req.member_epoch < STATIC_LEAVE_EPOCH:
        return f"MemberEpoch {req.member_epoch} is invalid."
    if req.member_epoch == JOIN_EPOCH:
        if req.rebalance_timeout_ms < 0:
            return "RebalanceTimeoutMs must be provided in first request."
        if req.topic_partitions:
            return "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topic_names is None and not req.subscribed_topic_regex:
            return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    else:
        if not req.member_id:
            return "MemberId can't be empty."
        if req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
            return "InstanceId can't be null when MemberEpoch is -2."
    if any(not t for t in req.subscribed_topic_names or ()):
        return "SubscribedTopicNames must not contain empty names."
    return None


class ConsumerGroups:
    """The consumer-protocol groups of one coordinator partition (see the module docstring)."""

    def __init__(
        self,
        *,
        config: GroupConfig,
        member_id_factory: Callable[[], str] = new_consumer_member_id,
    ) -> None:
        self.config = config
        self._new_member_id = member_id_factory
        self.groups: dict[str, ConsumerGroup] = {}
        self._replayed_regexes: dict[str, dict[str, frozenset[str]]] = {}
        """``group -> regex -> topics`` read while loading (Kafka's key 16 records)."""

    def new_member_id(self) -> str:
        return self._new_member_id()

    def new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(
            group_id,
            assignors=self.config.consumer_assignors,
            session_timeout_ms=self.config.consumer_session_timeout_ms,
            member_id_factory=self._new_member_id,
        )

    # == ConsumerGroupHeartbeat ========================================================

    def heartbeat(
        self,
        req: ConsumerGroupHeartbeatRequest,
        *,
        now_ms: int,
        partition_counts: Mapping[str, int],
        converted: ConsumerGroup | None = None,
    ) -> tuple[ConsumerGroupHeartbeatResponse, list[CoordinatorRecord]]:
        """Apply one heartbeat: the answer and the records to write first.  An error
        answer comes with no records and leaves every group as it was.  ``converted``:
        the group just converted from a classic one (:mod:`headwater.groups.migration`),
        which this join creates -- kept, and written whole, only if the join succeeds."""

        def fail(
            code: ErrorCode, message: str
        ) -> tuple[ConsumerGroupHeartbeatResponse, list[CoordinatorRecord]]:
            return self.refuse(req, code, message), []

        why = invalid_heartbeat(req)
        if why is not None:
            return fail(ErrorCode.INVALID_REQUEST, why)
        if req.server_assignor is not None and (
            req.server_assignor not in self.config.consumer_assignors
        ):
            return fail(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported; supported: "
                f"{', '.join(self.config.consumer_assignors)}.",
            )
        group = self.groups.get(req.group_id) if converted is None else converted
        created = group is None or converted is not None
        if group is None:
            if req.member_epoch != JOIN_EPOCH:
                return fail(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {req.group_id} not found."
                )
            group = self.new_group(req.group_id)
        if req.member_epoch == JOIN_EPOCH and self._would_exceed_max_size(group, req):
            return fail(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.consumer_max_size} members.",
            )
        before = {} if created else consumer_records.image(group)
        self.groups[req.group_id] = group
        result = group.heartbeat(
            Heartbeat(
                member_id=req.member_id,
                member_epoch=req.member_epoch,
                instance_id=req.instance_id,
                subscribed_topics=(
                    frozenset(req.subscribed_topic_names)
                    if req.subscribed_topic_names is not None
                    else None
                ),
                owned=(
                    frozenset(req.topic_partitions) if req.topic_partitions is not None else None
                ),
                rebalance_timeout_ms=req.rebalance_timeout_ms
                if req.rebalance_timeout_ms >= 0
                else None,
                server_assignor=req.server_assignor,
                subscribed_topic_regex=req.subscribed_topic_regex,
                rack_id=req.rack_id,
                client_id=req.client_id,
                client_host=req.client_host,
                describable_topics=req.describable_topics,
            ),
            now_ms=now_ms,
            partition_counts=partition_counts,
        )
        if result.error_code is not ErrorCode.NONE:
            if created:
                del self.groups[req.group_id]
            return fail(result.error_code, _MESSAGES.get(result.error_code, ""))
        leaving = result.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH)
        response = ConsumerGroupHeartbeatResponse(
            ErrorCode.NONE,
            member_id=result.member_id,
            member_epoch=result.member_epoch,
            heartbeat_interval_ms=0 if leaving else self.config.consumer_heartbeat_interval_ms,
            assignment=None if leaving else tuple(sorted(result.assignment)),
        )
        return response, consumer_records.changes(before, consumer_records.image(group))

    @staticmethod
    def refuse(
        req: ConsumerGroupHeartbeatRequest, code: ErrorCode, message: str
    ) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(code, message, req.member_id, req.member_epoch)

    def drop(self, group_id: str) -> list[CoordinatorRecord]:
        """Forget an empty group (deleted, or giving way to a classic group): the
        tombstones of its records."""
        group = self.groups.pop(group_id)
        assert not group.members, "only an empty consumer group may be dropped"
        return consumer_records.changes(consumer_records.image(group), {})

    def drop_converted(self, group_id: str) -> list[CoordinatorRecord]:
        """Forget a group converted back to classic: the tombstones of its records."""
        group = self.groups.pop(group_id)
        self._replayed_regexes.pop(group_id, None)
        return consumer_records.changes(consumer_records.image(group), {})

    def replay(self, key: bytes, value: bytes | None, *, now_ms: int) -> None:
        """Apply one record of the partition, in log order (a new coordinator loading)."""
        k = consumer_records.decode_key(key)
        if k.version == consumer_records.PARTITION_METADATA:
            return  # partition counts come from the metadata cache
        group = self.groups.get(k.group)
        if group is None:
            if value is None:
                return
            group = self.groups[k.group] = self.new_group(k.group)
        regexes = self._replayed_regexes.setdefault(k.group, {})
        if not consumer_records.apply(group, k, value, regexes):
            del self.groups[k.group]
            self._replayed_regexes.pop(k.group, None)
            return
        group.restore(now_ms=now_ms, regex_topics=regexes)

    def _would_exceed_max_size(
        self, group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest
    ) -> bool:
        if req.member_id in group.members:
            return False
        if req.instance_id is not None and req.instance_id in group.static_members:
            return False  # a static member coming back takes its own place
        return len(group.members) >= self.config.consumer_max_size

    # == timers ========================================================================

    def tick(self, *, now_ms: int, partition_counts: Mapping[str, int]) -> list[CoordinatorRecord]:
        """Expire sessions and revocation deadlines, follow regex subscriptions: the
        records of what changed."""
        out: list[CoordinatorRecord] = []
        for group in self.groups.values():
            before = consumer_records.image(group)
            group.tick(now_ms=now_ms, partition_counts=partition_counts)
            out += consumer_records.changes(before, consumer_records.image(group))
        return out

    # == administration ================================================================

    def describe(self, group_id: str) -> GroupDescription:
        group = self.groups[group_id]
        return GroupDescription(
            group_id=group_id,
            state=group.state.value,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol=group.assignor,
            generation_id=group.group_epoch,
            members=tuple(
                MemberDescription(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    b"",
                    b"",
                    member_epoch=m.member_epoch,
                    member_state=m.state.value,
                    owned=tuple(sorted(m.held)),
                    target=tuple(sorted(group.target.get(m.member_id, ()))),
                    subscribed_topics=tuple(sorted(m.subscribed_topics)),
                    subscribed_regex=m.subscribed_regex or "",
                )
                for m in group.members.values()
            ),
            group_type="consumer",
            group_epoch=group.group_epoch,
            assignment_epoch=group.target_epoch,
        )

    # == offsets =======================================================================

    def check_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: a commit from outside the group
        (epoch < 0) only while the group is empty; else the member must exist and carry
        its current epoch (older: STALE_MEMBER_EPOCH, newer: FENCED_MEMBER_EPOCH)."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.is_classic:  # a classic client knows generations, not member epochs
            ok = member_epoch == member.member_epoch
            return ErrorCode.NONE if ok else ErrorCode.ILLEGAL_GENERATION
        if member_epoch > member.member_epoch:
            return ErrorCode.FENCED_MEMBER_EPOCH
        if member_epoch < member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def check_fetch(
        self, group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """Kafka's ``ConsumerGroup.validateOffsetFetch``: without a member id (admin, or
        an older client) any fetch goes; with one, the member must exist and carry its
        current epoch (else STALE_MEMBER_EPOCH)."""
        if not member_id:
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE


_MESSAGES = {
    ErrorCode.UNKNOWN_MEMBER_ID: "The member is not in the group.",
    ErrorCode.FENCED_MEMBER_EPOCH: "The member epoch is not the member's current epoch.",
    ErrorCode.UNRELEASED_INSTANCE_ID: "A member with this instance id is still in the group.",
    ErrorCode.INVALID_REQUEST: "Invalid request (subscription or regular expression).",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The group is being removed.",
}
