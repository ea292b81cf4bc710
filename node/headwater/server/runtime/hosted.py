"""What the broker runtime holds per hosted partition, and the values its operations return.

Split from :mod:`headwater.server.runtime.replica_manager` so the services and the
replica fetcher can name results without importing the manager's internals.
Only the :class:`~headwater.server.runtime.replica_manager.ReplicaManager` creates,
reads or mutates a :class:`HostedPartition` (and so its ``Log``); everyone
else goes through the manager's operations.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import NamedTuple

from headwater import errors
from headwater.clock import wall_ms as wall_ms  # for server/app.py; import headwater.clock
from headwater.errors import ErrorCode
from headwater.records import HEADER_SIZE, parse_header
from headwater.replication import Partition
from headwater.replication.follower import LocalLog, StartAt, TruncateTo
from headwater.replication.producer_state import ProducerStateManager
from headwater.server.metrics import PartitionSnapshot
from headwater.storage import Log
from headwater.storage.transactions import PartitionTransactions
from headwater.values import TopicPartition

_log = logging.getLogger(__name__)


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
    last_stable_offset: int = -1
    """-1: the high watermark (no transaction is open, or the result is an error)."""
    aborted: tuple[tuple[int, int], ...] = ()
    """READ_COMMITTED: ``(producer id, first offset)`` of the aborts the range overlaps."""


class ActiveProducer(NamedTuple):
    """One producer of a partition, as DescribeProducers answers (Kafka's fields)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    current_txn_start_offset: int
    """-1: no transaction of this producer is open in the partition."""
    last_timestamp: int = -1
    """The max timestamp of the producer's last batch here (-1: unknown)."""


class OffsetLookup(NamedTuple):
    topic_partition: TopicPartition
    error: ErrorCode
    message: str = ""
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


LATEST_TIMESTAMP = -1
"""ListOffsets' timestamp for "the end" (the HW for consumers, the LEO for replicas)."""
EARLIEST_TIMESTAMP = -2
"""ListOffsets' timestamp for "the beginning" (the log start offset)."""


class RoleChanges(NamedTuple):
    """A decision of one LeaderAndIsr or StopReplica for the replica fetchers and the
    group coordinator; :class:`~headwater.server.runtime.role_changes.RoleChangeApplier`
    applies it, in field order."""

    unfollow: list[TopicPartition]
    """Partitions whose replica fetcher must stop (became leader, or stopped)."""
    leadership: list[tuple[TopicPartition, int | None]]
    """``(partition, leader epoch)`` when leading, ``None`` when not, in request order."""
    follow: dict[TopicPartition, tuple[int, int]]
    """Partitions to fetch: ``(leader id, leader epoch)``."""


class RoleChangeResult(NamedTuple):
    """What a LeaderAndIsr or StopReplica did: the request's error, each partition's
    error, and the :class:`RoleChanges` the caller must apply next (empty if refused)."""

    error: ErrorCode
    partitions: list[tuple[TopicPartition, ErrorCode]]
    changes: RoleChanges


@dataclasses.dataclass(eq=False)
class HostedPartition:
    """A partition on this broker: its state machine, its log and who waits on it."""

    state: Partition
    log: Log
    watchers: set[asyncio.Event] = dataclasses.field(default_factory=set)
    """Consumers' long-polling fetches: woken by :meth:`wake` and by
    :meth:`wake_consumers` (they read up to the high watermark, so a move of it is news)."""
    replica_watchers: set[asyncio.Event] = dataclasses.field(default_factory=set)
    """Followers' long-polling fetches: woken by :meth:`wake` only.  A follower reads up
    to the log end, so a high watermark move alone gives it nothing to return; it learns
    the new high watermark with its next answer, as Kafka's followers do."""
    producers: ProducerStateManager = dataclasses.field(default_factory=ProducerStateManager)
    """Idempotent producers' state; rebuilt from the log on becoming leader."""
    transactions: PartitionTransactions = dataclasses.field(default_factory=PartitionTransactions)
    """Open transactions and transactional producers' epochs; rebuilt on becoming leader."""
    snapshot_segment: int = -1
    """The active segment when the leader last loaded or wrote the producer snapshot:
    a new one (the log rolled) means a new snapshot is due."""

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

    def list_offset(self, *, timestamp: int, replica_id: int) -> OffsetLookup:
        """ListOffsets on this (leader) replica; consumers see only below the HW."""
        tp, state = self.state.topic_partition, self.state
        try:
            found = self.log.fetch_offset_by_timestamp(timestamp)
        except errors.HeadwaterError as exc:
            return OffsetLookup(tp, exc.code, errors.message_of(exc))
        if timestamp == LATEST_TIMESTAMP and replica_id < 0:
            return OffsetLookup(
                tp, ErrorCode.NONE, "", -1, state.high_watermark, state.leader_epoch
            )
        # Consumers see below the HW, except the log start offset (Kafka answers an empty
        # partition's EARLIEST with it).
        if found is None or (
            replica_id < 0
            and timestamp != EARLIEST_TIMESTAMP
            and found.offset >= state.high_watermark
        ):
            return OffsetLookup(tp, ErrorCode.NONE, "", -1, -1, -1)
        return OffsetLookup(
            tp, ErrorCode.NONE, "", found.timestamp, found.offset, found.leader_epoch
        )

    def active_producers(self) -> list[ActiveProducer]:
        """The idempotent and transactional producers this leader knows, by producer id."""
        txns = self.transactions
        out: dict[int, ActiveProducer] = {
            pid: ActiveProducer(pid, epoch, -1, txns.open.get(pid, -1))
            for pid, epoch in txns.epochs.items()
        }
        for pid, entry in self.producers.entries():
            epoch = max(entry.producer_epoch, txns.epochs.get(pid, entry.producer_epoch))
            last = self._batch_timestamp(entry.batches[-1].base_offset) if entry.batches else -1
            out[pid] = ActiveProducer(pid, epoch, entry.last_sequence, txns.open.get(pid, -1), last)
        return [out[pid] for pid in sorted(out)]

    def _batch_timestamp(self, offset: int) -> int:
        """The max timestamp of the batch at ``offset`` (-1: no longer in the log)."""
        try:
            data = self.log.read(offset, 1).records
            return parse_header(bytes(data[:HEADER_SIZE]), 0).max_timestamp if data else -1
        except (OSError, errors.HeadwaterError):
            return -1

    def refuse_fetch(self, spec: FetchSpec, *, broker_id: int) -> FetchResult | None:
        """The answer to ``spec`` if this replica cannot serve it as leader, else None."""
        tp, state = spec.topic_partition, self.state
        if not state.is_leader:
            return FetchResult(
                tp,
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {broker_id} is not the leader of {tp}",
            )
        epoch_error = state.check_fetch_epoch(spec.current_leader_epoch)
        if epoch_error is not ErrorCode.NONE:
            return FetchResult(
                tp,
                epoch_error,
                f"leader epoch {spec.current_leader_epoch} vs current {state.leader_epoch}",
            )
        start, end = self.log.log_start_offset, self.log.log_end_offset
        if spec.fetch_offset < start or spec.fetch_offset > end:
            return FetchResult(
                tp,
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {spec.fetch_offset} is outside [{start}, {end}] of {tp}",
                state.high_watermark,
                start,
                end,
            )
        return None

    def read_for_fetch(
        self, spec: FetchSpec, *, limit: int, max_offset: int | None, min_one_batch: bool
    ) -> FetchResult:
        """Batches from ``spec.fetch_offset``: up to ``limit`` bytes (but at least one
        batch with ``min_one_batch``), none at or past ``max_offset``."""
        tp, state, plog = spec.topic_partition, self.state, self.log
        start, end = plog.log_start_offset, plog.log_end_offset
        records = b""
        if (
            spec.fetch_offset < end
            and (max_offset is None or spec.fetch_offset < max_offset)
            and (limit > 0 or min_one_batch)
        ):  # a caught-up fetch (at the log end) has nothing to read
            try:
                info = plog.read(
                    spec.fetch_offset, limit, max_offset=max_offset, min_one_batch=min_one_batch
                )
            except errors.HeadwaterError as exc:
                return FetchResult(
                    tp, exc.code, errors.message_of(exc), state.high_watermark, start, end
                )
            records = bytes(info.records)
        return FetchResult(
            tp, ErrorCode.NONE, "", state.high_watermark, plog.log_start_offset, end, records
        )

    def read_local(self, offset: int, max_bytes: int) -> bytes:
        """Stored batches from ``offset`` (clamped to the log start), whatever the role."""
        start = max(offset, self.log.log_start_offset)
        if start >= self.log.log_end_offset:
            return b""
        return self.log.read(start, max_bytes).records

    # -- the high watermark: live in ``state``, mirrored into ``log`` here only -----------

    def sync_high_watermark(self) -> None:
        """Mirror the high watermark into the log: the only code that writes it there.

        ``Partition.high_watermark`` is the live value; ``Log.high_watermark``
        is its persisted copy (checkpoint file, cleaner bound), read back only
        when the partition becomes leader after a restart.
        """
        self.log.high_watermark = self.state.high_watermark

    # -- follower side ----------------------------------------------------------------------

    def local_log(self) -> LocalLog:
        plog = self.log
        return LocalLog(
            plog.log_start_offset, plog.log_end_offset, plog.high_watermark, plog.latest_epoch
        )

    def truncate_follower(self, decision: TruncateTo | StartAt) -> None:
        plog, tp = self.log, self.state.topic_partition
        if isinstance(decision, StartAt):
            _log.info("%s: restarting the log at %d", tp, decision.offset)
            plog.truncate_fully_and_start_at(decision.offset)
        elif decision.offset < plog.log_end_offset:
            _log.info("%s: truncating from %d to %d", tp, plog.log_end_offset, decision.offset)
            plog.truncate_to(decision.offset)
        else:
            return
        if self.state.on_follower_truncate(
            log_start_offset=plog.log_start_offset, log_end_offset=plog.log_end_offset
        ):
            self.sync_high_watermark()

    def append_as_follower(self, records: bytes, *, leader_high_watermark: int) -> None:
        if records:
            self.log.append_as_follower(records)
        if self.state.on_follower_append(
            log_end_offset=self.log.log_end_offset, leader_high_watermark=leader_high_watermark
        ):
            self.sync_high_watermark()

    def wake(self) -> None:
        """Every waiting fetch: records were appended, or the partition's role changed."""
        for event in self.watchers:
            event.set()
        for event in self.replica_watchers:
            event.set()

    def wake_consumers(self) -> None:
        """The consumers' waiting fetches only: the high watermark moved."""
        for event in self.watchers:
            event.set()


def assign_epoch(plog: Log, epoch: int, start_offset: int) -> None:
    """Record ``epoch`` starting at ``start_offset`` in the log's leader-epoch cache."""
    if epoch > plog.latest_epoch:
        plog.epoch_cache.assign(epoch, start_offset)
