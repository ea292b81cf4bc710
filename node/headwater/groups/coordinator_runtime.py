"""The asyncio runtime around the pure :class:`GroupCoordinator`: one per broker.

It owns one coordinator per ``__consumer_offsets`` partition this broker leads, and:

- **loads** a partition's state when the broker becomes its leader, by replaying the
  partition from the start (requests for its groups meanwhile get
  COORDINATOR_LOAD_IN_PROGRESS) and **unloads** it when leadership moves (parked requests
  get NOT_COORDINATOR; the clients find the new coordinator);
- **serialises** operations per partition (an ``asyncio.Lock``), and for each decision
  first appends its records through the injected ``append`` callable -- which must
  append as leader with ``acks=all`` and raise a :class:`headwater.errors.HeadwaterError`
  on failure -- and only then completes the waiting requests.  If an append fails, the
  requests in that decision get an error and the partition is reloaded from the log,
  so memory never stays ahead of what a new coordinator would find;
- **runs timers** when told: :meth:`GroupCoordinatorRuntime.tick` runs every loaded
  coordinator's timers once, at the injected clock's time.  The broker's periodic
  scheduler calls it (``group-timers``); the runtime has no loop of its own;
- gives the consumer-protocol (KIP-848) groups the partition counts of the cluster's
  topics, read through the injected ``partition_counts`` (the broker's metadata cache)
  at each heartbeat and tick.

It does no gRPC (the servicer in ``headwater.server.services.group`` converts protobuf)
and no disk I/O of its own (``append``/``read`` are the broker's).  All methods run on
the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from headwater.clock import WallClock, wall_ms
from headwater.errors import ErrorCode, HeadwaterError
from headwater.groups.coordinator import (
    Decision,
    GroupCoordinator,
    RebalanceStats,
    default_member_id,
)
from headwater.groups.placement import partition_for
from headwater.groups.values import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    GroupConfig,
    GroupDescription,
    GroupOverview,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchResponse,
    Response,
    SyncGroupRequest,
    SyncGroupResponse,
)
from headwater.records import Record, build_batch, read_batches
from headwater.records.control import ControlRecordType, read_marker, set_batch_flags
from headwater.values import TopicPartition

log = logging.getLogger(__name__)
_T = TypeVar("_T")

AppendRecords = Callable[[int, bytes], Awaitable[None]]
"""``append(partition, batch_bytes)``: append to ``__consumer_offsets`` as leader, wait
for the whole ISR (acks=all); raise HeadwaterError on failure."""
ReadRecords = Callable[[int, int], Awaitable[bytes]]
"""``read(partition, offset)``: stored batches from ``offset`` (or the log start, if
later) up to the log end offset; ``b""`` when there is nothing more."""
PartitionCounts = Callable[[], Mapping[str, int]]
"""``partition_counts()``: the number of partitions of every topic of the cluster."""

T = TypeVar("T")

_APPEND_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.FENCED_LEADER_EPOCH: ErrorCode.NOT_COORDINATOR,
}
"""Kafka's mapping of append failures; anything else is COORDINATOR_NOT_AVAILABLE."""


def with_error(response: Response, code: ErrorCode) -> Response:
    """The same response carrying ``code`` (used when its records could not be written)."""
    if isinstance(response, OffsetCommitResponse):
        return OffsetCommitResponse(code, tuple((tp, code) for tp, _ in response.partitions))
    if isinstance(response, tuple):
        return tuple((gid, code) for gid, _ in response)
    return dataclasses.replace(response, error_code=code)


@dataclasses.dataclass
class _Shard:
    coordinator: GroupCoordinator
    leader_epoch: int
    loading: bool = True
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)


class NotCoordinator(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class GroupCoordinatorRuntime:
    """See the module docstring.  Construct on the event loop that will call it."""

    def __init__(
        self,
        *,
        num_partitions: int,
        append: AppendRecords,
        read: ReadRecords,
        config: GroupConfig | None = None,
        clock_ms: WallClock = wall_ms,
        member_id_factory: Callable[[str], str] = default_member_id,
        partition_counts: PartitionCounts = dict,
    ) -> None:
        self.num_partitions = num_partitions
        self._partition_counts = partition_counts
        self.config = config or GroupConfig()
        self._append = append
        self._read = read
        self._clock = clock_ms
        self._member_id_factory = member_id_factory
        self._shards: dict[int, _Shard] = {}
        self._waiting: dict[int, tuple[int, asyncio.Future[Response]]] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- leadership ---------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def status(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``group_id`` now, else the error to answer."""
        shard = self._shards.get(self.partition_for(group_id))
        if shard is None:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if shard.loading else ErrorCode.NONE

    async def on_become_leader(self, partition: int, leader_epoch: int) -> None:
        """Load ``partition``'s groups (idempotent for the same epoch)."""
        current = self._shards.get(partition)
        if current is not None and current.leader_epoch == leader_epoch:
            return
        self._unload(partition)
        shard = _Shard(
            GroupCoordinator(config=self.config, member_id_factory=self._member_id_factory),
            leader_epoch,
        )
        self._shards[partition] = shard
        await self._load(partition, shard)

    def on_resign(self, partition: int) -> None:
        """Leadership of ``partition`` moved away: forget its groups."""
        self._unload(partition)

    def owned_partitions(self) -> list[int]:
        return sorted(p for p, s in self._shards.items() if not s.loading)

    def _unload(self, partition: int) -> None:
        shard = self._shards.pop(partition, None)
        if shard is None:
            return
        for rid, (p, fut) in list(self._waiting.items()):
            if p == partition and not fut.done():
                fut.set_exception(NotCoordinator(ErrorCode.NOT_COORDINATOR))
                self._waiting.pop(rid, None)

    async def _load(self, partition: int, shard: _Shard) -> None:
        offset, started = 0, self._clock()
        records = 0
        async with shard.lock:
            while self._shards.get(partition) is shard:
                data = await self._read(partition, offset)
                if not data:
                    break
                before = offset
                for batch in read_batches(data):
                    if batch.is_control:
                        marker = read_marker(batch)
                        if marker is not None:
                            shard.coordinator.complete_transaction(
                                batch.producer_id,
                                commit=marker.type is ControlRecordType.COMMIT,
                                now_ms=self._clock(),
                            )
                        offset = batch.next_offset
                        continue
                    transactional = batch.is_transactional
                    for rec in batch.records():
                        if rec.key is None:
                            continue
                        try:
                            if transactional:
                                shard.coordinator.replay_transactional(
                                    rec.key,
                                    rec.value,
                                    producer_id=batch.producer_id,
                                    now_ms=self._clock(),
                                )
                            else:
                                shard.coordinator.replay(rec.key, rec.value, now_ms=self._clock())
                            records += 1
                        except ValueError as exc:
                            log.warning("__consumer_offsets-%d@%d: %s", partition, rec.offset, exc)
                    offset = batch.next_offset
                if offset <= before:
                    break
            if self._shards.get(partition) is shard:
                shard.loading = False
                log.info(
                    "loaded __consumer_offsets-%d: %d records, %d classic and %d consumer "
                    "groups in %d ms",
                    partition,
                    records,
                    len(shard.coordinator.groups),
                    len(shard.coordinator.consumer.groups),
                    self._clock() - started,
                )

    # -- running operations -------------------------------------------------------------

    def _shard_for(self, group_id: str) -> tuple[int, _Shard]:
        partition = self.partition_for(group_id)
        shard = self._shards.get(partition)
        if shard is None:
            raise NotCoordinator(ErrorCode.NOT_COORDINATOR)
        if shard.loading:
            raise NotCoordinator(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        return partition, shard

    async def _call(
        self, group_id: str, op: Callable[[GroupCoordinator, int, int], Decision]
    ) -> Response:
        partition, shard = self._shard_for(group_id)
        rid = next(self._ids)
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = (partition, future)
        try:
            await asyncio.shield(self._spawn(self._decide(partition, shard, op, rid)))
            return await future
        finally:
            self._waiting.pop(rid, None)

    async def _decide(
        self,
        partition: int,
        shard: _Shard,
        op: Callable[[GroupCoordinator, int, int], Decision],
        rid: int,
    ) -> None:
        """Decide ``op`` under the shard's lock and apply it.  A task of its own, which the
        caller's cancellation (a client that disconnects) does not stop: a decision made in
        memory is always appended, and its replies (other members' too) always sent."""
        async with shard.lock:
            if self._shards.get(partition) is not shard or shard.loading:
                raise NotCoordinator(ErrorCode.NOT_COORDINATOR)
            decision = op(shard.coordinator, rid, self._clock())
            await self._apply(partition, shard, decision)

    async def _apply(self, partition: int, shard: _Shard, decision: Decision) -> None:
        """Append the decision's records, then complete its replies (caller holds the lock)."""
        failure: ErrorCode | None = None
        if decision.records:
            pid, epoch = decision.producer or (-1, -1)
            batch = build_batch(
                [Record(r.key, r.value) for r in decision.records],
                timestamp_ms=self._clock(),
                producer_id=pid,
                producer_epoch=epoch,
            )
            if decision.producer is not None:  # a TxnOffsetCommit: the producer's batch
                batch = set_batch_flags(batch, transactional=True)
            try:
                await self._append(partition, batch)
            except HeadwaterError as exc:
                failure = _APPEND_ERRORS.get(exc.code, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                log.warning("__consumer_offsets-%d: append failed: %s", partition, exc)
        for rid, response in decision.replies:
            waiting = self._waiting.pop(rid, None)
            if waiting is None or waiting[1].done():
                continue
            waiting[1].set_result(response if failure is None else with_error(response, failure))
        if failure is not None and self._shards.get(partition) is shard:
            # Memory may now be ahead of the log: rebuild it from the log.
            self._unload(partition)
            fresh = _Shard(
                GroupCoordinator(config=self.config, member_id_factory=self._member_id_factory),
                shard.leader_epoch,
            )
            self._shards[partition] = fresh
            self._spawn(self._load(partition, fresh))

    def _spawn(self, coro: Awaitable[_T]) -> asyncio.Future[_T]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def join_group(self, req: JoinGroupRequest) -> JoinGroupResponse:
        try:
            resp = await self._call(
                req.group_id,
                lambda c, rid, now: c.join_group(
                    req, request_id=rid, now_ms=now, partition_counts=self._partition_counts()
                ),
            )
        except NotCoordinator as exc:
            return JoinGroupResponse(exc.code, req.member_id)
        assert isinstance(resp, JoinGroupResponse)
        return resp

    async def sync_group(self, req: SyncGroupRequest) -> SyncGroupResponse:
        try:
            resp = await self._call(
                req.group_id, lambda c, rid, now: c.sync_group(req, request_id=rid, now_ms=now)
            )
        except NotCoordinator as exc:
            return SyncGroupResponse(exc.code)
        assert isinstance(resp, SyncGroupResponse)
        return resp

    async def heartbeat(self, req: HeartbeatRequest) -> HeartbeatResponse:
        try:
            resp = await self._call(
                req.group_id, lambda c, rid, now: c.heartbeat(req, request_id=rid, now_ms=now)
            )
        except NotCoordinator as exc:
            return HeartbeatResponse(exc.code)
        assert isinstance(resp, HeartbeatResponse)
        return resp

    async def consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        def op(c: GroupCoordinator, rid: int, now: int) -> Decision:
            counts = self._partition_counts()
            return c.consumer_group_heartbeat(
                req, request_id=rid, now_ms=now, partition_counts=counts
            )

        try:
            resp = await self._call(req.group_id, op)
        except NotCoordinator as exc:
            return ConsumerGroupHeartbeatResponse(
                exc.code, exc.code.name, req.member_id, req.member_epoch
            )
        assert isinstance(resp, ConsumerGroupHeartbeatResponse)
        return resp

    async def leave_group(self, req: LeaveGroupRequest) -> LeaveGroupResponse:
        try:
            resp = await self._call(
                req.group_id,
                lambda c, rid, now: c.leave_group(
                    req, request_id=rid, now_ms=now, partition_counts=self._partition_counts()
                ),
            )
        except NotCoordinator as exc:
            return LeaveGroupResponse(exc.code)
        assert isinstance(resp, LeaveGroupResponse)
        return resp

    async def commit_offsets(self, req: OffsetCommitRequest) -> OffsetCommitResponse:
        try:
            resp = await self._call(
                req.group_id,
                lambda c, rid, now: c.commit_offsets(req, request_id=rid, now_ms=now),
            )
        except NotCoordinator as exc:
            return OffsetCommitResponse(
                exc.code,
                tuple((TopicPartition(p.topic, p.partition), exc.code) for p in req.partitions),
            )
        assert isinstance(resp, OffsetCommitResponse)
        return resp

    def complete_transaction(self, partition: int, producer_id: int, *, commit: bool) -> None:
        """A transaction's marker was written to ``partition``: its pending offsets
        count (COMMIT) or are dropped (ABORT).  A partition still loading finds the
        marker in the log itself."""
        shard = self._shards.get(partition)
        if shard is not None and not shard.loading:
            shard.coordinator.complete_transaction(producer_id, commit=commit, now_ms=self._clock())

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None,
        *,
        member_id: str | None = None,
        member_epoch: int = -1,
        require_stable: bool = False,
    ) -> OffsetFetchResponse:
        try:
            _, shard = self._shard_for(group_id)
        except NotCoordinator as exc:
            return OffsetFetchResponse(exc.code)
        return shard.coordinator.fetch_offsets(
            group_id,
            partitions,
            member_id=member_id,
            member_epoch=member_epoch,
            require_stable=require_stable,
        )

    def describe_group(self, group_id: str) -> GroupDescription:
        try:
            _, shard = self._shard_for(group_id)
        except NotCoordinator as exc:
            return GroupDescription(group_id, "", "", "", -1, (), exc.code)
        return shard.coordinator.describe_group(group_id)

    def list_groups(self, states: Iterable[str] = ()) -> list[GroupOverview]:
        wanted = list(states)
        return [
            g
            for shard in self._shards.values()
            if not shard.loading
            for g in shard.coordinator.list_groups(wanted)
        ]

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> OffsetDeleteResponse:
        wanted = list(partitions)
        if not group_id:
            return OffsetDeleteResponse(ErrorCode.INVALID_GROUP_ID)
        try:
            resp = await self._call(
                group_id,
                lambda c, rid, now: c.delete_offsets(group_id, wanted, request_id=rid, now_ms=now),
            )
        except NotCoordinator as exc:
            return OffsetDeleteResponse(exc.code)
        assert isinstance(resp, OffsetDeleteResponse)
        return resp

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, ErrorCode]]:
        out: list[tuple[str, ErrorCode]] = []
        for gid in group_ids:

            def op(c: GroupCoordinator, rid: int, now: int, g: str = gid) -> Decision:
                return c.delete_groups([g], request_id=rid, now_ms=now)

            try:
                resp = await self._call(gid, op)
            except NotCoordinator as exc:
                out.append((gid, exc.code))
                continue
            assert isinstance(resp, tuple)
            out.extend(resp)
        return out

    # -- timers and metrics -------------------------------------------------------------

    async def tick(self) -> None:
        """Run every loaded coordinator's timers once (session expiry, rebalance delays,
        consumer-protocol sessions and revocation deadlines)."""
        for partition, shard in list(self._shards.items()):
            if shard.loading:
                continue
            async with shard.lock:
                if self._shards.get(partition) is not shard:
                    continue
                decision = shard.coordinator.tick(
                    now_ms=self._clock(), partition_counts=self._partition_counts()
                )
                if decision.records or decision.replies:
                    await self._apply(partition, shard, decision)

    async def close(self) -> None:
        for partition in list(self._shards):
            self._unload(partition)
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    def committed_offsets(self) -> list[tuple[str, TopicPartition, int]]:
        """``(group, partition, committed offset)`` of every loaded group (for metrics)."""
        return [
            (gid, tp, off.offset)
            for shard in self._shards.values()
            if not shard.loading
            for gid, group in shard.coordinator.groups.items()
            for tp, off in group.offsets.items()
        ]

    def rebalance_stats(self) -> dict[str, RebalanceStats]:
        out: dict[str, RebalanceStats] = {}
        for shard in self._shards.values():
            out.update(shard.coordinator.rebalance_stats())
        return out
