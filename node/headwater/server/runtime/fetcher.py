"""Followers: one fetcher task per leader broker, pulling with the consumers' Fetch RPC.

Kafka's ``ReplicaFetcherThread``, as an asyncio task.  This module only does
the gRPC: what to do with each answer is decided by
:class:`headwater.replication.follower.FollowerFetchState`, and the decisions
(truncate, append, back off) are applied through the ``ReplicaManager``, the
only owner of the local logs.  A partition handed to a
fetcher first *truncates*: it asks the leader (OffsetsForLeaderEpoch) where
its own latest leader epoch ends on the leader and cuts any divergent suffix,
so a replica that was a leader before a failover drops the records the new
leader never had.  Then it fetches from its log end offset with
``replica_id`` set; the leader's long poll returns as soon as there is data,
so replication adds one round trip, not a polling interval.  The fetches run in a
fetch session (Kafka's KIP-227, :mod:`headwater.replication.fetch_session`): after a
full fetch, each names only the partitions whose position changed and those it
forgets; the leader reads every partition of the session (so an idle, caught-up
follower stays in the ISR) and answers only those with news.

The fetches are messages on one long-lived ``FetchStream`` call per leader: the
follower writes its next request after applying each answer, and the leader answers
each in order exactly as a unary ``Fetch`` (same session, long poll and ISR
bookkeeping), without a call's setup per round (:class:`FetchRpc` decides which RPC
the next fetch uses).  A stream is never reused after anything went wrong with it (a
failure, a missed deadline, a fetch cancelled in flight): the next fetch opens a new one.
A leader from before the streams answers UNIMPLEMENTED and gets unary calls until a call
to it fails (it may have been restarted on a newer version); so does every leader when
the inter-broker listener uses SASL, whose session is attached to unary calls only.

Errors are per partition: a fenced or unknown epoch, or a leader that no
longer leads, backs that partition off until the controller's next
LeaderAndIsr re-targets it; a transport failure backs off the whole fetcher
(:func:`on_round_failed` decides what each kind of failure does).

A call to the leader has a deadline, ``replica.socket.timeout.ms``; one that
runs out drops the connection, as Kafka's ``NetworkClient`` disconnects on a
request timeout.  A connection that died under a fetch (a network partition)
is noticed sooner, by gRPC keepalive on the fetcher's channel
(:func:`channels.replica_channel_options`).  A call waits for the channel to
connect (``wait_for_ready``, within its deadline), as Kafka's fetcher awaits
its connection for up to the socket timeout: a follower cut off from its
leader fetches the moment the channel reconnects, at most
``replica.fetch.backoff.ms`` (and gRPC's 20 % jitter) after the link is back.

The decisions (which partitions fetch now, how long an idle fetcher sleeps,
what a failure does) are functions of their inputs, apart from the I/O.
Thread model: everything runs on the broker's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple, Protocol

import grpc

from headwater import errors
from headwater.clock import monotonic_ms
from headwater.coordination.model import BrokerRegistration
from headwater.errors import ErrorCode
from headwater.replication.fetch_session import FollowerFetchSession, PartitionFetch
from headwater.replication.follower import (
    Append,
    Backoff,
    FetchDecision,
    FollowerFetchState,
    LocalLog,
    StartAt,
    TruncateTo,
)
from headwater.server.runtime import channels
from headwater.server.runtime.channels import replica_channel_options
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.v1 import broker_pb2, broker_pb2_grpc
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

FETCH_STREAMS = True
"""Whether the broker's replica fetchers fetch on ``FetchStream`` (the default of
:class:`ReplicaFetcherManager`'s ``fetch_streams``); a switch, so that a comparison with
unary fetches is one assignment away."""


# -- decisions ---------------------------------------------------------------------------------


def ready_partitions(
    partitions: Mapping[TopicPartition, FollowerFetchState], now_ms: float
) -> dict[TopicPartition, FollowerFetchState]:
    """The partitions whose backoff is over: the next round fetches (or truncates) these."""
    return {tp: st for tp, st in partitions.items() if st.is_ready(now_ms)}


def idle_wait_s(
    partitions: Mapping[TopicPartition, FollowerFetchState], now_ms: float
) -> float | None:
    """How long a fetcher with nothing ready sleeps (unless a partition is added or
    removed first): until the earliest backoff ends; None (until a change) with no
    partitions."""
    if not partitions:
        return None
    return max(0.0, min(st.delayed_until_ms for st in partitions.values()) - now_ms) / 1000.0


class FetchRpc:
    """Which RPC the next fetch uses: ``FetchStream`` (:attr:`stream`) or unary ``Fetch``.

    Invariants: never the stream when streams are off (``streams=False``); after the
    leader answered UNIMPLEMENTED, unary until a fetch fails (:meth:`on_failure`), since a
    failure may be the leader's restart, on a version with the streams.
    """

    def __init__(self, *, streams: bool) -> None:
        self._streams = streams
        self.stream = streams

    def on_unimplemented(self) -> None:
        """The leader has no ``FetchStream``: the request goes unary, and the next ones."""
        self.stream = False

    def on_failure(self) -> None:
        """A fetch round failed: the next fetch tries the stream again (if streams are on)."""
        self.stream = self._streams


class AnswerOverdue(Exception):
    """No answer on the fetch stream within ``replica.socket.timeout.ms``."""


class StreamEnded(Exception):
    """The leader ended the fetch stream without answering (it is stopping)."""


class FailureResponse(NamedTuple):
    """What the fetcher does after a round that raised: every partition backs off with
    ``reason``; ``message`` is logged at ``level`` (with the traceback if ``traceback``);
    with ``reconnect`` the channel to the leader is replaced."""

    reason: str
    level: int
    message: str
    reconnect: bool = False
    traceback: bool = False


def on_round_failed(exc: Exception) -> FailureResponse:
    """The rule for each kind of failure of a fetch round.

    * a gRPC error: a transport failure, logged at INFO (a leader that died or moved is
      routine); a call that ran out its deadline (``replica.socket.timeout.ms``) also
      drops the connection it waited on, as Kafka does on a request timeout, so the next
      call does not queue behind a dead one; so does a stream's answer overdue
      (:class:`AnswerOverdue`); a stream the leader ended (:class:`StreamEnded`) is a
      transport failure;
    * a Headwater error (e.g. SASL_AUTHENTICATION_FAILED from the channel's login):
      backs off under its code's name, WARNING unless retriable;
    * anything else is a bug: logged with its traceback.
    """
    if isinstance(exc, grpc.aio.AioRpcError):
        code = exc.code()
        details = exc.details()
        return FailureResponse(
            "transport failure",
            logging.INFO,
            f"{code.name}: {details}" if details else code.name,
            reconnect=code is grpc.StatusCode.DEADLINE_EXCEEDED,
        )
    if isinstance(exc, AnswerOverdue | StreamEnded):
        return FailureResponse(
            "transport failure", logging.INFO, str(exc), reconnect=isinstance(exc, AnswerOverdue)
        )
    if isinstance(exc, errors.HeadwaterError):
        return FailureResponse(
            exc.code.name, logging.INFO if exc.retriable else logging.WARNING, str(exc)
        )
    return FailureResponse("fetcher failure", logging.ERROR, errors.describe(exc), traceback=True)


# -- I/O ---------------------------------------------------------------------------------------


class Closeable(Protocol):
    async def close(self, grace: float | None) -> None: ...


Connect = Callable[[str], tuple[Closeable, Any]]
"""Opens a channel to ``host:port`` and returns it with a Broker stub on it."""


def grpc_connect(options: list[tuple[str, int]]) -> Connect:
    """The real :data:`Connect`: an inter-broker channel with ``options``."""

    def connect(address: str) -> tuple[Closeable, Any]:
        channel = channels.aio_channel(address, options=options)
        return channel, broker_pb2_grpc.BrokerStub(channel)

    return connect


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
        socket_timeout_ms: int,
        connect: Connect,
        shutting_down: Callable[[], bool],
        fetch_streams: bool = True,
    ) -> None:
        """``shutting_down``: whether this broker has begun to shut down; its fetches then
        say so, and the leader no longer adds it to any ISR (``FetchRequest.shutting_down``).
        ``socket_timeout_ms`` is every call's deadline (``replica.socket.timeout.ms``; the
        config checks it leaves room for ``max_wait_ms``), and every streamed fetch's.
        ``fetch_streams``: whether fetches may go on a ``FetchStream``."""
        self.leader = leader
        self.partitions: dict[TopicPartition, FollowerFetchState] = {}
        self._manager = manager
        self._broker_id = broker_id
        self._max_bytes = max_bytes
        self._max_wait_ms = max_wait_ms
        self._backoff_ms = backoff_ms
        self._deadline_s = socket_timeout_ms / 1000.0
        self._connect = connect
        self._generation = channels.credentials_generation()
        self._channel, self._stub = connect(f"{leader.host}:{leader.port}")
        self._changed = asyncio.Event()
        self._session = FollowerFetchSession()
        self._rpc = FetchRpc(streams=fetch_streams)
        self._stream: Any = None
        """The open ``FetchStream`` call, if any; used by one fetch at a time."""
        self._closed = False
        self._shutting_down = shutting_down
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = FollowerFetchState(leader_epoch, backoff_ms=self._backoff_ms)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None:
            self._changed.set()

    async def close(self) -> None:
        self._closed = True  # gRPC may surface the cancellation as a CANCELLED RpcError
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._drop_stream()
        await self._channel.close(grace=None)

    async def _run(self) -> None:
        while not self._closed:
            now = monotonic_ms()
            ready = ready_partitions(self.partitions, now)
            if not ready:
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), idle_wait_s(self.partitions, now))
                continue
            try:
                await self._round(ready)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await self._failed(exc)

    async def _round(self, ready: Mapping[TopicPartition, FollowerFetchState]) -> None:
        for tp, st in list(ready.items()):
            if st.needs_truncation:
                await self._truncate(tp, st)
        ready = {tp: st for tp, st in ready.items() if not st.needs_truncation}
        if ready:
            await self._fetch_once(ready)

    async def _failed(self, exc: Exception) -> None:
        """Carry out :func:`on_round_failed`'s response to ``exc``."""
        response = on_round_failed(exc)
        self._session.on_failure()
        self._drop_stream()
        self._rpc.on_failure()
        log.log(
            response.level,
            "fetch from broker %d failed: %s",
            self.leader.broker_id,
            response.message,
            exc_info=exc if response.traceback else None,
        )
        self._back_off_all(response.reason)
        await self._renew_channel(reconnect=response.reconnect)

    async def _renew_channel(self, *, reconnect: bool) -> None:
        """After a failure: replace the channel when ``reconnect`` says so, or when it was
        made before the broker's client TLS files were rotated (the reconnection then
        presents the new certificate)."""
        generation = channels.credentials_generation()
        if self._closed or (generation == self._generation and not reconnect):
            return
        old, self._generation = self._channel, generation
        self._channel, self._stub = self._connect(f"{self.leader.host}:{self.leader.port}")
        log.info(
            "fetcher for broker %d: new channel (%s)",
            self.leader.broker_id,
            "after a call timed out" if reconnect else "with the reloaded TLS material",
        )
        await old.close(grace=None)

    def _back_off_all(self, reason: str) -> None:
        now = monotonic_ms()
        for st in self.partitions.values():
            st.back_off(now, reason)

    def _local(self, tp: TopicPartition, st: FollowerFetchState) -> LocalLog | None:
        """The local replica's position, if this fetcher still owns it in the same epoch."""
        if self.partitions.get(tp) is not st:
            return None
        return self._manager.local_log(tp)

    def _apply(self, tp: TopicPartition, st: FollowerFetchState, decision: FetchDecision) -> None:
        """Carry out one decision of ``st`` (the manager owns the log)."""
        if isinstance(decision, TruncateTo | StartAt):
            self._manager.truncate_follower(tp, decision)
        elif isinstance(decision, Backoff):
            log.info("%s: fetch from broker %d: %s", tp, self.leader.broker_id, decision.reason)
        elif isinstance(decision, Append):
            try:
                self._manager.append_as_follower(
                    tp, decision.records, leader_high_watermark=decision.leader_high_watermark
                )
            except errors.HeadwaterError as exc:
                log.warning("%s: follower append failed: %s; truncating again", tp, exc)
                st.on_append_failed(monotonic_ms(), str(exc))

    async def _truncate(self, tp: TopicPartition, st: FollowerFetchState) -> None:
        local = self._local(tp, st)
        if local is None:
            return
        decision = st.truncation_without_leader(local)
        if decision is not None:
            self._apply(tp, st, decision)
            return
        request = broker_pb2.OffsetsForLeaderEpochRequest(
            replica_id=self._broker_id,
            partitions=[
                broker_pb2.OffsetForLeaderEpochPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    current_leader_epoch=st.leader_epoch,
                    leader_epoch=local.latest_epoch,
                )
            ],
        )
        response = await self._stub.OffsetsForLeaderEpoch(
            request, timeout=self._deadline_s, wait_for_ready=True
        )
        local = self._local(tp, st)
        if local is None or not st.needs_truncation:
            return
        result = response.partitions[0]
        self._apply(
            tp,
            st,
            st.on_epoch_end_offset(
                local,
                error=ErrorCode(result.error),
                leader_epoch=result.leader_epoch,
                end_offset=result.end_offset,
                local_end_offset_for_leader_epoch=self._manager.local_end_offset_for_epoch(
                    tp, result.leader_epoch
                ),
                now_ms=monotonic_ms(),
            ),
        )

    def _follower_throttled(self, tp: TopicPartition) -> bool:
        """Kafka's ``shouldFollowerThrottle`` without the "exceeded" half."""
        hosted = self._manager.partitions.get(tp)
        if hosted is None:
            return False
        return self._manager.quotas.follower_throttled(
            hosted.log.config,
            partition=tp.partition,
            in_sync=self._broker_id in hosted.state.isr,
        )

    async def _fetch_once(self, ready: Mapping[TopicPartition, FollowerFetchState]) -> None:
        wanted = {}
        quota = self._manager.quotas.follower
        throttled = (
            set() if quota.unlimited else {tp for tp in ready if self._follower_throttled(tp)}
        )
        held_back = bool(throttled) and quota.is_exceeded(monotonic_ms())
        for tp, st in ready.items():
            local = self._local(tp, st)
            if local is None or (held_back and tp in throttled):
                continue
            wanted[tp] = PartitionFetch(
                fetch_offset=local.log_end_offset,
                current_leader_epoch=st.leader_epoch,
                last_fetched_epoch=local.latest_epoch,
                log_start_offset=local.log_start_offset,
                max_bytes=self._max_bytes,
            )
        if not wanted:
            if held_back:  # every ready partition is throttled: wait for the quota, or a change
                self._changed.clear()
                delay_s = min(quota.delay_ms(monotonic_ms()), 1000.0) / 1000.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), delay_s)
            return
        plan = self._session.build(wanted)
        request = broker_pb2.FetchRequest(
            replica_id=self._broker_id,
            max_wait_ms=self._max_wait_ms,
            min_bytes=1,
            max_bytes=max(self._max_bytes * len(wanted), self._max_bytes),
            partitions=[
                broker_pb2.FetchPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    fetch_offset=f.fetch_offset,
                    current_leader_epoch=f.current_leader_epoch,
                    last_fetched_epoch=f.last_fetched_epoch,
                    log_start_offset=f.log_start_offset,
                    partition_max_bytes=f.max_bytes,
                )
                for tp, f in plan.partitions.items()
            ],
            shutting_down=self._shutting_down(),
            session_id=plan.session_id,
            session_epoch=plan.epoch,
            forgotten=[
                broker_pb2.ForgottenPartition(topic=tp.topic, partition=tp.partition)
                for tp in plan.forgotten
            ],
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
            if not fetch.done():
                self._session.on_failure()  # the leader may have moved the session anyway
        if fetch not in done:
            fetch.cancel()
            # Not `suppress(CancelledError)`: that would also swallow this task's own
            # cancellation (close() at shutdown), leaving the fetcher running forever.
            await asyncio.wait((fetch,))
            if not fetch.cancelled():
                fetch.exception()  # retrieved: an RPC error here is expected
            return
        response = fetch.result()
        error = ErrorCode(response.error)
        self._session.on_response(plan, error=error, session_id=response.session_id)
        if error is not ErrorCode.NONE:
            log.info(
                "fetch from broker %d: %s; the next fetch is full",
                self.leader.broker_id,
                error.name,
            )
            return
        for part in response.partitions:
            tp = TopicPartition(part.topic, part.partition)
            current = self.partitions.get(tp)
            if current is not None and tp in wanted:
                if tp in throttled and part.records:
                    quota.record(len(part.records), monotonic_ms())
                    self._manager.record_follower_throttled(len(part.records))
                self._handle(tp, current, part)

    async def _call_fetch(self, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        if self._rpc.stream:
            try:
                return await self._stream_fetch(request)
            except grpc.aio.AioRpcError as exc:
                if exc.code() is not grpc.StatusCode.UNIMPLEMENTED:
                    raise
            self._rpc.on_unimplemented()
            log.info(
                "broker %d has no FetchStream: fetching with unary calls", self.leader.broker_id
            )
        response: broker_pb2.FetchResponse = await self._stub.Fetch(
            request, timeout=self._deadline_s, wait_for_ready=True
        )
        return response

    async def _stream_fetch(self, request: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        """``request``'s answer on the open stream (opened first if there is none, or it
        has ended).  Anything but an answer drops the stream: it is never reused with a
        request outstanding or in doubt."""
        stream = self._stream
        if stream is None or stream.done():
            stream = self._stream = self._stub.FetchStream(wait_for_ready=True)
        try:
            async with asyncio.timeout(self._deadline_s):
                await stream.write(request)
                answer = await stream.read()
        except TimeoutError:
            self._drop_stream()
            raise AnswerOverdue(
                f"no answer in {self._deadline_s * 1000:.0f} ms (replica.socket.timeout.ms)"
            ) from None
        except BaseException:
            self._drop_stream()
            raise
        if not isinstance(answer, broker_pb2.FetchResponse):  # EOF: the stream ended
            self._drop_stream()
            raise StreamEnded("the leader ended the fetch stream")
        return answer

    def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.cancel()

    def _handle(
        self, tp: TopicPartition, st: FollowerFetchState, part: broker_pb2.FetchedPartition
    ) -> None:
        local = self._local(tp, st)
        if local is None or st.needs_truncation:
            return
        decision = st.on_fetched(
            local,
            error=ErrorCode(part.error),
            leader_log_start_offset=part.log_start_offset,
            leader_log_end_offset=part.log_end_offset,
            leader_high_watermark=part.high_watermark,
            records=part.records,
            now_ms=monotonic_ms(),
        )
        self._apply(tp, st, decision)
        if isinstance(decision, Append) and not st.needs_truncation:
            self._manager.follow_log_start(tp, part.log_start_offset)


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
        socket_timeout_ms: int,
        max_message_bytes: int,
        connect: Connect | None = None,
        fetch_streams: bool | None = None,
    ) -> None:
        """``connect`` opens the fetchers' channels (default: gRPC inter-broker channels
        with :func:`channels.replica_channel_options`).  ``fetch_streams``: whether the
        fetchers fetch on ``FetchStream`` calls (default :data:`FETCH_STREAMS`; never
        under an inter-broker SASL listener, :func:`channels.inter_broker_streams`)."""
        self._manager = manager
        self._broker_id = broker_id
        self._settings = (max_bytes, max_wait_ms, backoff_ms, socket_timeout_ms)
        self._connect = connect or grpc_connect(
            replica_channel_options(max_message_bytes, backoff_ms=backoff_ms)
        )
        streams = FETCH_STREAMS if fetch_streams is None else fetch_streams
        self._fetch_streams = streams and channels.inter_broker_streams()
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._shutting_down = False

    def begin_shutdown(self) -> None:
        """This broker is shutting down: from now on every fetch, from fetchers already
        running and from those a LeaderAndIsr still starts (its controlled shutdown
        makes it a follower of the partitions it led), tells the leader not to add it
        to the ISR.  Called before the controlled shutdown request."""
        self._shutting_down = True

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
                max_bytes, max_wait_ms, backoff_ms, socket_timeout_ms = self._settings
                fetcher = ReplicaFetcher(
                    leader=broker,
                    manager=self._manager,
                    broker_id=self._broker_id,
                    max_bytes=max_bytes,
                    max_wait_ms=max_wait_ms,
                    backoff_ms=backoff_ms,
                    socket_timeout_ms=socket_timeout_ms,
                    connect=self._connect,
                    shutting_down=lambda: self._shutting_down,
                    fetch_streams=self._fetch_streams,
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
