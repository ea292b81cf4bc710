"""Committed offsets of one ``__consumer_offsets`` partition's groups: OffsetCommit,
OffsetFetch, DeleteGroups, and rebuilding the state by replaying the partition.

Commits are validated against the group's generation and the member (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS while the group completes a
rebalance); a commit without generation and member id (``generation_id < 0``) is the
"simple" or admin commit, accepted only while the group has no members.  Each accepted
offset becomes one record (see :mod:`headwater.groups.records`), written before the reply.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from headwater.errors import ErrorCode
from headwater.groups import records
from headwater.groups.classic.group import GroupMetadata
from headwater.groups.classic.membership import (
    COMPLETING,
    DEAD,
    EMPTY,
    Decision,
    GroupMembership,
    Out,
)
from headwater.groups.values import (
    CommittedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchResponse,
)
from headwater.values import TopicPartition


class GroupOffsets(GroupMembership):
    """Adds offsets, deletion and replay to :class:`GroupMembership` (same rules).

    A commit with a producer id (TxnOffsetCommit) is checked the same way, but its
    offsets stay *pending* under that producer id -- written as the producer's
    transactional batch -- until the transaction's marker reaches this partition:
    :meth:`complete_transaction` makes them the committed offsets (COMMIT) or drops
    them (ABORT).  Replay does the same from the log's batches and markers.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pending_txn_offsets: dict[int, dict[str, dict[TopicPartition, CommittedOffset]]] = {}
        """producer id -> group -> partition -> offset, awaiting the transaction's end."""

    def commit_offsets(self, req: OffsetCommitRequest, *, request_id: int, now_ms: int) -> Decision:
        out = Out()
        group = self.groups.get(req.group_id)
        code = ErrorCode.NONE
        simple = req.generation_id < 0 and not req.member_id
        if not req.group_id:
            code = ErrorCode.INVALID_GROUP_ID
        elif group is None:
            if simple:
                group = self.groups[req.group_id] = GroupMetadata(req.group_id, now_ms=now_ms)
            else:
                code = ErrorCode.ILLEGAL_GENERATION
        elif group.is_(DEAD):
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif simple and group.is_(EMPTY):
            pass
        else:
            code = self._check_member(group, req.member_id, req.group_instance_id)
            if code is ErrorCode.NONE:
                if req.generation_id != group.generation_id:
                    code = ErrorCode.ILLEGAL_GENERATION
                elif group.is_(COMPLETING):
                    code = ErrorCode.REBALANCE_IN_PROGRESS
                else:
                    m = group.members[req.member_id]
                    m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms
        results: list[tuple[TopicPartition, ErrorCode]] = []
        for c in req.partitions:
            tp = TopicPartition(c.topic, c.partition)
            pcode = code
            if pcode is ErrorCode.NONE:
                if len(c.metadata.encode()) > self.config.offset_metadata_max_bytes:
                    pcode = ErrorCode.OFFSET_METADATA_TOO_LARGE
                elif c.offset < 0 or c.partition < 0 or not c.topic:
                    pcode = ErrorCode.INVALID_REQUEST
            if pcode is ErrorCode.NONE:
                assert group is not None
                value = records.OffsetValue(c.offset, c.leader_epoch, c.metadata, now_ms)
                out.records.append(
                    records.offset_record(records.OffsetKey(req.group_id, *tp), value)
                )
                committed = CommittedOffset(c.offset, c.leader_epoch, c.metadata, now_ms)
                if req.producer_id >= 0:
                    pending = self.pending_txn_offsets.setdefault(req.producer_id, {})
                    pending.setdefault(req.group_id, {})[tp] = committed
                    out.producer = (req.producer_id, req.producer_epoch)
                else:
                    group.offsets[tp] = committed
            results.append((tp, pcode))
        out.reply(request_id, OffsetCommitResponse(code, tuple(results)))
        return out.decision()

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        require_stable: bool = False,
    ) -> OffsetFetchResponse:
        """Committed offsets (None where nothing is committed); all of them without a list.

        ``require_stable`` (KIP-447): a partition with a transactional commit pending for
        the group is named in ``unstable`` (all partitions: the pending ones included).
        """
        group = self.groups.get(group_id)
        held = group.offsets if group is not None else {}
        pending = self.pending_partitions(group_id) if require_stable else set()
        offsets: dict[TopicPartition, CommittedOffset | None]
        if partitions is None:
            offsets = dict(held)
            for tp in pending:
                offsets.setdefault(tp, None)
        else:
            offsets = {TopicPartition(*tp): held.get(TopicPartition(*tp)) for tp in partitions}
        return OffsetFetchResponse(
            ErrorCode.NONE, offsets, unstable=frozenset(pending.intersection(offsets))
        )

    def pending_partitions(self, group_id: str) -> set[TopicPartition]:
        """The partitions with a transactional offset commit of ``group_id`` pending."""
        return {
            tp
            for by_group in self.pending_txn_offsets.values()
            for tp in by_group.get(group_id, {})
        }

    def delete_groups(self, group_ids: Iterable[str], *, request_id: int, now_ms: int) -> Decision:
        """Delete empty groups with their offsets; the reply is ``((group, code), ...)``."""
        out = Out()
        results: list[tuple[str, ErrorCode]] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None or group.is_(DEAD):
                results.append((gid, ErrorCode.GROUP_ID_NOT_FOUND))
            elif not group.is_(EMPTY):
                results.append((gid, ErrorCode.NON_EMPTY_GROUP))
            else:
                self._drop(group, list(group.offsets), now_ms, out)
                results.append((gid, ErrorCode.NONE))
        out.reply(request_id, tuple(results))
        return out.decision()

    def _drop(
        self, group: GroupMetadata, expired: list[TopicPartition], now_ms: int, out: Out
    ) -> None:
        for tp in expired:
            out.records.append(records.offset_record(records.OffsetKey(group.group_id, *tp), None))
            group.offsets.pop(tp, None)
        if not group.offsets:
            group.transition_to(DEAD, now_ms=now_ms)
            out.records.append(records.group_record(records.GroupKey(group.group_id), None))
            del self.groups[group.group_id]

    def complete_transaction(self, producer_id: int, *, commit: bool, now_ms: int) -> None:
        """The transaction's marker is written here: its offsets count (COMMIT) or go."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not pending or not commit:
            return
        for group_id, offsets in pending.items():
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id, now_ms=now_ms)
            group.offsets.update(offsets)

    # == loading =======================================================================

    def replay_transactional(
        self, key: bytes, value: bytes | None, *, producer_id: int, now_ms: int
    ) -> None:
        """Apply one record of a transactional batch (a TxnOffsetCommit) while loading:
        pending until :meth:`complete_transaction` replays the transaction's marker."""
        k = records.decode_key(key)
        if not isinstance(k, records.OffsetKey) or value is None:
            self.replay(key, value, now_ms=now_ms)
            return
        ov = records.decode_offset_value(value)
        pending = self.pending_txn_offsets.setdefault(producer_id, {}).setdefault(k.group, {})
        pending[TopicPartition(k.topic, k.partition)] = CommittedOffset(
            ov.offset, ov.leader_epoch, ov.metadata, ov.commit_timestamp_ms
        )

    def replay(self, key: bytes, value: bytes | None, *, now_ms: int) -> None:
        """Apply one record of the partition, in log order, to rebuild the state."""
        k = records.decode_key(key)
        if isinstance(k, records.OffsetKey):
            group = self.groups.get(k.group)
            tp = TopicPartition(k.topic, k.partition)
            if value is None:
                if group is not None:
                    group.offsets.pop(tp, None)
                return
            if group is None:
                group = self.groups[k.group] = GroupMetadata(k.group, now_ms=now_ms)
            ov = records.decode_offset_value(value)
            group.offsets[tp] = CommittedOffset(
                ov.offset, ov.leader_epoch, ov.metadata, ov.commit_timestamp_ms
            )
            return
        if value is None:
            # The group metadata is gone (deleted, or converted to a consumer group);
            # its offsets have their own records and stay until their tombstones.
            gone = self.groups.pop(k.group, None)
            if gone is not None and gone.offsets:
                holder = self.groups[k.group] = GroupMetadata(k.group, now_ms=now_ms)
                holder.offsets = gone.offsets
            return
        group = self.groups.get(k.group)
        if group is None:
            group = self.groups[k.group] = GroupMetadata(k.group, now_ms=now_ms)
        group.load(records.decode_group_value(value), now_ms=now_ms)
