"""Administering consumer groups: list, describe, delete, read and alter committed offsets.

Kafka's ``Admin.listConsumerGroups`` / ``describeConsumerGroups`` / ``deleteConsumerGroups``
/ ``listConsumerGroupOffsets`` / ``alterConsumerGroupOffsets``, behind
:class:`headwater.Admin` (which delegates here).  Every call but the listing goes to the
group's coordinator, found with FindCoordinator and found again when it moves
(NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS and lost
connections are retried with the client's :class:`~headwater.retry.RetryPolicy`).
Listing asks every broker, since each one only knows the groups it coordinates.

Altering offsets is a commit without a generation or member id: the coordinator accepts
it only while the group has no members (UNKNOWN_MEMBER_ID otherwise), because a running
member would overwrite the offsets at its next commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from headwater import errors
from headwater.client import connection
from headwater.client.group.classic import protocol
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.metadata import MetadataManager
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode
from headwater.retry import RetryPolicy
from headwater.v1 import common_pb2, group_pb2, group_pb2_grpc

_MOVED = {
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}


class ConsumerGroupListing(NamedTuple):
    group_id: str
    state: str
    protocol_type: str


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    """The member's partitions (classic: empty unless the group is Stable; consumer
    protocol: what the member holds now)."""
    member_epoch: int = -1
    """Consumer-protocol groups only, as the rest below."""
    state: str = ""
    """``stable``, ``unrevoked_partitions`` or ``unreleased_partitions``."""
    target_assignment: tuple[TopicPartition, ...] = ()


class ConsumerGroupDescription(NamedTuple):
    group_id: str
    state: str
    """``Empty``, ``PreparingRebalance``, ``CompletingRebalance``, ``Stable`` or ``Dead``
    (``Dead`` also for a group the coordinator does not know)."""
    protocol_type: str
    protocol: str
    """The assignor chosen by the members' vote (while Stable or CompletingRebalance)."""
    generation_id: int
    members: tuple[MemberDescription, ...]
    coordinator: str
    """``host:port`` of the coordinator that answered."""
    group_type: str = "classic"
    """``classic`` (JoinGroup/SyncGroup) or ``consumer`` (KIP-848), Kafka's ``GroupType``."""
    group_epoch: int = -1
    """Consumer-protocol groups only, as the next."""
    target_assignment_epoch: int = -1


class GroupAdmin:
    """The group half of :class:`headwater.Admin`; thread-safe like it."""

    def __init__(
        self,
        *,
        channels: connection.Channels,
        metadata: MetadataManager,
        retry: RetryPolicy,
        bootstrap: tuple[str, ...],
        request_timeout_ms: int,
        default_api_timeout_ms: int,
    ) -> None:
        self._channels = channels
        self._metadata = metadata
        self._retry = retry
        self._bootstrap = bootstrap
        self._request_timeout_ms = request_timeout_ms
        self._api_timeout_ms = default_api_timeout_ms

    # -- plumbing -------------------------------------------------------------------

    def _addresses(self) -> list[str]:
        with contextlib.suppress(errors.HeadwaterError):  # fall back to the bootstrap list
            self._metadata.maybe_refresh()
        known = [b.address for b in self._metadata.current.brokers.values()]
        return known + [a for a in self._bootstrap if a not in known]

    def _rpc(self, address: str, method: str, request: Any) -> Any:
        stub = group_pb2_grpc.GroupStub(self._channels.channel(address))
        return connection.call(
            getattr(stub, method), request, address=address, timeout_ms=self._request_timeout_ms
        )

    def _find_coordinator(self, group_id: str) -> str:
        last: errors.HeadwaterError | None = None
        for address in self._addresses():
            try:
                resp = self._rpc(
                    address,
                    "FindCoordinator",
                    group_pb2.FindCoordinatorRequest(key=group_id, key_type=0),
                )
            except errors.NetworkError as exc:
                last = exc
                continue
            if resp.error_code:
                raise errors.for_code(resp.error_code, resp.error_message or "FindCoordinator")
            return f"{resp.host}:{resp.port}"
        raise errors.CoordinatorNotAvailableError(
            f"no broker answered FindCoordinator for {group_id!r}"
            + (f"; last error: {last.message}" if last is not None else "")
        )

    def _coordinator_call(self, group_id: str, method: str, request: Any) -> tuple[str, Any]:
        """``(coordinator address, response)``; retried while the coordinator moves.

        Raises when the response's top-level ``error_code`` is a coordinator error (so the
        retry finds the coordinator again); other errors are left to the caller.
        """

        def attempt() -> tuple[str, Any]:
            address = self._find_coordinator(group_id)
            resp = self._rpc(address, method, request)
            code = getattr(resp, "error_code", 0)
            if method == "DescribeGroups":
                code = next((g.error_code for g in resp.groups if g.error_code in _MOVED), 0)
            if method == "DeleteGroups":
                code = next((r.error_code for r in resp.results if r.error_code in _MOVED), 0)
            if code in _MOVED:
                raise errors.for_code(code, f"{method} for group {group_id!r}")
            return address, resp

        result: tuple[str, Any] = self._retry.call(attempt, timeout_ms=self._api_timeout_ms)
        return result

    # -- the API --------------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> list[ConsumerGroupListing]:
        """Every group some live broker coordinates (optionally only in ``states``)."""
        found: dict[str, ConsumerGroupListing] = {}
        request = group_pb2.ListGroupsRequest(states_filter=list(states))
        reached = 0
        for address in self._addresses():
            try:
                resp = self._rpc(address, "ListGroups", request)
            except errors.NetworkError:
                continue
            reached += 1
            for g in resp.groups:
                found[g.group_id] = ConsumerGroupListing(g.group_id, g.group_state, g.protocol_type)
        if not reached:
            raise errors.NetworkError("cannot reach any broker to list groups")
        return [found[k] for k in sorted(found)]

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        out: dict[str, ConsumerGroupDescription] = {}
        for gid in group_ids:
            address, resp = self._coordinator_call(
                gid, "DescribeGroups", group_pb2.DescribeGroupsRequest(groups=[gid])
            )
            (g,) = resp.groups
            if g.error_code:
                raise errors.for_code(g.error_code, g.error_message or f"group {gid!r}")
            members = []
            consumer = g.group_type == "consumer"
            for m in g.members:
                assigned: tuple[TopicPartition, ...] = ()
                if consumer:
                    assigned = tuple(TopicPartition(p.topic, p.partition) for p in m.assignment)
                elif m.member_assignment:
                    assigned = tuple(
                        sorted(protocol.decode_assignment(m.member_assignment).partitions)
                    )
                members.append(
                    MemberDescription(
                        m.member_id,
                        m.group_instance_id or None,
                        m.client_id,
                        m.client_host,
                        assigned,
                        m.member_epoch if consumer else -1,
                        m.member_state,
                        tuple(TopicPartition(p.topic, p.partition) for p in m.target_assignment),
                    )
                )
            out[gid] = ConsumerGroupDescription(
                gid,
                g.group_state,
                g.protocol_type,
                g.protocol_data,
                g.generation_id,
                tuple(members),
                address,
                g.group_type or "classic",
                g.group_epoch if consumer else -1,
                g.assignment_epoch if consumer else -1,
            )
        return out

    def delete_groups(
        self, group_ids: Iterable[str], *, raise_on_error: bool = True
    ) -> dict[str, errors.HeadwaterError | None]:
        """Delete empty groups with their offsets (GroupIdNotFound, NonEmptyGroup)."""
        out: dict[str, errors.HeadwaterError | None] = {}
        for gid in group_ids:
            _, resp = self._coordinator_call(
                gid, "DeleteGroups", group_pb2.DeleteGroupsRequest(groups_names=[gid])
            )
            code = resp.results[0].error_code if resp.results else ErrorCode.UNKNOWN_SERVER_ERROR
            out[gid] = errors.for_code(code, f"cannot delete group {gid!r}") if code else None
        if raise_on_error:
            for err in out.values():
                if err is not None:
                    raise err
        return out

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all of them, or those of ``partitions``)."""
        request = group_pb2.OffsetFetchRequest(
            group_id=group_id,
            partitions=[
                common_pb2.TopicPartition(topic=t, partition=p) for t, p in partitions or ()
            ],
        )
        _, resp = self._coordinator_call(group_id, "OffsetFetch", request)
        if resp.error_code:
            raise errors.for_code(resp.error_code, resp.error_message or "OffsetFetch")
        return {
            TopicPartition(p.topic, p.partition_index): OffsetAndMetadata(
                p.committed_offset, p.metadata, p.committed_leader_epoch
            )
            for p in resp.partitions
            if p.committed_offset >= 0
        }

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        """Set committed offsets of a group without active members (raises otherwise)."""
        parts = []
        for tp, om in offsets.items():
            o = om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
            parts.append(
                group_pb2.OffsetCommitRequestPartition(
                    topic=tp[0],
                    partition_index=tp[1],
                    committed_offset=o.offset,
                    committed_leader_epoch=o.leader_epoch,
                    committed_metadata=o.metadata,
                )
            )
        request = group_pb2.OffsetCommitRequest(
            group_id=group_id,
            generation_id=-1,
            member_id="",
            retention_time_ms=-1,
            partitions=parts,
        )
        _, resp = self._coordinator_call(group_id, "OffsetCommit", request)
        codes = [resp.error_code, *(p.error_code for p in resp.partitions)]
        bad = next((c for c in codes if c), 0)
        if bad == ErrorCode.UNKNOWN_MEMBER_ID:
            raise errors.for_code(
                bad, f"group {group_id!r} has active members; stop them before altering offsets"
            )
        if bad:
            raise errors.for_code(bad, f"altering offsets of group {group_id!r}")
