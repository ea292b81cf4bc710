"""Followers: one fetcher task per leader broker, pulling with the consumers' Fetch RPC.

Kafka's ``ReplicaFetcherThread``, as an asyncio task.  A partition handed to a
fetcher first *truncates*: it asks the leader (OffsetsForLeaderEpoch) where
its own latest leader epoch ends on the leader and cuts any divergent suffix,
so a replica that was a leader before a failover drops the records the new
leader never had.  Then it fetches from its log end offset with
``replica_id`` set; the leader's long poll returns as soon as there is data,
so replication adds one round trip, not a polling interval.

Errors are per partition: a fenced or unknown epoch, or a leader that no
longer leads, backs that partition off until the controller's next
LeaderAndIsr re-targets it; a transport failure backs off the whole fetcher.
Thread model: everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import grpc

from headwater import errors
from headwater.coordination.model import BrokerRegistration
from headwater.errors import ErrorCode
from headwater.records import scan_batches
from headwater.replication import TopicPartition
from headwater.server.replica_manager import HostedPartition, ReplicaManager, monotonic_ms
from headwater.v1 import broker_pb2, broker_pb2_grpc

log = logging.getLogger(__name__)


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


@dataclasses.dataclass
class FetchState:
    leader_epoch: int
    needs_truncation: bool = True
    delayed_until_ms: float = 0.0


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader broker."""

    def __init__(
        self,
        *,
        leader: BrokerRegistration,
        manager: ReplicaManager,
        broker_id: int,
        max_bytes: int,
        max_wait_ms: int,
        backoff_ms: int,
        max_message_bytes: int,
    ) -> None:
        self.leader = leader
        self.partitions: dict[TopicPartition, FetchState] = {}
        self._manager = manager
        self._broker_id = broker_id
        self._max_bytes = max_bytes
        self._max_wait_ms = max_wait_ms
        self._backoff_ms = backoff_ms
        self._channel = grpc.aio.insecure_channel(
            f"{leader.host}:{leader.port}", options=channel_options(max_message_bytes)
        )
        self._stub = broker_pb2_grpc.BrokerStub(self._channel)
        self._changed = asyncio.Event()
        self._closed = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._changed.set()

    async def close(self) -> None:
        self._closed = True  # gRPC may surface the cancellation as a CANCELLED RpcError
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        await self._channel.close(grace=None)

    async def _run(self) -> None:
        while not self._closed:
            now = monotonic_ms()
            ready = {tp: st for tp, st in self.partitions.items() if st.delayed_until_ms <= now}
            if not ready:
                self._changed.clear()
                delays = [st.delayed_until_ms - now for st in self.partitions.values()]
                timeout = min(delays) / 1000.0 if delays else None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout)
                continue
            try:
                for tp, st in list(ready.items()):
                    if st.needs_truncation:
                        await self._truncate(tp, st)
                ready = {tp: st for tp, st in ready.items() if not st.needs_truncation}
                if ready:
                    await self._fetch_once(ready)
            except grpc.aio.AioRpcError as exc:
                log.info("fetch from broker %d failed: %s", self.leader.broker_id, exc.code())
                self._delay(self.partitions, self._backoff_ms)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d failed", self.leader.broker_id)
                self._delay(self.partitions, self._backoff_ms)

    def _delay(self, states: Mapping[TopicPartition, FetchState], ms: float) -> None:
        until = monotonic_ms() + ms
        for st in states.values():
            st.delayed_until_ms = until

    def _hosted(self, tp: TopicPartition, st: FetchState) -> HostedPartition | None:
        """The local replica, if this fetcher still owns it in the same epoch."""
        if self.partitions.get(tp) is not st:
            return None
        return self._manager.partitions.get(tp)

    async def _truncate(self, tp: TopicPartition, st: FetchState) -> None:
        hosted = self._hosted(tp, st)
        if hosted is None:
            return
        plog = hosted.log
        latest = plog.latest_epoch
        if latest < 0:
            plog.truncate_to(plog.high_watermark)
            st.needs_truncation = False
            return
        request = broker_pb2.OffsetsForLeaderEpochRequest(
            replica_id=self._broker_id,
            partitions=[
                broker_pb2.OffsetForLeaderEpochPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    current_leader_epoch=st.leader_epoch,
                    leader_epoch=latest,
                )
            ],
        )
        response = await self._stub.OffsetsForLeaderEpoch(request, timeout=10.0)
        if self._hosted(tp, st) is None:
            return
        result = response.partitions[0]
        if ErrorCode(result.error) is not ErrorCode.NONE:
            log.info("%s: OffsetsForLeaderEpoch: %s", tp, ErrorCode(result.error).name)
            self._delay({tp: st}, self._backoff_ms)
            return
        if result.leader_epoch < 0 or result.end_offset < 0:
            target = plog.high_watermark
        elif result.leader_epoch == latest:
            target = min(result.end_offset, plog.log_end_offset)
        else:
            _epoch, local_end = plog.end_offset_for_epoch(result.leader_epoch)
            target = min(result.end_offset, local_end if local_end >= 0 else plog.high_watermark)
        if target < plog.log_end_offset:
            log.info("%s: truncating from %d to %d", tp, plog.log_end_offset, target)
            plog.truncate_to(target)
        st.needs_truncation = False

    async def _fetch_once(self, ready: Mapping[TopicPartition, FetchState]) -> None:
        specs = []
        for tp, st in ready.items():
            hosted = self._hosted(tp, st)
            if hosted is None:
                continue
            specs.append(
                broker_pb2.FetchPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    fetch_offset=hosted.log.log_end_offset,
                    current_leader_epoch=st.leader_epoch,
                    last_fetched_epoch=hosted.log.latest_epoch,
                    log_start_offset=hosted.log.log_start_offset,
                    partition_max_bytes=self._max_bytes,
                )
            )
        if not specs:
            return
        request = broker_pb2.FetchRequest(
            replica_id=self._broker_id,
            max_wait_ms=self._max_wait_ms,
            min_bytes=1,
            max_bytes=max(self._max_bytes * len(specs), self._max_bytes),
            partitions=specs,
        )
        fetch = asyncio.ensure_future(self._call_fetch(request))
        # A partition added or removed meanwhile should not wait for the long poll.
        changed: asyncio.Future[bool] = asyncio.ensure_future(self._changed.wait())
        self._changed.clear()
        try:
            waiters: set[asyncio.Future[Any]] = {fetch, changed}
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
        if fetch not in done:
            fetch.cancel()
            # Not `suppress(CancelledError)`: that would also swallow this task's own
            # cancellation (close() at shutdown), leaving the fetcher running forever.
            await asyncio.wait((fetch,))
            if not fetch.cancelled():
                fetch.exception()  # retrieved: an RPC error here is expected
            return
        response = fetch.result()
        for part in response.partitions:
            tp = TopicPartition(part.topic, part.partition)
            current = self.partitions.get(tp)
            if current is not None and tp in ready:
                self._handle(tp, current, part)

    async def _call_fetch(self, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        return await self._stub.Fetch(request, timeout=self._max_wait_ms / 1000.0 + 10.0)

    def _handle(
        self, tp: TopicPartition, st: FetchState, part: broker_pb2.FetchedPartition
    ) -> None:
        hosted = self._hosted(tp, st)
        if hosted is None:
            return
        plog = hosted.log
        error = ErrorCode(part.error)
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            if plog.log_end_offset > part.log_end_offset >= 0:
                plog.truncate_to(part.log_end_offset)
            elif plog.log_end_offset < part.log_start_offset:
                plog.truncate_fully_and_start_at(part.log_start_offset)
            else:
                self._delay({tp: st}, self._backoff_ms)
            return
        if error is not ErrorCode.NONE:
            log.info("%s: fetch from broker %d: %s", tp, self.leader.broker_id, error.name)
            self._delay({tp: st}, self._backoff_ms)
            return
        records = _complete_batches_from(part.records, plog.log_end_offset)
        if records:
            try:
                plog.append_as_follower(records)
            except errors.HeadwaterError as exc:
                log.warning("%s: follower append failed: %s; truncating again", tp, exc)
                st.needs_truncation = True
                self._delay({tp: st}, self._backoff_ms)
                return
        if hosted.state.on_follower_append(
            log_end_offset=plog.log_end_offset, leader_high_watermark=part.high_watermark
        ):
            plog.high_watermark = hosted.state.high_watermark


def _complete_batches_from(data: bytes, start_offset: int) -> bytes:
    """The whole batches of ``data`` that start at or after ``start_offset``."""
    begin = end = None
    for pos, header in scan_batches(data):
        if header.next_offset <= start_offset:
            continue
        if begin is None:
            begin = pos
        end = pos + header.size_in_bytes
    if begin is None or end is None:
        return b""
    if begin == 0 and end == len(data):
        return data
    return data[begin:end]


class ReplicaFetcherManager:
    """Maps followed partitions to the fetcher of their leader (event loop only)."""

    def __init__(
        self,
        *,
        manager: ReplicaManager,
        broker_id: int,
        max_bytes: int,
        max_wait_ms: int,
        backoff_ms: int,
        max_message_bytes: int,
    ) -> None:
        self._manager = manager
        self._broker_id = broker_id
        self._settings = (max_bytes, max_wait_ms, backoff_ms, max_message_bytes)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def add_partitions(
        self,
        changes: Mapping[TopicPartition, tuple[int, int]],
        leaders: Mapping[int, BrokerRegistration],
    ) -> None:
        self.remove_partitions(changes)
        for tp, (leader_id, epoch) in changes.items():
            broker = leaders.get(leader_id)
            if broker is None:
                continue  # no leader (offline) or unknown address: wait for the next LeaderAndIsr
            fetcher = self.fetchers.get(leader_id)
            if fetcher is not None and (fetcher.leader.host, fetcher.leader.port) != (
                broker.host,
                broker.port,
            ):
                self._close(self.fetchers.pop(leader_id))
                fetcher = None
            if fetcher is None:
                max_bytes, max_wait_ms, backoff_ms, max_message_bytes = self._settings
                fetcher = ReplicaFetcher(
                    leader=broker,
                    manager=self._manager,
                    broker_id=self._broker_id,
                    max_bytes=max_bytes,
                    max_wait_ms=max_wait_ms,
                    backoff_ms=backoff_ms,
                    max_message_bytes=max_message_bytes,
                )
                self.fetchers[leader_id] = fetcher
            fetcher.add(tp, epoch)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        tps = list(tps)
        for leader_id, fetcher in list(self.fetchers.items()):
            for tp in tps:
                fetcher.remove(tp)
            if not fetcher.partitions:
                self._close(self.fetchers.pop(leader_id))

    def _close(self, fetcher: ReplicaFetcher) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        await asyncio.gather(*(f.close() for f in fetchers), *self._closing)
