"""Offset look-ups by time (Kafka's ListOffsets), shared by the consumer and the admin.

``-2`` asks for the earliest offset, ``-1`` for the latest (the high
watermark), any other value for the first offset whose timestamp is at or
after it.  Requests go to each partition's leader, grouped by broker; leader
changes and lost connections are retried with the client's
:class:`~headwater.retry.RetryPolicy` after a metadata refresh.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from headwater import errors
from headwater.client.transport import connection
from headwater.client.transport.metadata import MetadataManager
from headwater.client.types import OffsetAndTimestamp, TopicPartition
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


def list_offsets(
    query: Mapping[TopicPartition, int],
    *,
    metadata: MetadataManager,
    channels: connection.Channels,
    retry: RetryPolicy,
    request_timeout_ms: float,
    timeout_ms: float,
    read_committed: bool = False,
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """Look up ``{tp: timestamp}``; a partition with no matching record maps to None.
    ``read_committed``: the latest offset is the last stable offset, not the high
    watermark (Kafka's ``isolation.level``)."""
    remaining = dict(query)
    found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    metadata.add_topics({tp.topic for tp in query})

    def attempt() -> None:
        metadata.maybe_refresh()
        if any(metadata.current.partition(tp) is None for tp in remaining):
            metadata.fetch(sorted({tp.topic for tp in remaining}))
        meta = metadata.current
        by_leader: dict[str, list[TopicPartition]] = defaultdict(list)
        retriable: errors.HeadwaterError | None = None
        for tp in remaining:
            if meta.partition(tp) is None:
                code = meta.topic_errors.get(tp.topic, errors.ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                raise errors.for_code(code, f"partition {tp}")
            leader = meta.leader(tp)
            if leader is None:
                retriable = errors.LeaderNotAvailableError(f"no leader for {tp}")
                continue
            by_leader[leader.address].append(tp)
        for address, tps in by_leader.items():
            request = broker_pb2.ListOffsetsRequest(
                replica_id=-1,
                isolation_level=(
                    broker_pb2.READ_COMMITTED if read_committed else broker_pb2.READ_UNCOMMITTED
                ),
                partitions=[
                    broker_pb2.ListOffsetsPartition(
                        topic=tp.topic,
                        partition=tp.partition,
                        timestamp=remaining[tp],
                        current_leader_epoch=-1,
                    )
                    for tp in tps
                ],
            )
            try:
                resp = connection.call(
                    channels.broker(address).ListOffsets,
                    request,
                    address=address,
                    timeout_ms=request_timeout_ms,
                )
            except errors.HeadwaterError as exc:
                if not exc.retriable:
                    raise
                retriable = exc
                continue
            for p in resp.partitions:
                tp = TopicPartition(p.topic, p.partition)
                if tp not in remaining:
                    continue
                if p.error:
                    err = errors.for_code(p.error, p.error_message or f"offsets of {tp}")
                    if not err.retriable:
                        raise err
                    retriable = err
                    continue
                found[tp] = OffsetAndTimestamp(p.offset, p.timestamp) if p.offset >= 0 else None
                del remaining[tp]
        if remaining:
            raise retriable or errors.UnknownServerError(
                f"no answer for {', '.join(map(str, remaining))}"
            )

    retry.call(attempt, timeout_ms=timeout_ms, on_retry=lambda _exc: metadata.request_update())
    return found
