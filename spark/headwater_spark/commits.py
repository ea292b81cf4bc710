"""``groupId``: commit a streaming query's processed offsets to a consumer group.

Spark's own Kafka source commits nothing, so lag monitoring cannot see a
Spark job.  With ``groupId`` the driver commits each micro-batch's end
offsets after Spark has committed the batch to its checkpoint; the checkpoint
stays the source of truth for restarts, the group offsets are for
``headwater groups describe`` and the lag metrics.

The commit is Kafka's "commit from outside the group" (what a simple consumer
or ``AdminClient.alterConsumerGroupOffsets`` sends): generation ``-1`` and an
empty member id, to the group's coordinator found with FindCoordinator.  It is
spoken with the generated stubs directly, so it needs no group membership and
no heartbeat thread in the driver.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from headwater import errors
from headwater.client import connection
from headwater.client.metadata import MetadataManager
from headwater.client.retry import RetryPolicy
from headwater.client.types import TopicPartition
from headwater.v1 import group_pb2, group_pb2_grpc

_REQUEST_TIMEOUT_MS = 30000


def _coordinator(
    group_id: str,
    *,
    bootstrap_servers: tuple[str, ...],
    channels: connection.Channels,
    metadata: MetadataManager,
) -> str:
    known = [b.address for b in metadata.current.brokers.values()]
    random.shuffle(known)
    last: errors.HeadwaterError | None = None
    for address in [*known, *(a for a in bootstrap_servers if a not in known)]:
        try:
            resp = connection.call(
                group_pb2_grpc.GroupStub(channels.channel(address)).FindCoordinator,
                group_pb2.FindCoordinatorRequest(key=group_id, key_type=0),
                address=address,
                timeout_ms=_REQUEST_TIMEOUT_MS,
            )
        except errors.HeadwaterError as exc:
            if not exc.retriable:
                raise
            last = exc
            continue
        if resp.error_code:
            raise errors.for_code(resp.error_code, resp.error_message or f"group {group_id!r}")
        return f"{resp.host}:{resp.port}"
    raise last or errors.NetworkError("no broker to ask for the group coordinator")


def commit_offsets(
    group_id: str,
    positions: Mapping[TopicPartition, int],
    *,
    bootstrap_servers: tuple[str, ...],
    channels: connection.Channels,
    metadata: MetadataManager,
    retry: RetryPolicy,
    timeout_ms: float,
) -> None:
    """Commit ``{tp: next offset to read}`` for ``group_id``; retries coordinator moves."""
    request = group_pb2.OffsetCommitRequest(
        group_id=group_id,
        generation_id=-1,
        member_id="",
        retention_time_ms=-1,
        partitions=[
            group_pb2.OffsetCommitRequestPartition(
                topic=tp.topic,
                partition_index=tp.partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata="spark",
            )
            for tp, offset in sorted(positions.items())
        ],
    )

    def attempt() -> None:
        address = _coordinator(
            group_id, bootstrap_servers=bootstrap_servers, channels=channels, metadata=metadata
        )
        resp = connection.call(
            group_pb2_grpc.GroupStub(channels.channel(address)).OffsetCommit,
            request,
            address=address,
            timeout_ms=_REQUEST_TIMEOUT_MS,
        )
        if resp.error_code:
            raise errors.for_code(resp.error_code, resp.error_message or f"group {group_id!r}")
        for p in resp.partitions:
            if p.error_code:
                raise errors.for_code(
                    p.error_code, f"committing {p.topic}-{p.partition_index} for {group_id!r}"
                )

    retry.call(attempt, timeout_ms=timeout_ms, on_retry=lambda _e: metadata.request_update())
