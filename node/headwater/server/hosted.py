"""What the broker runtime holds per hosted partition, and the values its operations return.

Split from :mod:`headwater.server.replica_manager` so the services and the
replica fetcher can name results without importing the manager's internals.
Only the :class:`~headwater.server.replica_manager.ReplicaManager` creates or
mutates a :class:`HostedPartition`; everyone else goes through the manager.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.replication import Partition, TopicPartition
from headwater.replication.producer_state import ProducerStateManager
from headwater.server.metrics import PartitionSnapshot
from headwater.storage import Log


def monotonic_ms() -> float:
    return time.monotonic() * 1000.0


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class ProduceResult(NamedTuple):
    topic_partition: TopicPartition
    error: ErrorCode
    message: str = ""
    base_offset: int = -1
    log_start_offset: int = -1
    log_append_time_ms: int = -1


class FetchSpec(NamedTuple):
    topic_partition: TopicPartition
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int


class FetchResult(NamedTuple):
    topic_partition: TopicPartition
    error: ErrorCode
    message: str = ""
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes = b""


@dataclasses.dataclass(eq=False)
class HostedPartition:
    """A partition on this broker: its state machine, its log and who waits on it."""

    state: Partition
    log: Log
    watchers: set[asyncio.Event] = dataclasses.field(default_factory=set)
    producers: ProducerStateManager = dataclasses.field(default_factory=ProducerStateManager)
    """Idempotent producers' state; rebuilt from the log on becoming leader."""

    def snapshot(self) -> PartitionSnapshot:
        """This partition's figures for the metrics scrape."""
        st = self.state
        try:
            size = int(self.log.size_in_bytes)
        except Exception:  # a metric must never break a scrape
            size = 0
        tp = st.topic_partition
        return PartitionSnapshot(
            tp.topic,
            tp.partition,
            st.is_leader,
            st.is_under_replicated,
            st.leader_id is None or st.leader_id < 0,
            size,
        )

    def wake(self) -> None:
        for event in self.watchers:
            event.set()


def assign_epoch(plog: Log, epoch: int, start_offset: int) -> None:
    """Record ``epoch`` starting at ``start_offset`` in the log's leader-epoch cache."""
    if epoch > plog.latest_epoch:
        plog.epoch_cache.assign(epoch, start_offset)
