"""The group coordinator wired to this broker: its log, its leaderships, its metrics.

:class:`headwater.groups.coordinator_runtime.GroupCoordinatorRuntime` knows nothing of the
broker: it appends and reads ``__consumer_offsets`` through two callables and is
told when this broker gains or loses the leadership of one of that topic's
partitions.  This module supplies both from the
:class:`~headwater.server.runtime.replica_manager.ReplicaManager`, the only owner
of the logs, and exports the groups' figures to Prometheus:

- :func:`replica_callables`: append as leader with ``acks=all``, read local batches;
- :func:`group_coordinator`: the runtime with the broker's group settings;
- :class:`OffsetsLeadership`: leaderships of ``__consumer_offsets`` become loads and
  unloads of the coordinator's partitions;
- :func:`group_end_offsets` and :func:`register_group_metrics`: committed offsets,
  lag and rebalances, read at scrape time (remote end offsets are refreshed by the
  periodic scheduler, see :mod:`headwater.server.group_lag`).

Thread model: event loop only, except the metrics callbacks, which the scrape calls
from the metrics thread and which only read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from headwater import errors
from headwater.errors import ErrorCode
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.placement import OFFSETS_TOPIC
from headwater.groups.values import GroupConfig
from headwater.server.config import BrokerConfig
from headwater.server.group_lag import RemoteEndOffsets, list_latest
from headwater.server.metrics import BrokerMetrics, GroupOffset, RebalanceFigures
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.runtime.role_changes import CoordinatorLeadership
from headwater.values import TopicPartition

OFFSETS_APPEND_TIMEOUT_MS = 5000
"""Kafka's ``offsets.commit.timeout.ms``: how long an offsets append waits for the ISR."""

OFFSETS_READ_MAX_BYTES = 4 << 20
"""How much of ``__consumer_offsets`` one read returns while a partition loads."""


def replica_callables(
    replicas: ReplicaManager, *, timeout_ms: int = OFFSETS_APPEND_TIMEOUT_MS
) -> tuple[Callable[[int, bytes], Awaitable[None]], Callable[[int, int], Awaitable[bytes]]]:
    """``(append, read)`` for :class:`GroupCoordinatorRuntime` over the broker's replicas."""

    async def append(partition: int, data: bytes) -> None:
        (result,) = await replicas.append_records(
            acks=-1,
            timeout_ms=timeout_ms,
            entries=[(TopicPartition(OFFSETS_TOPIC, partition), data)],
            from_coordinator=True,
        )
        if result.error is not ErrorCode.NONE:
            raise errors.for_code(result.error, result.message)

    async def read(partition: int, offset: int) -> bytes:
        return replicas.read_local(
            TopicPartition(OFFSETS_TOPIC, partition), offset, OFFSETS_READ_MAX_BYTES
        )

    return append, read


def group_coordinator(
    config: BrokerConfig,
    replicas: ReplicaManager,
    *,
    partition_counts: Callable[[], Mapping[str, int]] = dict,
) -> GroupCoordinatorRuntime:
    """The group coordinator runtime over ``replicas``, with the broker's group settings;
    ``partition_counts`` (from the metadata cache) feeds consumer-protocol assignors."""
    append, read = replica_callables(replicas, timeout_ms=config.offsets_commit_timeout_ms)
    return GroupCoordinatorRuntime(
        num_partitions=config.offsets_topic_num_partitions,
        append=append,
        read=read,
        partition_counts=partition_counts,
        config=GroupConfig(
            group_min_session_timeout_ms=config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            group_max_size=config.group_max_size,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_assignors=config.consumer_assignors,
            consumer_max_size=config.group_consumer_max_size,
            consumer_migration_policy=config.group_consumer_migration_policy.strip().lower(),
        ),
    )


class OffsetsLeadership(CoordinatorLeadership):
    """Follows this broker's leaderships of ``__consumer_offsets`` for the coordinator."""

    def __init__(self, runtime: GroupCoordinatorRuntime) -> None:
        super().__init__(OFFSETS_TOPIC, runtime)


def group_end_offsets(
    runtime: GroupCoordinatorRuntime,
    *,
    replicas: ReplicaManager,
    leader_address: Callable[[TopicPartition], str | None],
    timeout_ms: int,
) -> RemoteEndOffsets:
    """End offsets of the committed partitions not hosted here, asked of their leaders."""
    return RemoteEndOffsets(
        wanted=lambda: [
            tp
            for tp in {
                TopicPartition(t.topic, t.partition) for _, t, _ in runtime.committed_offsets()
            }
            if tp not in replicas.hosted_partitions()
        ],
        leader_address=leader_address,
        ask=list_latest(timeout_s=timeout_ms / 1000.0),
    )


def register_group_metrics(
    metrics: BrokerMetrics,
    runtime: GroupCoordinatorRuntime,
    *,
    replicas: ReplicaManager,
    remote: RemoteEndOffsets,
) -> None:
    """Export committed offsets, lag (local high watermark, else the remote end offset)
    and rebalance figures of the groups this broker coordinates."""

    def end_offset(topic: str, partition: int) -> int | None:
        tp = TopicPartition(topic, partition)
        local = replicas.high_watermark(tp)
        return local if local is not None else remote.get(tp)

    metrics.register_groups(
        committed=lambda: [
            GroupOffset(group, tp.topic, tp.partition, offset)
            for group, tp, offset in runtime.committed_offsets()
        ],
        end_offset=end_offset,
        rebalances=lambda: {
            group: RebalanceFigures(*figures)
            for group, figures in runtime.rebalance_stats().items()
        },
    )
