"""The asyncio runtime around the pure transaction coordinator: one per broker.

It owns one :class:`~headwater.transactions.shard.TransactionShard` per
``__transaction_state`` partition this broker leads, and:

- **loads** a partition's ids when the broker becomes its leader, by replaying the
  partition from the start (requests meanwhile get COORDINATOR_LOAD_IN_PROGRESS), then
  writes again the markers of every transaction that was decided but not completed
  (a coordinator failover in PrepareCommit/PrepareAbort finishes here); it **unloads**
  the partition when leadership moves (requests get NOT_COORDINATOR, clients find the
  new coordinator);
- **serialises** the decisions of a partition (an ``asyncio.Lock``) and writes each
  state change to the log through the injected ``append`` -- which must append as
  leader with ``acks=all`` and raise a :class:`headwater.errors.HeadwaterError` on
  failure -- *before* it answers.  A failed append answers NOT_COORDINATOR or
  COORDINATOR_NOT_AVAILABLE and reloads the partition from the log, so memory is never
  ahead of what a new coordinator would find;
- **writes markers**: once PrepareCommit/PrepareAbort is in the log, it asks the
  injected ``write_markers`` to append the COMMIT/ABORT control batch to every
  partition of the transaction (retrying those that fail), and only then writes
  CompleteCommit/CompleteAbort;
- **holds** a request that would be refused CONCURRENT_TRANSACTIONS while the id's
  markers are being written until they are (at most :data:`COMPLETION_WAIT_S`), then
  decides it again: the answer is the one a client retry at that moment would get;
- **runs timers** when told (:meth:`TransactionCoordinatorRuntime.tick`): transactions
  older than their ``transaction.timeout.ms`` are aborted, idle ids expire.

It does no gRPC (the servicer in ``headwater.server.services.transaction`` converts
protobuf) and no disk I/O of its own.  All methods run on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple, TypeVar

from headwater.clock import WallClock, wall_ms
from headwater.errors import ErrorCode, HeadwaterError
from headwater.records import Record, build_batch, read_batches
from headwater.transactions import decisions as d
from headwater.transactions import views
from headwater.transactions.metadata import TransactionConfig, TransactionMetadata
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC, partition_for
from headwater.transactions.records import TransactionLogFormatError, record
from headwater.transactions.results import Decision, Refuse, Reply, Transition
from headwater.transactions.shard import TransactionShard
from headwater.transactions.state import TransactionResult
from headwater.values import TopicPartition

log = logging.getLogger(__name__)
_T = TypeVar("_T")

AppendRecords = Callable[[int, bytes], Awaitable[None]]
"""``append(partition, batch_bytes)``: append to ``__transaction_state`` as leader, wait
for the whole ISR (acks=all); raise HeadwaterError on failure."""
ReadRecords = Callable[[int, int], Awaitable[bytes]]
"""``read(partition, offset)``: stored batches from ``offset`` up to the log end offset;
``b""`` when there is nothing more."""


class MarkerRequest(NamedTuple):
    """The control batch to append to each of ``partitions`` (Kafka's WritableTxnMarker)."""

    producer_id: int
    producer_epoch: int
    result: TransactionResult
    partitions: frozenset[TopicPartition]
    coordinator_epoch: int


WriteMarkers = Callable[[MarkerRequest], Awaitable[Mapping[TopicPartition, ErrorCode]]]
"""``write_markers(request)``: each partition's outcome (NONE: the marker is written, or
the partition no longer exists); the others are retried."""

MARKER_RETRY_BACKOFF_S = 0.1
COMPLETION_WAIT_S = 0.2
"""How long a request refused CONCURRENT_TRANSACTIONS because the id's markers are being
written waits for them before it is answered (then decided again on the state of that
moment): the producer's next transaction starts when the previous one is complete
instead of one client retry backoff later."""
MARKER_WARN_EVERY_ATTEMPTS = 50
"""Markers still failing after this many attempts (and every as many more) are logged."""

_APPEND_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
}
"""Kafka's mapping of append failures; anything else is COORDINATOR_NOT_AVAILABLE."""


class Answer(NamedTuple):
    """What InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn answer."""

    error: ErrorCode
    message: str = ""
    producer_id: int = -1
    producer_epoch: int = -1


@dataclasses.dataclass(eq=False)
class _Partition:
    shard: TransactionShard
    leader_epoch: int
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)


class _NotCoordinator(Exception):
    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


def _answer(decision: Reply | Refuse) -> Answer:
    if isinstance(decision, Refuse):
        return Answer(decision.error, decision.message)
    return Answer(ErrorCode.NONE, "", decision.producer_id, decision.producer_epoch)


class TransactionCoordinatorRuntime:
    """See the module docstring.  Construct on the event loop that will call it."""

    def __init__(
        self,
        *,
        num_partitions: int,
        append: AppendRecords,
        read: ReadRecords,
        write_markers: WriteMarkers,
        allocate_producer_id: Callable[[], int],
        config: TransactionConfig | None = None,
        clock_ms: WallClock = wall_ms,
        marker_retry_backoff_s: float = MARKER_RETRY_BACKOFF_S,
    ) -> None:
        self.num_partitions = num_partitions
        self.config = config or TransactionConfig()
        self._append = append
        self._read = read
        self._write_markers = write_markers
        self._allocate = allocate_producer_id
        self._clock = clock_ms
        self._backoff_s = marker_retry_backoff_s
        self._partitions: dict[int, _Partition] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._completing: dict[tuple[int, str], asyncio.Event] = {}
        """(partition, transactional id) -> set once its markers and Complete* are
        written (or the attempt is given up)."""

    # -- leadership ---------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    async def on_become_leader(self, partition: int, leader_epoch: int) -> None:
        """Load ``partition``'s ids (idempotent for the same epoch), then finish the
        transactions it left decided but not completed."""
        current = self._partitions.get(partition)
        if current is not None and current.leader_epoch == leader_epoch:
            return
        fresh = _Partition(TransactionShard(partition, self.config), leader_epoch)
        self._partitions[partition] = fresh
        await self._load(partition, fresh)

    def on_resign(self, partition: int) -> None:
        """Leadership of ``partition`` moved away: forget its ids."""
        self._partitions.pop(partition, None)

    def owned_partitions(self) -> list[int]:
        return sorted(p for p, s in self._partitions.items() if not s.shard.loading)

    async def _load(self, partition: int, part: _Partition) -> None:
        offset, records, started = 0, 0, self._clock()
        async with part.lock:
            while self._partitions.get(partition) is part:
                try:
                    data = await self._read(partition, offset)
                except HeadwaterError as exc:
                    # Still the leader (else on_resign replaced ``part``): dropping the
                    # partition here would answer NOT_COORDINATOR until the next
                    # leadership change, so the read is retried.
                    log.warning(
                        "%s-%d: load failed at offset %d, retrying: %s",
                        TRANSACTION_STATE_TOPIC,
                        partition,
                        offset,
                        exc,
                    )
                    await asyncio.sleep(self._backoff_s)
                    continue
                if not data:
                    break
                before = offset
                for batch in read_batches(data):
                    offset = batch.next_offset
                    if batch.is_control:
                        continue
                    for rec in batch.records():
                        if rec.key is None:
                            continue
                        try:
                            part.shard.replay(rec.key, rec.value)
                            records += 1
                        except TransactionLogFormatError as exc:
                            log.warning(
                                "%s-%d@%d: %s", TRANSACTION_STATE_TOPIC, partition, rec.offset, exc
                            )
                if offset <= before:
                    break
            if self._partitions.get(partition) is not part:
                return
            to_finish = part.shard.loaded()
            log.info(
                "loaded %s-%d: %d records, %d transactional ids, %d to complete in %d ms",
                TRANSACTION_STATE_TOPIC,
                partition,
                records,
                len(part.shard.transactions),
                len(to_finish),
                self._clock() - started,
            )
        for tid, _result in to_finish:
            self._spawn_complete(partition, part, tid)

    # -- running decisions ----------------------------------------------------------------

    def _partition_of(self, transactional_id: str) -> tuple[int, _Partition]:
        partition = self.partition_for(transactional_id)
        part = self._partitions.get(partition)
        if part is None:
            raise _NotCoordinator(ErrorCode.NOT_COORDINATOR)
        if part.shard.loading:
            raise _NotCoordinator(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return partition, part

    async def _decide(
        self,
        transactional_id: str,
        decide: Callable[[TransactionMetadata | None, int], Decision],
    ) -> Answer:
        """Run one decision on the id's current state; write its record before answering.
        A CONCURRENT_TRANSACTIONS refusal while the id's markers are being written waits
        for them (see :data:`COMPLETION_WAIT_S`) and is decided once more.

        The decision runs as a task of its own that the caller's cancellation does not
        stop (a client that disconnects cancels its RPC): once a transition's record is
        being appended, the append's outcome is always recorded and its markers always
        started, so no transition stays pending for want of a caller."""
        return await asyncio.shield(self._spawn(self._decide_now(transactional_id, decide)))

    async def _decide_now(
        self,
        transactional_id: str,
        decide: Callable[[TransactionMetadata | None, int], Decision],
    ) -> Answer:
        waited = False
        while True:
            try:
                partition, part = self._partition_of(transactional_id)
            except _NotCoordinator as exc:
                return Answer(exc.code, str(exc))
            async with part.lock:
                if self._partitions.get(partition) is not part:
                    return Answer(ErrorCode.NOT_COORDINATOR)
                decision = decide(part.shard.get(transactional_id), self._clock())
                if not isinstance(decision, Transition):
                    completing = self._completing.get((partition, transactional_id))
                    if (
                        waited
                        or completing is None
                        or not isinstance(decision, Refuse)
                        or decision.error is not ErrorCode.CONCURRENT_TRANSACTIONS
                    ):
                        return _answer(decision)
                else:
                    failure = await self._write(partition, part, decision)
                    break
            waited = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(completing.wait(), COMPLETION_WAIT_S)
        if failure is not None:
            return Answer(failure, "the transaction log could not be written")
        if decision.markers is not None:
            self._spawn_complete(partition, part, transactional_id)
        assert decision.reply is not None
        return _answer(decision.reply)

    async def _write(self, partition: int, part: _Partition, t: Transition) -> ErrorCode | None:
        """Append ``t``'s record (the caller holds the lock); None when it is written."""
        record = part.shard.begin(t)
        batch = build_batch([Record(record.key, record.value)], timestamp_ms=self._clock())
        try:
            await self._append(partition, batch)
        except HeadwaterError as exc:
            log.warning("%s-%d: append failed: %s", TRANSACTION_STATE_TOPIC, partition, exc)
            part.shard.appended(t, ok=False)
            self._reload(partition, part)
            return _APPEND_ERRORS.get(exc.code, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        part.shard.appended(t, ok=True)
        return None

    def _reload(self, partition: int, part: _Partition) -> None:
        """The log may hold the record or not: rebuild memory from the log."""
        if self._partitions.get(partition) is not part:
            return
        fresh = _Partition(TransactionShard(partition, self.config), part.leader_epoch)
        self._partitions[partition] = fresh
        self._spawn(self._load(partition, fresh))

    async def _complete(self, partition: int, part: _Partition, transactional_id: str) -> None:
        """Write the markers of the id's decided transaction, then Complete* to the log."""
        while self._partitions.get(partition) is part:
            current = part.shard.get(transactional_id)
            result = None if current is None else d.markers_to_write(current)
            if current is None or result is None or current.pending_transition_in_progress:
                return
            remaining = frozenset(current.partitions)
            attempts = 0
            while remaining and self._partitions.get(partition) is part:
                try:
                    outcome = await self._write_markers(
                        MarkerRequest(
                            current.producer_id,
                            current.producer_epoch,
                            result,
                            remaining,
                            part.leader_epoch,
                        )
                    )
                except Exception:  # a broker unreachable: retry, the markers must get out
                    log.exception("writing %s markers for %r", result, transactional_id)
                    outcome = {}
                remaining = frozenset(
                    tp for tp in remaining if outcome.get(tp) is not ErrorCode.NONE
                )
                attempts += 1
                if remaining and attempts % MARKER_WARN_EVERY_ATTEMPTS == 0:
                    # The id answers CONCURRENT_TRANSACTIONS until these are written.
                    log.warning(
                        "%s markers for %r not written after %d attempts: %s",
                        result,
                        transactional_id,
                        attempts,
                        {str(tp): outcome.get(tp) for tp in sorted(remaining)},
                    )
                if remaining:
                    await asyncio.sleep(self._backoff_s)
            async with part.lock:
                if self._partitions.get(partition) is not part:
                    return
                if part.shard.get(transactional_id) != current:
                    continue  # cannot happen while completing; look again
                t = d.complete_transaction(current, now_ms=self._clock())
                await self._write(partition, part, t)
                return

    def _spawn_complete(self, partition: int, part: _Partition, transactional_id: str) -> None:
        """Run :meth:`_complete` for the id; requests held for it wake when it ends."""
        key = (partition, transactional_id)
        done = self._completing.get(key)
        if done is None:
            done = self._completing[key] = asyncio.Event()

        async def complete() -> None:
            try:
                await self._complete(partition, part, transactional_id)
            finally:
                if self._completing.get(key) is done:
                    del self._completing[key]
                done.set()

        self._spawn(complete())

    def _spawn(self, coro: Awaitable[_T]) -> asyncio.Future[_T]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- the RPCs -------------------------------------------------------------------------

    async def init_producer_id(
        self,
        transactional_id: str,
        *,
        transaction_timeout_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> Answer:
        """InitProducerId with a transactional id (see :func:`decisions.init_producer_id`)."""
        if refused := _bad_id(transactional_id):
            return refused
        return await self._decide(
            transactional_id,
            lambda current, now: d.init_producer_id(
                current,
                transactional_id=transactional_id,
                transaction_timeout_ms=transaction_timeout_ms,
                now_ms=now,
                config=self.config,
                allocate_producer_id=self._allocate,
                expected_producer_id=producer_id,
                expected_producer_epoch=producer_epoch,
            ),
        )

    async def add_partitions(
        self,
        transactional_id: str,
        *,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> Answer:
        if refused := _bad_id(transactional_id):
            return refused
        wanted = frozenset(partitions)
        return await self._decide(
            transactional_id,
            lambda current, now: d.add_partitions(
                current,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partitions=wanted,
                now_ms=now,
            ),
        )

    async def add_offsets(
        self,
        transactional_id: str,
        *,
        producer_id: int,
        producer_epoch: int,
        group_id: str,
        offsets_partition: TopicPartition,
    ) -> Answer:
        if refused := _bad_id(transactional_id):
            return refused
        return await self._decide(
            transactional_id,
            lambda current, now: d.add_offsets(
                current,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                group_id=group_id,
                offsets_partition=offsets_partition,
                now_ms=now,
            ),
        )

    async def end_transaction(
        self,
        transactional_id: str,
        *,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        bump_epoch: bool = True,
    ) -> Answer:
        """EndTxn; ``bump_epoch`` False for a transaction version 1 producer (see
        :func:`decisions.end_transaction`)."""
        if refused := _bad_id(transactional_id):
            return refused
        result = TransactionResult.COMMIT if commit else TransactionResult.ABORT
        return await self._decide(
            transactional_id,
            lambda current, now: d.end_transaction(
                current,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                result=result,
                now_ms=now,
                allocate_producer_id=self._allocate,
                bump_epoch=bump_epoch,
            ),
        )

    def verify_partition(
        self,
        transactional_id: str,
        *,
        producer_id: int,
        producer_epoch: int,
        partition: TopicPartition,
    ) -> ErrorCode:
        """A partition leader's check before a transaction's first write to ``partition``."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        try:
            _, part = self._partition_of(transactional_id)
        except _NotCoordinator as exc:
            return exc.code
        return d.verify_partition(
            part.shard.get(transactional_id),
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partition=partition,
        )

    def describe(self, transactional_id: str) -> views.TransactionDescription:
        try:
            _, part = self._partition_of(transactional_id)
        except _NotCoordinator as exc:
            return views.TransactionDescription(transactional_id, exc.code, "", -1, -1, -1, -1, ())
        return views.describe(transactional_id, part.shard.get(transactional_id))

    def list_transactions(
        self,
        *,
        state_filters: Iterable[str] = (),
        producer_id_filters: Iterable[int] = (),
        duration_filter_ms: int = -1,
    ) -> tuple[list[views.TransactionListing], list[str]]:
        every = [
            m
            for part in self._partitions.values()
            if not part.shard.loading
            for m in part.shard.transactions.values()
        ]
        return views.list_transactions(
            every,
            state_filters=list(state_filters),
            producer_id_filters=list(producer_id_filters),
            duration_filter_ms=duration_filter_ms,
            now_ms=self._clock(),
        )

    # -- timers ---------------------------------------------------------------------------

    async def tick(self) -> None:
        """Abort the timed-out transactions and expire the idle ids, once."""
        for partition, part in list(self._partitions.items()):
            if part.shard.loading:
                continue
            finish: list[str] = []
            async with part.lock:
                if self._partitions.get(partition) is not part:
                    continue
                begun = part.shard.tick(now_ms=self._clock(), allocate_producer_id=self._allocate)
                for t in begun:
                    tid = t.before.transactional_id
                    record = _record_of(t)
                    batch = build_batch([record], timestamp_ms=self._clock())
                    try:
                        await self._append(partition, batch)
                    except HeadwaterError as exc:
                        log.warning(
                            "%s-%d: append failed: %s", TRANSACTION_STATE_TOPIC, partition, exc
                        )
                        part.shard.appended(t, ok=False)
                        self._reload(partition, part)
                        break
                    part.shard.appended(t, ok=True)
                    if t.markers is not None:
                        log.info("aborting %r: transaction.timeout.ms passed", tid)
                        finish.append(tid)
            for tid in finish:
                self._spawn_complete(partition, part, tid)

    async def close(self) -> None:
        self._partitions.clear()
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _record_of(t: Transition) -> Record:
    r = record(t.after)
    return Record(r.key, r.value)


def _bad_id(transactional_id: str) -> Answer | None:
    if not transactional_id:
        return Answer(ErrorCode.INVALID_REQUEST, "the transactional id must not be empty")
    return None
