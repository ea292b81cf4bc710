"""ReplicaManager: the asyncio runtime around the replication state machines.

It owns, for every partition hosted on this broker, the pure
:class:`headwater.replication.Partition` and the storage ``Log``, and turns
their decisions into actions: appends, ISR writes to ZooKeeper (in a worker
thread), completing delayed ``acks=all`` produces and waking long-poll fetches.

Waiting is event driven (docs/design.md, "Fetch is a long poll"): a waiting fetch
registers an :class:`asyncio.Event` with each partition it reads; an append, a
high-watermark advance or a role change sets those events.  A delayed produce
is an :class:`asyncio.Future` resolved when the partition reports completion.
Role changes (LeaderAndIsr, StopReplica) return a
:class:`~headwater.server.runtime.hosted.RoleChanges` decision for the replica
fetchers and the group coordinator, which the caller applies.  The periodic
scheduler runs the ISR-shrink check (:meth:`maybe_shrink_isrs`, every half
``replica.lag.time.max.ms``, as in Kafka) and the log maintenance over every log
on disk (:meth:`run_log_tasks`, :meth:`clean_logs`): nothing else reaches a log.

Thread model: every method runs on the broker's event loop.  Log calls are
synchronous and short (page-cache writes); what waits on a disk or on ZooKeeper goes
to a worker thread (:func:`headwater.server.runtime.offload.run_blocking`): ISR
writes, the opening of a LeaderAndIsr's new logs with their leader-epoch checkpoints
(:meth:`prepare_partitions`, before the decision that makes them hosted) and the
producer snapshot at a roll (after it is taken on the loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Set
from typing import Any, NamedTuple

from headwater import errors
from headwater.clock import monotonic_ms, wall_ms
from headwater.coordination import names
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.errors import ErrorCode
from headwater.records import parse_header
from headwater.records.control import EndTransactionMarker
from headwater.records.header import BatchHeader
from headwater.replication import FetchWait, IsrChange, Partition, ProduceCompletion
from headwater.replication.follower import LocalLog, StartAt, TruncateTo
from headwater.replication.producer_state import ProducerBatch, Verdict
from headwater.server.metrics import BrokerMetrics, PartitionSnapshot
from headwater.server.runtime import idempotence, txn_log
from headwater.server.runtime.hosted import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ActiveProducer,
    FetchResult,
    FetchSpec,
    HostedPartition,
    OffsetLookup,
    ProduceResult,
    RoleChangeResult,
    RoleChanges,
    assign_epoch,
)
from headwater.server.runtime.isr_store import IsrStore
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.replication_quotas import ReplicationQuotas
from headwater.server.runtime.topic_configs import TopicConfigs
from headwater.storage import Log, LogConfig, LogManager
from headwater.storage.cleaner import CleanerStats, LogCleaner
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

VerifyTransaction = Callable[[str, int, int, TopicPartition], Awaitable[ErrorCode]]
"""``verify(transactional_id, producer_id, producer_epoch, partition)``: the transaction
coordinator's answer whether ``partition`` is in the producer's open transaction (KIP-890)."""

READ_COMMITTED = 1
"""Kafka's ``IsolationLevel.READ_COMMITTED``: consumers read up to the last stable offset."""


class _Prepared(NamedTuple):
    """A partition :meth:`ReplicaManager.prepare_partitions` opened, not hosted yet."""

    state: PartitionState
    """The LeaderAndIsr state it was prepared for: only that one may take it."""
    hosted: HostedPartition
    loaded: txn_log.LoadedState | None
    """Its producer state, loaded (it is to lead); None for a follower."""


def _unverified(_tid: str, _pid: int, _epoch: int, _tp: TopicPartition) -> Awaitable[ErrorCode]:
    future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
    future.set_result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return future


class ReplicaManager:
    """Hosted partitions and the produce/fetch/role-change paths (see module docstring)."""

    def __init__(
        self,
        *,
        broker_id: int,
        log_manager: LogManager,
        isr_store: IsrStore,
        metrics: BrokerMetrics,
        min_insync_replicas: int,
        replica_lag_time_max_ms: int,
        default_log_properties: Mapping[str, str],
        is_known_partition: Callable[[TopicPartition], bool],
        clock_ms: Callable[[], float] = monotonic_ms,
    ) -> None:
        self.broker_id = broker_id
        self._clock_ms = clock_ms
        self._log_manager = log_manager
        self._isr_store = isr_store
        self._metrics = metrics
        self._min_isr = min_insync_replicas
        self._lag_ms = replica_lag_time_max_ms
        self._is_known = is_known_partition
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        self.controller_epoch = -1
        self._produce_ids = itertools.count(1)
        self._waiting_produces: dict[int, asyncio.Future[ErrorCode]] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._prepared: dict[TopicPartition, _Prepared] = {}
        """What :meth:`prepare_partitions` opened for the next :meth:`become_leader_or_follower`."""
        self.stopped = False
        """Set by :meth:`shutdown`: the broker is stopping (its Fetch streams end)."""
        self._configs = TopicConfigs(
            store=isr_store,
            default_properties=default_log_properties,
            on_change=self._apply_log_config,
        )
        self.quotas = ReplicationQuotas(broker_id=broker_id, clock=clock_ms)
        """Replication throttles (KIP-73); the fetcher uses the follower half."""
        self.verify_transaction: VerifyTransaction = _unverified
        """Set by the broker once its transaction coordinator exists."""
        self.add_to_transaction: VerifyTransaction = _unverified
        """The coordinator adds a partition to the producer's transaction (transaction
        version 2, KIP-890 part 2); set with :attr:`verify_transaction`."""
        self.on_marker_written: Callable[[TopicPartition, EndTransactionMarker], None] = (
            lambda _tp, _marker: None
        )
        """Told of every marker written and acknowledged by the ISR (the group
        coordinator completes a transaction's offsets in ``__consumer_offsets``)."""

    # -- helpers ----------------------------------------------------------------------------

    def missing_error(self, tp: TopicPartition) -> ErrorCode:
        """The error for a partition not hosted here: known elsewhere or unknown."""
        return (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self._is_known(tp)
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _apply_completions(self, completions: Iterable[ProduceCompletion]) -> None:
        for completion in completions:
            future = self._waiting_produces.pop(completion.produce_id, None)
            if future is not None and not future.done():
                future.set_result(completion.error)

    def _high_watermark_moved(
        self, hosted: HostedPartition, *, wake_followers: bool = True
    ) -> None:
        """Syncs the log's high watermark, answers the acks=all produces it covers and wakes
        the waiting fetches.  ``wake_followers=False`` when only the high watermark moved
        (a follower's fetch advanced it): the followers' waiting fetches, which read up to
        the log end, then stay asleep (:attr:`HostedPartition.replica_watchers`)."""
        hosted.sync_high_watermark()
        self._apply_completions(hosted.state.complete_delayed_produces())
        if wake_followers:
            hosted.wake()
        else:
            hosted.wake_consumers()

    def snapshots(self) -> list[PartitionSnapshot]:
        return [hosted.snapshot() for hosted in self.partitions.values()]

    def hosted_partitions(self) -> Set[TopicPartition]:
        """The partitions hosted here (a live, read-only view)."""
        return self.partitions.keys()

    # -- produce ----------------------------------------------------------------------------

    async def append_records(
        self,
        *,
        acks: int,
        timeout_ms: int,
        entries: Sequence[tuple[TopicPartition, bytes]],
        transactional_id: str = "",
        markers: Mapping[TopicPartition, EndTransactionMarker] | None = None,
        from_coordinator: bool = False,
        add_to_transaction: bool = False,
    ) -> list[ProduceResult]:
        """Validate, append and (for acks=-1) wait for the ISR; one result per entry.

        ``markers``: the transaction coordinator's WriteTxnMarkers; each entry's bytes are
        then the control batch of its marker (see :meth:`write_txn_markers`).  A client's
        transactional batch that opens a transaction in a partition is first verified
        with the coordinator of ``transactional_id`` (KIP-890).  ``from_coordinator``:
        the group coordinator's own appends to ``__consumer_offsets`` (a TxnOffsetCommit
        is a transactional batch the transaction coordinator already knows of; Kafka's
        ``AppendOrigin.COORDINATOR``): no verification, no sequence numbers.
        ``add_to_transaction``: a transaction version 2 producer's batch (Produce v12+):
        the coordinator adds the partition to the transaction, opening one if none is
        open, instead of only confirming an earlier AddPartitionsToTxn.
        """
        if acks not in (0, 1, -1):
            return [
                ProduceResult(tp, ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not 0, 1 or -1")
                for tp, _ in entries
            ]
        results: list[ProduceResult] = []
        waits: list[tuple[int, int, asyncio.Future[ErrorCode]]] = []
        loop = asyncio.get_running_loop()
        verdicts: list[tuple[ProduceResult | None, bool]] = [(None, False)] * len(entries)
        if transactional_id:
            # The coordinator is asked about every partition of the request at once:
            # one round trip for all of them, not one after another.
            asks = [
                (i, tp, header)
                for i, (tp, records) in enumerate(entries)
                if (markers is None or tp not in markers)
                and (header := self._unverified_header(tp, records)) is not None
            ]
            if asks:
                answers = await asyncio.gather(
                    *(
                        self._verify_transactional(
                            tp, header, transactional_id, add=add_to_transaction
                        )
                        for _, tp, header in asks
                    )
                )
                for (i, _, _), answer in zip(asks, answers, strict=True):
                    verdicts[i] = answer
        for (tp, records), (refused, verified) in zip(entries, verdicts, strict=True):
            marker = markers.get(tp) if markers is not None else None
            if refused is not None:
                results.append(refused)
                continue
            result, produce_id = self._append_one(
                tp,
                records,
                acks=acks,
                marker=marker,
                verified=verified,
                from_coordinator=from_coordinator,
            )
            if produce_id is not None:
                future: asyncio.Future[ErrorCode] = loop.create_future()
                self._waiting_produces[produce_id] = future
                hosted = self.partitions[tp]
                done = hosted.state.add_delayed_produce(
                    produce_id, required_offset=hosted.state.log_end_offset
                )
                if done is not None:
                    self._apply_completions([done])
                waits.append((len(results), produce_id, future))
            results.append(result)
        if waits:
            futures = [f for _, _, f in waits]
            await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000.0)
            for index, produce_id, future in waits:
                if not future.done():
                    hosted_tp = results[index].topic_partition
                    hosted_or_none = self.partitions.get(hosted_tp)
                    if hosted_or_none is not None:
                        hosted_or_none.state.expire_delayed_produce(produce_id)
                    self._waiting_produces.pop(produce_id, None)
                    future.cancel()
                    code = ErrorCode.REQUEST_TIMED_OUT
                else:
                    code = future.result()
                if code is not ErrorCode.NONE:
                    results[index] = results[index]._replace(
                        error=code, message="while waiting for the ISR to acknowledge"
                    )
        return results

    def _unverified_header(self, tp: TopicPartition, records: bytes) -> BatchHeader | None:
        """The header of a transactional batch that opens a transaction in ``tp`` here
        (the coordinator must confirm the partition first); None: nothing to ask."""
        hosted = self.partitions.get(tp)
        if hosted is None or not hosted.state.is_leader:
            return None
        found = txn_log.inspect(hosted.transactions, records)
        if not found.needs_verification or found.header is None:
            return None
        return found.header

    async def _verify_transactional(
        self, tp: TopicPartition, header: BatchHeader, transactional_id: str, *, add: bool = False
    ) -> tuple[ProduceResult | None, bool]:
        """The refusal of a transactional batch the coordinator has not added to an open
        transaction, and whether the coordinator confirmed it (:meth:`_append_one`
        checks everything again, and refuses an unconfirmed batch that opens one).
        ``add``: ask the coordinator to add the partition rather than to confirm it; a
        producer whose epoch an EndTxn has bumped since is refused either way."""
        ask = self.add_to_transaction if add else self.verify_transaction
        code = await ask(transactional_id, header.producer_id, header.producer_epoch, tp)
        if code is ErrorCode.NONE:
            return None, True
        if code is ErrorCode.PRODUCER_FENCED:
            code = ErrorCode.INVALID_PRODUCER_EPOCH
        return ProduceResult(
            tp, code, f"the transaction coordinator has not added {tp} to the transaction"
        ), False

    async def write_txn_markers(
        self, markers: Sequence[tuple[TopicPartition, EndTransactionMarker]], *, timeout_ms: int
    ) -> list[ProduceResult]:
        """Append each marker's control batch as leader and wait for the ISR (acks=all)."""
        now = wall_ms()
        results = await self.append_records(
            acks=-1,
            timeout_ms=timeout_ms,
            entries=[(tp, txn_log.marker_batch(m, timestamp_ms=now)) for tp, m in markers],
            markers=dict(markers),
        )
        written = dict(markers)
        for r in results:
            if r.error is ErrorCode.NONE:
                self.on_marker_written(r.topic_partition, written[r.topic_partition])
        return results

    def _append_one(
        self,
        tp: TopicPartition,
        records: bytes,
        *,
        acks: int,
        marker: EndTransactionMarker | None = None,
        verified: bool = False,
        from_coordinator: bool = False,
    ) -> tuple[ProduceResult, int | None]:
        hosted = self.partitions.get(tp)
        if hosted is None:
            code = self.missing_error(tp)
            return ProduceResult(tp, code, f"{tp} is not led by this broker"), None
        state = hosted.state
        admission = state.check_produce(acks)
        if admission is not ErrorCode.NONE:
            why = (
                f"ISR {list(state.isr)} is smaller than min.insync.replicas="
                f"{state.min_insync_replicas}"
                if admission is ErrorCode.NOT_ENOUGH_REPLICAS
                else f"broker {self.broker_id} is not the leader of {tp}"
            )
            return ProduceResult(tp, admission, why), None
        if marker is not None:
            code = txn_log.check_marker(hosted.transactions, marker)
            if code is not ErrorCode.NONE:
                return ProduceResult(tp, code, "a newer epoch was written here"), None
            already = txn_log.written_marker(hosted.transactions, marker)
            if already is not None:  # a retry: answer once the first copy is replicated
                result = ProduceResult(
                    tp,
                    ErrorCode.NONE,
                    base_offset=already,
                    log_start_offset=hosted.log.log_start_offset,
                )
                return result, (next(self._produce_ids) if acks == -1 else None)
            return self._append_checked(tp, hosted, records, acks, None, marker)
        found = txn_log.inspect(hosted.transactions, records)
        if found.error is not ErrorCode.NONE:
            return ProduceResult(tp, found.error, found.message), None
        if from_coordinator:
            header = (
                found.header if found.header is not None and found.header.is_transactional else None
            )
            return self._append_checked(tp, hosted, records, acks, None, None, header)
        check, producer_batch = idempotence.check_produce(hosted.producers, records)
        if check.verdict is Verdict.REFUSE:
            return ProduceResult(tp, check.error, check.message), None
        if found.needs_verification and not verified:
            return ProduceResult(
                tp,
                ErrorCode.INVALID_TXN_STATE,
                "a transactional batch opening a transaction needs its transactional id",
            ), None
        if check.duplicate_of is not None:  # a retry of an appended batch: answer, don't append
            result = ProduceResult(
                tp,
                ErrorCode.NONE,
                base_offset=check.duplicate_of.base_offset,
                log_start_offset=hosted.log.log_start_offset,
            )
            return result, (next(self._produce_ids) if acks == -1 else None)
        header = (
            found.header if found.header is not None and found.header.is_transactional else None
        )
        return self._append_checked(tp, hosted, records, acks, producer_batch, None, header)

    def _append_checked(
        self,
        tp: TopicPartition,
        hosted: HostedPartition,
        records: bytes,
        acks: int,
        producer_batch: ProducerBatch | None,
        marker: EndTransactionMarker | None,
        transactional: BatchHeader | None = None,
    ) -> tuple[ProduceResult, int | None]:
        """Append what the checks let through; account for it in the producer and
        transaction state (``transactional``: the header of a client's transactional batch)."""
        state = hosted.state
        try:
            info = hosted.log.append_as_leader(
                records, leader_epoch=state.leader_epoch, now_ms=wall_ms()
            )
        except errors.HeadwaterError as exc:
            return ProduceResult(tp, exc.code, errors.message_of(exc)), None
        base_offset = int(info.first_offset)
        if producer_batch is not None:
            hosted.producers.update(producer_batch, base_offset=base_offset)
        if marker is not None or transactional is not None:
            header = transactional if transactional is not None else parse_header(records, 0)
            txn_log.appended(hosted.transactions, hosted.log, header, base_offset, marker)
        if hosted.log.active_base_offset != hosted.snapshot_segment:
            self._snapshot_in_background(hosted)
        self._metrics.bytes_in.labels(tp.topic).inc(len(records))
        self._metrics.messages_in.labels(tp.topic).inc(info.num_records)
        if state.on_leader_append(hosted.log.log_end_offset):
            self._high_watermark_moved(hosted)
        else:
            hosted.wake()
        result = ProduceResult(
            tp,
            ErrorCode.NONE,
            base_offset=base_offset,
            log_start_offset=hosted.log.log_start_offset,
            log_append_time_ms=info.log_append_time_ms,
        )
        return result, (next(self._produce_ids) if acks == -1 else None)

    # -- fetch -------------------------------------------------------------------------------

    async def fetch(
        self,
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        specs: Sequence[FetchSpec],
        may_join_isr: bool = True,
        isolation_level: int = 0,
    ) -> list[FetchResult]:
        """Read ``specs``, holding the call until ``min_bytes`` or ``max_wait_ms`` (long poll).

        ``may_join_isr``: False for a follower that is shutting down
        (:meth:`Partition.update_follower_fetch`).
        """
        wait = FetchWait.start(now_ms=monotonic_ms(), max_wait_ms=max_wait_ms, min_bytes=min_bytes)
        event = asyncio.Event()
        watched = [
            self.partitions[s.topic_partition]
            for s in specs
            if s.topic_partition in self.partitions
        ]
        for hosted in watched:
            (hosted.replica_watchers if replica_id >= 0 else hosted.watchers).add(event)
        try:
            while True:
                event.clear()
                results = self._read_all(
                    replica_id=replica_id,
                    max_bytes=max_bytes,
                    specs=specs,
                    may_join_isr=may_join_isr,
                    read_committed=isolation_level == READ_COMMITTED and replica_id < 0,
                )
                available = sum(len(r.records) for r in results)
                has_error = any(r.error is not ErrorCode.NONE for r in results)
                now = monotonic_ms()
                if wait.is_satisfied(available_bytes=available, has_error=has_error, now_ms=now):
                    break
                # asyncio.timeout, not wait_for: a cancellation that arrives as the event
                # is set must end the fetch (Python 3.11's wait_for returns instead).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait.remaining_ms(now) / 1000.0):
                        await event.wait()
        finally:
            for hosted in watched:
                (hosted.replica_watchers if replica_id >= 0 else hosted.watchers).discard(event)
        for r in results:
            if r.records:
                self._metrics.bytes_out.labels(r.topic_partition.topic).inc(len(r.records))
        return results

    def _read_all(
        self,
        *,
        replica_id: int,
        max_bytes: int,
        specs: Sequence[FetchSpec],
        may_join_isr: bool,
        read_committed: bool = False,
    ) -> list[FetchResult]:
        budget = max_bytes if max_bytes > 0 else 1 << 30
        out = []
        first = True
        now_ms = int(self._clock_ms())
        for spec in specs:
            result = self._read_one(
                spec,
                replica_id=replica_id,
                budget=budget,
                min_one_batch=first,
                may_join_isr=may_join_isr,
                read_committed=read_committed,
                now_ms=now_ms,
            )
            if result.records:
                budget = max(budget - len(result.records), 0)
                first = False
            out.append(result)
        return out

    def _read_one(
        self,
        spec: FetchSpec,
        *,
        replica_id: int,
        budget: int,
        min_one_batch: bool,
        may_join_isr: bool,
        read_committed: bool = False,
        now_ms: int,
    ) -> FetchResult:
        tp = spec.topic_partition
        hosted = self.partitions.get(tp)
        if hosted is None:
            code = self.missing_error(tp)
            return FetchResult(tp, code, f"{tp} is not hosted here")
        refused = hosted.refuse_fetch(spec, broker_id=self.broker_id)
        if refused is not None:
            return refused
        state = hosted.state
        if replica_id >= 0:
            outcome = state.update_follower_fetch(
                replica_id,
                fetch_offset=spec.fetch_offset,
                now_ms=now_ms,
                may_join_isr=may_join_isr,
            )
            if outcome.high_watermark_changed:
                self._high_watermark_moved(hosted, wake_followers=False)
            if outcome.isr_change is not None:
                self._spawn(self._write_isr(hosted, outcome.isr_change))
            plog = hosted.log
            end = plog.log_end_offset
            if spec.fetch_offset == end:  # caught up: nothing to read, throttle or count
                return FetchResult(
                    tp, ErrorCode.NONE, "", state.high_watermark, plog.log_start_offset, end
                )
        limit = min(spec.partition_max_bytes if spec.partition_max_bytes > 0 else budget, budget)
        max_offset = None if replica_id >= 0 else state.high_watermark
        txns = hosted.transactions
        if txns.open and max_offset is not None:
            stable = txns.last_stable_offset(max_offset, hosted.log.log_start_offset)
            if read_committed:
                max_offset = stable
        throttled = replica_id >= 0 and self.quotas.leader_throttled(
            hosted.log.config, partition=tp.partition, in_sync=replica_id in state.isr
        )
        if throttled:  # Kafka's shouldLeaderThrottle: an out-of-sync follower, a listed replica
            now = self._clock_ms()
            if self.quotas.leader.is_exceeded(now):
                limit, min_one_batch = 0, False
            else:
                limit = min(limit, max(self.quotas.leader.allowance(now), 1))
        result = hosted.read_for_fetch(
            spec, limit=limit, max_offset=max_offset, min_one_batch=min_one_batch
        )
        if throttled and result.records:
            self.quotas.leader.record(len(result.records), self._clock_ms())
            self._metrics.replication_throttled_bytes.labels("leader").inc(len(result.records))
        if read_committed and result.error is ErrorCode.NONE and max_offset is not None:
            aborted = hosted.log.collect_aborted(spec.fetch_offset, max_offset)
            result = result._replace(
                last_stable_offset=max_offset,
                aborted=tuple((a.producer_id, a.first_offset) for a in aborted),
            )
        elif txns.open and max_offset is not None:
            result = result._replace(last_stable_offset=stable)
        return result

    # -- follower side (the replica fetcher's operations) ----------------------------------

    def record_follower_throttled(self, nbytes: int) -> None:
        """Count bytes fetched for throttled partitions (the fetcher records the quota)."""
        self._metrics.replication_throttled_bytes.labels("follower").inc(nbytes)

    def local_log(self, tp: TopicPartition) -> LocalLog | None:
        """Where the local replica of ``tp`` stands, or None if it is not hosted here."""
        hosted = self.partitions.get(tp)
        return hosted.local_log() if hosted is not None else None

    def local_end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> int:
        """Where ``epoch`` ends in the local log (-1 if unknown or not hosted)."""
        hosted = self.partitions.get(tp)
        return hosted.log.end_offset_for_epoch(epoch)[1] if hosted is not None else -1

    def truncate_follower(self, tp: TopicPartition, decision: TruncateTo | StartAt) -> None:
        """Apply a follower truncation decision; the high watermark follows the new end."""
        hosted = self.partitions.get(tp)
        if hosted is not None:
            hosted.truncate_follower(decision)

    def append_as_follower(
        self, tp: TopicPartition, records: bytes, *, leader_high_watermark: int
    ) -> None:
        """Append fetched batches (may be empty) and follow the leader's high watermark.

        Raises :class:`headwater.errors.HeadwaterError` when the log refuses them.
        """
        hosted = self.partitions.get(tp)
        if hosted is not None:
            hosted.append_as_follower(records, leader_high_watermark=leader_high_watermark)

    def follow_log_start(self, tp: TopicPartition, leader_log_start_offset: int) -> None:
        """A follower's log start follows the leader's (DeleteRecords, retention), up to
        the follower's own log end; segments below it go with the next retention pass."""
        hosted = self.partitions.get(tp)
        if hosted is None or hosted.state.is_leader:
            return
        plog = hosted.log
        if leader_log_start_offset > plog.log_start_offset:
            plog.maybe_increment_log_start_offset(min(leader_log_start_offset, plog.log_end_offset))

    async def delete_records(self, tp: TopicPartition, offset: int) -> tuple[ErrorCode, int, str]:
        """Kafka's DeleteRecords on the leader: ``(error, low watermark, message)``.

        Moves the log start offset to ``offset`` (-1: the high watermark) and drops the
        whole segments below it.  Refused, changing nothing: a partition not led here
        (NOT_LEADER_OR_FOLLOWER), an internal topic (INVALID_TOPIC_EXCEPTION), a topic
        that does not delete (``cleanup.policy`` without ``delete``: POLICY_VIOLATION),
        an offset below -1 or above the high watermark (OFFSET_OUT_OF_RANGE).  The low
        watermark answered is the leader's new log start; followers follow it on their
        next fetch (Kafka waits for them, up to the request's timeout).
        """
        hosted, code, message = self._leader(tp, -1)
        if hosted is None:
            return code, -1, message
        if names.is_internal(tp.topic):
            return (
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                -1,
                f"Cannot delete records of internal topic {tp.topic}",
            )
        if not hosted.log.config.deletes:
            return (
                ErrorCode.POLICY_VIOLATION,
                -1,
                f"Records of partition {tp} can not be deleted due to the configured policy "
                f"(cleanup.policy={hosted.log.config.cleanup_policy})",
            )
        hw = hosted.state.high_watermark
        target = hw if offset == -1 else offset
        if target < 0 or target > hw:
            return (
                ErrorCode.OFFSET_OUT_OF_RANGE,
                -1,
                f"Cannot delete records of {tp} before offset {offset}: it is not between "
                f"0 and the high watermark {hw}",
            )
        low = await run_blocking(hosted.log.delete_records_before, target)
        return ErrorCode.NONE, low, ""

    # -- offsets and local reads (ListOffsets, OffsetsForLeaderEpoch, group loading) ---------

    def _leader(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> tuple[HostedPartition | None, ErrorCode, str]:
        """The hosted partition if this broker leads it in the given epoch, else an error."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            code = self.missing_error(tp)
            return None, code, f"{tp} is not hosted on broker {self.broker_id}"
        if not hosted.state.is_leader:
            return (
                None,
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.broker_id} does not lead {tp}",
            )
        code = hosted.state.check_fetch_epoch(current_leader_epoch)
        if code is not ErrorCode.NONE:
            return None, code, f"leader epoch {current_leader_epoch} vs {hosted.state.leader_epoch}"
        return hosted, ErrorCode.NONE, ""

    def list_offset(
        self,
        tp: TopicPartition,
        *,
        timestamp: int,
        current_leader_epoch: int,
        replica_id: int,
        isolation_level: int = 0,
    ) -> OffsetLookup:
        """Kafka's ListOffsets for one partition (consumers see only below the HW; a
        READ_COMMITTED consumer's latest offset is the last stable offset)."""
        hosted, code, message = self._leader(tp, current_leader_epoch)
        if hosted is None:
            return OffsetLookup(tp, code, message)
        found = hosted.list_offset(timestamp=timestamp, replica_id=replica_id)
        if (
            isolation_level == READ_COMMITTED
            and replica_id < 0
            and timestamp == LATEST_TIMESTAMP
            and found.error is ErrorCode.NONE
        ):
            lso = hosted.transactions.last_stable_offset(
                hosted.state.high_watermark, hosted.log.log_start_offset
            )
            return found._replace(offset=lso)
        if isolation_level == READ_COMMITTED and replica_id < 0 and found.offset >= 0:
            lso = hosted.transactions.last_stable_offset(
                hosted.state.high_watermark, hosted.log.log_start_offset
            )
            if found.offset >= lso and timestamp != EARLIEST_TIMESTAMP:
                return OffsetLookup(tp, ErrorCode.NONE, "", -1, -1, -1)
        return found

    def active_producers(self, tp: TopicPartition) -> tuple[ErrorCode, str, list[ActiveProducer]]:
        """DescribeProducers for one partition led here (Kafka's KIP-664)."""
        hosted, code, message = self._leader(tp, -1)
        if hosted is None:
            return code, message, []
        return ErrorCode.NONE, "", hosted.active_producers()

    def offset_for_leader_epoch(
        self, tp: TopicPartition, *, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, int, int]:
        """The end offset of ``leader_epoch`` on this leader: (error, epoch, end offset)."""
        hosted, code, _message = self._leader(tp, current_leader_epoch)
        if hosted is None:
            return code, -1, -1
        epoch, end = hosted.log.end_offset_for_epoch(leader_epoch)
        return ErrorCode.NONE, int(epoch), int(end)

    def read_local(self, tp: TopicPartition, offset: int, max_bytes: int) -> bytes:
        """Stored batches from ``offset`` whatever the role (the group coordinator loading
        ``__consumer_offsets``); raises NotLeaderOrFollowerError if ``tp`` is not hosted."""
        hosted = self.partitions.get(tp)
        if hosted is None:
            raise errors.NotLeaderOrFollowerError(f"{tp} is not here")
        return hosted.read_local(offset, max_bytes)

    def high_watermark(self, tp: TopicPartition) -> int | None:
        """The high watermark of a hosted partition, None if not hosted here."""
        hosted = self.partitions.get(tp)
        return hosted.state.high_watermark if hosted is not None else None

    # -- ISR maintenance --------------------------------------------------------------------

    async def _write_isr(self, hosted: HostedPartition, change: IsrChange) -> None:
        tp = change.topic_partition
        lai = LeaderAndIsr(
            leader=change.leader,
            leader_epoch=change.leader_epoch,
            isr=change.new_isr,
            controller_epoch=self.controller_epoch,
            zk_version=change.expected_zk_version,
        )
        try:
            version = await run_blocking(
                self._isr_store.update_isr, tp.topic, tp.partition, lai, change.expected_zk_version
            )
        except Exception as exc:
            log.warning("ISR update of %s failed: %s", tp, errors.describe(exc))
            version = None
        if version is None:
            log.info(
                "%s: ISR %s not written: znode version %d is stale",
                tp,
                list(change.new_isr),
                change.expected_zk_version,
            )
            hosted.state.isr_change_failed(change)
            return
        log.info("%s: ISR %s -> %s", tp, hosted.state.isr, list(change.new_isr))
        (self._metrics.isr_expands if change.is_expand else self._metrics.isr_shrinks).inc()
        if hosted.state.isr_change_committed(change, version):
            self._high_watermark_moved(hosted)
        self._apply_completions(hosted.state.complete_delayed_produces())

    def maybe_shrink_isrs(self) -> None:
        now = int(self._clock_ms())
        for hosted in list(self.partitions.values()):
            change = hosted.state.maybe_shrink_isr(now)
            if change is not None:
                self._spawn(self._write_isr(hosted, change))

    # -- role changes ------------------------------------------------------------------------

    def _new_hosted(self, tp: TopicPartition, config: LogConfig, plog: Log) -> HostedPartition:
        return HostedPartition(
            Partition(
                tp,
                local_broker_id=self.broker_id,
                min_insync_replicas=config.min_insync_replicas,
                replica_lag_time_max_ms=self._lag_ms,
            ),
            plog,
        )

    def _hosted(self, ps: PartitionState) -> tuple[HostedPartition, txn_log.LoadedState | None]:
        """The hosted partition of ``ps``, made hosted here if new (from what
        :meth:`prepare_partitions` opened for this very state, else opening its log now),
        and its producer state if that was loaded already."""
        tp = TopicPartition(ps.topic, ps.partition)
        hosted = self.partitions.get(tp)
        if hosted is not None:
            return hosted, None
        config = self._configs.log_config(tp.topic)
        prepared = self._prepared.pop(tp, None)
        if prepared is not None and prepared.state == ps:
            hosted, loaded = prepared.hosted, prepared.loaded
            # The topic's overrides may have changed while it was prepared.
            hosted.log.update_config(config)
            hosted.state.min_insync_replicas = config.min_insync_replicas
        else:
            plog = self._log_manager.get_or_create_log(tp.topic, tp.partition, config)
            hosted, loaded = self._new_hosted(tp, config, plog), None
        self.partitions[tp] = hosted
        return hosted, loaded

    async def prepare_topics(self, topics: Iterable[str]) -> None:
        """Read and watch the config overrides of topics not hosted yet (ZooKeeper, in a thread).

        Called before :meth:`become_leader_or_follower` so that role changes never
        block the event loop on ZooKeeper.
        """
        await self._configs.prepare(topics)

    async def prepare_partitions(self, states: Sequence[PartitionState]) -> None:
        """The disk work of a LeaderAndIsr for its partitions not hosted yet, in a worker
        thread: open (or create) each log and, for one this broker is to lead, record the
        new leader epoch in its leader-epoch checkpoint and load its producer state.

        Called after :meth:`prepare_topics` (the logs take the topics' configs) and right
        before :meth:`become_leader_or_follower` with the same states, which makes them
        hosted, leader or follower, only then: until that decision nobody but this
        method reaches them (produce and fetch answer that they are not here), so the
        log end the epoch starts at cannot move, and the checkpoint is on disk before the
        partition leads.  The caller lets no other role change run in between.  A
        partition that cannot be prepared is left to the decision, which opens its log
        (on the event loop) and reports the error.
        """
        configs: dict[str, LogConfig] = {}
        todo: list[tuple[PartitionState, LogConfig]] = []
        for ps in states:
            tp = TopicPartition(ps.topic, ps.partition)
            if self.broker_id in ps.replicas and tp not in self.partitions:
                if ps.topic not in configs:
                    configs[ps.topic] = self._configs.log_config(ps.topic)
                todo.append((ps, configs[ps.topic]))
        if todo:
            self._prepared.update(await run_blocking(self._open_partitions, todo))

    def _open_partitions(
        self, todo: Sequence[tuple[PartitionState, LogConfig]]
    ) -> dict[TopicPartition, _Prepared]:
        """:meth:`prepare_partitions`' blocking part (a worker thread)."""
        prepared: dict[TopicPartition, _Prepared] = {}
        for ps, config in todo:
            tp = TopicPartition(ps.topic, ps.partition)
            lai = ps.leader_and_isr
            try:
                plog = self._log_manager.get_or_create_log(tp.topic, tp.partition, config)
                hosted = self._new_hosted(tp, config, plog)
                loaded: txn_log.LoadedState | None = None
                if lai.leader == self.broker_id:
                    assign_epoch(plog, lai.leader_epoch, plog.log_end_offset)
                    loaded = txn_log.load_producer_state(
                        hosted.producers, hosted.transactions, plog
                    )
            except Exception as exc:
                log.warning("%s: cannot prepare for LeaderAndIsr: %s", tp, errors.describe(exc))
                continue
            prepared[tp] = _Prepared(ps, hosted, loaded)
        return prepared

    def _apply_log_config(self, topic: str, config: LogConfig) -> None:
        """New topic-level overrides: update every hosted log of ``topic``."""
        for tp, hosted in self.partitions.items():
            if tp.topic == topic:
                hosted.log.update_config(config)
                hosted.state.min_insync_replicas = config.min_insync_replicas

    def become_leader_or_follower(
        self, *, controller_epoch: int, states: Sequence[PartitionState]
    ) -> RoleChangeResult:
        """Apply a LeaderAndIsr request; its ``changes`` name the partitions to fetch.

        Runs in one event-loop step; a log not opened by :meth:`prepare_partitions`
        is opened here.
        """
        try:
            return self._become_leader_or_follower(controller_epoch, states)
        finally:
            self._prepared.clear()

    def _become_leader_or_follower(
        self, controller_epoch: int, states: Sequence[PartitionState]
    ) -> RoleChangeResult:
        if controller_epoch < self.controller_epoch:
            return RoleChangeResult(ErrorCode.STALE_CONTROLLER_EPOCH, [], RoleChanges([], [], {}))
        self.controller_epoch = controller_epoch
        results: list[tuple[TopicPartition, ErrorCode]] = []
        changes = RoleChanges([], [], {})
        for ps in states:
            tp = TopicPartition(ps.topic, ps.partition)
            if self.broker_id not in ps.replicas:
                results.append((tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            lai = ps.leader_and_isr
            try:
                hosted, loaded = self._hosted(ps)
                if lai.leader == self.broker_id:
                    if self._make_leader(hosted, ps, loaded):
                        changes.unfollow.append(tp)
                else:
                    changed = hosted.state.make_follower(
                        leader_id=lai.leader,
                        leader_epoch=lai.leader_epoch,
                        isr=lai.isr,
                        replicas=ps.replicas,
                        zk_version=lai.zk_version,
                    )
                    if changed:
                        self._apply_completions(hosted.state.abort_delayed_produces())
                        hosted.wake()
                        changes.follow[tp] = (lai.leader, lai.leader_epoch)
                changes.leadership.append(
                    (tp, lai.leader_epoch if lai.leader == self.broker_id else None)
                )
                results.append((tp, ErrorCode.NONE))
            except errors.HeadwaterError as exc:
                log.warning("LeaderAndIsr for %s failed: %s", tp, exc)
                results.append((tp, exc.code))
            except Exception:
                log.exception("LeaderAndIsr for %s failed", tp)
                results.append((tp, ErrorCode.KAFKA_STORAGE_ERROR))
        return RoleChangeResult(ErrorCode.NONE, results, changes)

    def _make_leader(
        self,
        hosted: HostedPartition,
        ps: PartitionState,
        loaded: txn_log.LoadedState | None = None,
    ) -> bool:
        """Become leader; True if this replica was a follower until now.  ``loaded``: the
        producer state was loaded for this leadership already (:meth:`prepare_partitions`)."""
        lai = ps.leader_and_isr
        tp = hosted.state.topic_partition
        was_follower = not hosted.state.is_leader
        changed = hosted.state.make_leader(
            leader_epoch=lai.leader_epoch,
            isr=lai.isr,
            replicas=ps.replicas,
            zk_version=lai.zk_version,
            log_end_offset=hosted.log.log_end_offset,
            high_watermark=hosted.log.high_watermark,
            now_ms=int(self._clock_ms()),
        )
        if changed:
            assign_epoch(hosted.log, lai.leader_epoch, hosted.log.log_end_offset)
            if was_follower:
                if loaded is None:
                    loaded = txn_log.load_producer_state(
                        hosted.producers, hosted.transactions, hosted.log
                    )
                hosted.snapshot_segment = hosted.log.active_base_offset
                log.info(
                    "%s: producer state from %s, %d batches replayed",
                    tp,
                    "the whole log"
                    if loaded.snapshot_offset is None
                    else f"the snapshot at {loaded.snapshot_offset}",
                    loaded.replayed,
                )
            log.info("%s: leader in epoch %d, ISR %s", tp, lai.leader_epoch, list(lai.isr))
        # A re-elected leader or a re-sent state may have a smaller ISR, so a higher
        # high watermark: answer the acks=all produces it now covers.
        self._high_watermark_moved(hosted)
        return changed and was_follower

    def stop_replicas(
        self, *, controller_epoch: int, partitions: Sequence[tuple[TopicPartition, bool]]
    ) -> RoleChangeResult:
        """Apply a StopReplica request: forget the partitions, delete their logs if asked."""
        if controller_epoch < self.controller_epoch:
            return RoleChangeResult(ErrorCode.STALE_CONTROLLER_EPOCH, [], RoleChanges([], [], {}))
        self.controller_epoch = controller_epoch
        results = []
        changes = RoleChanges([tp for tp, _ in partitions], [], {})
        for tp, delete in partitions:
            changes.leadership.append((tp, None))
            hosted = self.partitions.pop(tp, None)
            if hosted is not None:
                hosted.state.stop()
                self._apply_completions(hosted.state.abort_delayed_produces())
                hosted.wake()
            if delete:
                try:
                    self._log_manager.delete_log(tp.topic, tp.partition)
                except Exception as exc:
                    log.warning("deleting log of %s failed: %s", tp, errors.describe(exc))
            results.append((tp, ErrorCode.NONE))
        hosted_topics = {tp.topic for tp in self.partitions}
        self._configs.release({tp.topic for tp, _ in partitions} - hosted_topics)
        return RoleChangeResult(ErrorCode.NONE, results, changes)

    # -- log maintenance (the periodic jobs; every log on disk, hosted or not) -------------

    async def run_log_tasks(self, now_ms: int) -> None:
        """Retention, ``flush.ms`` and checkpoints of every log, in a worker thread."""
        await run_blocking(self._log_manager.run_periodic_tasks, now_ms)

    async def clean_logs(self, cleaner: LogCleaner, *, now_ms: int) -> CleanerStats:
        """One log-cleaner pass (compaction) over every log, in a worker thread."""
        log_manager = self._log_manager
        return await run_blocking(lambda: cleaner.maybe_clean(log_manager.logs(), now_ms=now_ms))

    def _snapshot_producers(self, hosted: HostedPartition) -> None:
        """Write the leader's producer state as the log's snapshot, now (at shutdown)."""
        hosted.snapshot_segment = hosted.log.active_base_offset
        try:
            txn_log.take_snapshot(hosted.producers, hosted.transactions, hosted.log)
        except (OSError, ValueError, errors.HeadwaterError) as exc:  # the next load replays more
            self._snapshot_failed(hosted.state.topic_partition, exc)

    def _snapshot_in_background(self, hosted: HostedPartition) -> None:
        """Take the leader's producer state as a snapshot now (the log rolled) and write
        it from a worker thread: appends go on meanwhile; a snapshot overtaken by a
        truncation is dropped (:meth:`headwater.storage.Log.write_producer_snapshot`)."""
        hosted.snapshot_segment = hosted.log.active_base_offset
        snapshot = txn_log.snapshot_now(hosted.producers, hosted.transactions, hosted.log)
        self._spawn(self._write_snapshot(hosted.state.topic_partition, snapshot))

    async def _write_snapshot(self, tp: TopicPartition, snapshot: txn_log.SnapshotWrite) -> None:
        try:
            if not await run_blocking(snapshot.write):
                log.info("%s: producer snapshot at %d dropped: truncated", tp, snapshot.offset)
        except (OSError, ValueError, errors.HeadwaterError) as exc:  # the next load replays more
            self._snapshot_failed(tp, exc)

    @staticmethod
    def _snapshot_failed(tp: TopicPartition, exc: Exception) -> None:
        log.warning("%s: cannot write the producer snapshot: %s", tp, errors.describe(exc))

    def shutdown(self) -> None:
        self.stopped = True
        for hosted in self.partitions.values():
            if hosted.state.is_leader:
                self._snapshot_producers(hosted)
        self._configs.shutdown()
        for task in list(self._background):
            task.cancel()
        for future in self._waiting_produces.values():
            if not future.done():
                future.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self._waiting_produces.clear()
        for hosted in self.partitions.values():
            hosted.wake()
