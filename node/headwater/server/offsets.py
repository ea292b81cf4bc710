"""ListOffsets and OffsetsForLeaderEpoch against the hosted partitions (leader only)."""

from __future__ import annotations

from typing import NamedTuple

from headwater import errors
from headwater.errors import ErrorCode
from headwater.replication import TopicPartition
from headwater.server.hosted import HostedPartition
from headwater.server.replica_manager import ReplicaManager
from headwater.storage import Log


class OffsetLookup(NamedTuple):
    topic_partition: TopicPartition
    error: ErrorCode
    message: str = ""
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


LATEST_TIMESTAMP = -1


def leader_partition(
    manager: ReplicaManager, tp: TopicPartition, current_leader_epoch: int
) -> tuple[HostedPartition | None, ErrorCode, str]:
    """The hosted partition if this broker leads it in the given epoch, else an error."""
    hosted = manager.partitions.get(tp)
    if hosted is None:
        code = manager.missing_error(tp)
        return None, code, f"{code.name}: {tp} is not hosted on broker {manager.broker_id}"
    if not hosted.state.is_leader:
        return (
            None,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"broker {manager.broker_id} does not lead {tp}",
        )
    code = hosted.state.check_fetch_epoch(current_leader_epoch)
    if code is not ErrorCode.NONE:
        return None, code, f"leader epoch {current_leader_epoch} vs {hosted.state.leader_epoch}"
    return hosted, ErrorCode.NONE, ""


def list_offset(
    manager: ReplicaManager,
    tp: TopicPartition,
    *,
    timestamp: int,
    current_leader_epoch: int,
    replica_id: int,
) -> OffsetLookup:
    """Kafka's ListOffsets for one partition (consumers see only below the HW)."""
    hosted, code, message = leader_partition(manager, tp, current_leader_epoch)
    if hosted is None:
        return OffsetLookup(tp, code, message)
    state = hosted.state
    try:
        found = hosted.log.fetch_offset_by_timestamp(timestamp)
    except errors.HeadwaterError as exc:
        return OffsetLookup(tp, exc.code, str(exc))
    if timestamp == LATEST_TIMESTAMP and replica_id < 0:
        return OffsetLookup(tp, ErrorCode.NONE, "", -1, state.high_watermark, state.leader_epoch)
    if found is None or (replica_id < 0 and found.offset >= state.high_watermark):
        return OffsetLookup(tp, ErrorCode.NONE, "", -1, -1, -1)
    return OffsetLookup(tp, ErrorCode.NONE, "", found.timestamp, found.offset, found.leader_epoch)


def offset_for_leader_epoch(
    manager: ReplicaManager, tp: TopicPartition, *, current_leader_epoch: int, leader_epoch: int
) -> tuple[ErrorCode, int, int]:
    """The end offset of ``leader_epoch`` on this leader: (error, epoch, end offset)."""
    hosted, code, _message = leader_partition(manager, tp, current_leader_epoch)
    if hosted is None:
        return code, -1, -1
    epoch, end = end_offset_for(hosted.log, leader_epoch)
    return ErrorCode.NONE, epoch, end


def end_offset_for(plog: Log, leader_epoch: int) -> tuple[int, int]:
    epoch, end = plog.end_offset_for_epoch(leader_epoch)
    return int(epoch), int(end)
