"""The replica fetcher's FetchStream over real gRPC on the loopback: a follower's fetches are
messages on one stream in one fetch session; a leader without FetchStream (an older
version in a rolling upgrade) answers UNIMPLEMENTED and gets unary calls; a restarted
leader gets a new stream and a full fetch; closing the fetcher ends its stream on the
leader; an answer overdue past replica.socket.timeout.ms replaces the stream and the channel;
a stopping leader ends the stream after its answer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from headwater.coordination.model import BrokerRegistration
from headwater.server.runtime.channels import replica_channel_options, server_options
from headwater.server.runtime.fetcher import FetchRpc, ReplicaFetcherManager, grpc_connect
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.broker_service import (
    BROKER_SERVICE,
    BrokerService,
    ProducerIdAllocator,
    add_broker_service,
)
from headwater.v1 import broker_pb2

from .conftest import TP, Harness
from .test_fetcher_sessions import Leader, follower_end, state, until
from .test_replica_manager import records

MAX_MESSAGE = 1 << 20


class CountingService(BrokerService):
    """The leader's Broker service, counting its fetches and the streams they came on."""

    def __init__(self, leader: Leader) -> None:
        super().__init__(
            replicas=leader.manager,
            metadata=MetadataCache(),
            metrics=leader.manager._metrics,
            producer_ids=ProducerIdAllocator(1, start_ms=0),
        )
        self.fetches: list[broker_pb2.FetchRequest] = []
        self.streams_opened = 0
        self.streams_ended = 0
        self.streamed = 0

    async def fetch_encoded(self, request: broker_pb2.FetchRequest, context: Any) -> bytes:
        self.fetches.append(request)
        return await super().fetch_encoded(request, context)

    async def fetch_stream_encoded(
        self, requests: AsyncIterator[broker_pb2.FetchRequest], context: Any
    ) -> AsyncIterator[bytes]:
        self.streams_opened += 1

        async def counted() -> AsyncIterator[broker_pb2.FetchRequest]:
            async for request in requests:
                self.streamed += 1
                yield request

        try:
            async for answer in super().fetch_stream_encoded(counted(), context):
                yield answer
        finally:
            self.streams_ended += 1

    @property
    def unary(self) -> int:
        return len(self.fetches) - self.streamed


class Collected:
    """Collects the method handlers :func:`add_broker_service` registers."""

    def __init__(self) -> None:
        self.methods: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, name: str, methods: dict[str, Any]) -> None:
        self.methods.update(methods)


async def serve(service: BrokerService, *, port: int = 0, streams: bool = True) -> Any:
    """A gRPC server for ``service`` (without FetchStream unless ``streams``)."""
    server = grpc.aio.server(options=server_options(MAX_MESSAGE))
    if streams:
        add_broker_service(service, server)
    else:
        collected = Collected()
        add_broker_service(service, collected)
        methods = {k: v for k, v in collected.methods.items() if k != "FetchStream"}
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(BROKER_SERVICE, methods),)
        )
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    leader = Leader(tmp_path / "leader")
    yield leader
    leader.logs.shutdown()


async def following(harness: Harness, leader: Leader, port: int) -> ReplicaFetcherManager:
    await leader.manager.prepare_topics([TP.topic])
    leader.manager.become_leader_or_follower(controller_epoch=1, states=[state(leader=1, epoch=1)])
    m = harness.manager
    await m.prepare_topics([TP.topic])
    m.become_leader_or_follower(controller_epoch=1, states=[state(leader=1, epoch=1)])
    fetchers = ReplicaFetcherManager(
        manager=m,
        broker_id=0,
        max_bytes=1 << 20,
        max_wait_ms=50,
        backoff_ms=20,
        socket_timeout_ms=1500,
        max_message_bytes=MAX_MESSAGE,
        connect=grpc_connect(replica_channel_options(MAX_MESSAGE, backoff_ms=20)),
        fetch_streams=True,
    )
    registration = BrokerRegistration(broker_id=1, host="127.0.0.1", port=port)
    fetchers.add_partitions({TP: (1, 1)}, {1: registration})
    return fetchers


async def produce(leader: Leader, payload: bytes) -> None:
    await leader.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(payload))])


# -- the rule ------------------------------------------------------------------------------------


def test_fetch_rpc_prefers_the_stream_until_unimplemented_then_retries_after_a_failure() -> None:
    rpc = FetchRpc(streams=True)
    assert rpc.stream
    rpc.on_unimplemented()
    assert not rpc.stream  # an older leader: unary from now on...
    rpc.on_failure()
    assert rpc.stream  # ...until a failure: it may have been restarted on a newer version


def test_fetch_rpc_without_streams_is_always_unary() -> None:
    rpc = FetchRpc(streams=False)
    assert not rpc.stream
    rpc.on_failure()
    assert not rpc.stream


# -- over gRPC -----------------------------------------------------------------------------------


def test_a_follower_replicates_on_one_stream_in_one_session(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        service = CountingService(leader)
        server, port = await serve(service)
        fetchers = await following(harness, leader, port)
        try:
            for n, payload in enumerate((b"a", b"b", b"c"), start=1):
                await produce(leader, payload)
                await until(lambda n=n: follower_end(harness) == n, f"the follower at {n}")
            count = len(service.fetches)
            await until(lambda: len(service.fetches) >= count + 3, "idle fetches")
            assert (service.streams_opened, service.unary) == (1, 0)
            epochs = [r.session_epoch for r in service.fetches]
            assert epochs == list(range(len(epochs)))  # one session, each epoch once
            assert harness.manager.partitions[TP].state.high_watermark == 3
        finally:
            await fetchers.shutdown()
            await server.stop(None)

    asyncio.run(scenario())


def test_a_follower_of_a_leader_without_fetch_stream_replicates_with_unary_calls(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        service = CountingService(leader)
        server, port = await serve(service, streams=False)
        fetchers = await following(harness, leader, port)
        try:
            await produce(leader, b"a")
            await until(lambda: follower_end(harness) == 1, "the follower at 1")
            count = len(service.fetches)
            await produce(leader, b"b")
            await until(lambda: follower_end(harness) == 2, "the follower at 2")
            await until(lambda: len(service.fetches) >= count + 3, "more fetches")
            assert service.streams_opened == 0
            assert service.unary == len(service.fetches) > 0
            epochs = [r.session_epoch for r in service.fetches]
            assert epochs == list(range(len(epochs)))  # the refused stream lost no request
        finally:
            await fetchers.shutdown()
            await server.stop(None)

    asyncio.run(scenario())


def test_a_restarted_leader_gets_a_new_stream_and_a_full_fetch(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        first = CountingService(leader)
        server, port = await serve(first)
        fetchers = await following(harness, leader, port)
        try:
            await produce(leader, b"a")
            await until(lambda: follower_end(harness) == 1, "the follower at 1")
            await server.stop(None)
            await produce(leader, b"b")
            second = CountingService(leader)  # no sessions, as after a restart
            server, _ = await serve(second, port=port)
            await until(lambda: follower_end(harness) == 2, "the follower at 2 after the restart")
            assert second.streams_opened >= 1
            assert second.unary == 0
            assert second.fetches[0].session_epoch == 0  # full: the old session is in doubt
        finally:
            await fetchers.shutdown()
            await server.stop(None)

    asyncio.run(scenario())


def test_removing_the_partitions_ends_the_stream_and_the_fetcher(
    harness: Harness, leader: Leader
) -> None:
    async def scenario() -> None:
        service = CountingService(leader)
        server, port = await serve(service)
        fetchers = await following(harness, leader, port)
        try:
            await produce(leader, b"a")
            await until(lambda: follower_end(harness) == 1, "the follower at 1")
            fetcher = fetchers.fetchers[1]
            fetchers.remove_partitions([TP])  # a role change: this broker leads TP now
            await until(lambda: fetcher._task.done(), "the fetcher's task over")
            await until(lambda: service.streams_ended == 1, "the stream over on the leader")
            assert fetchers.fetchers == {}
            fetched = len(service.fetches)
            await asyncio.sleep(0.2)
            assert len(service.fetches) == fetched  # nothing fetches any more
        finally:
            await fetchers.shutdown()
            await server.stop(None)

    asyncio.run(scenario())


def test_shutdown_cancels_a_parked_stream_fetch_at_once(harness: Harness, leader: Leader) -> None:
    async def scenario() -> None:
        service = CountingService(leader)
        server, port = await serve(service)
        fetchers = await following(harness, leader, port)
        try:
            await produce(leader, b"a")
            await until(lambda: follower_end(harness) == 1, "the follower at 1")
            fetcher = fetchers.fetchers[1]
            loop = asyncio.get_running_loop()
            started = loop.time()
            await fetchers.shutdown()
            assert loop.time() - started < 0.5
            assert fetcher._task.done() and fetcher._stream is None
            await until(lambda: service.streams_ended == 1, "the stream over on the leader")
        finally:
            await server.stop(None)

    asyncio.run(scenario())


def test_a_stopping_leader_ends_a_followers_stream_after_the_answer(leader: Leader) -> None:
    async def scenario() -> None:
        await leader.manager.prepare_topics([TP.topic])
        leader.manager.become_leader_or_follower(
            controller_epoch=1, states=[state(leader=1, epoch=1)]
        )
        service = CountingService(leader)
        fetch = broker_pb2.FetchRequest(
            replica_id=0,
            max_wait_ms=0,
            partitions=[
                broker_pb2.FetchPartition(
                    topic=TP.topic, partition=TP.partition, partition_max_bytes=1 << 20
                )
            ],
        )

        async def requests() -> AsyncIterator[broker_pb2.FetchRequest]:
            yield fetch
            yield fetch

        leader.manager.stopped = True
        answers = [a async for a in service.fetch_stream_encoded(requests(), None)]
        assert len(answers) == 1
        leader.manager.stopped = False
        answers = [a async for a in service.fetch_stream_encoded(requests(), None)]
        assert len(answers) == 2

    asyncio.run(scenario())


class SilentService(CountingService):
    """A leader that takes the fetches on its streams and never answers them."""

    async def fetch_stream_encoded(
        self, requests: AsyncIterator[broker_pb2.FetchRequest], context: Any
    ) -> AsyncIterator[bytes]:
        self.streams_opened += 1
        try:
            async for _ in requests:
                self.streamed += 1
            if False:  # an async generator that yields nothing
                yield b""
        finally:
            self.streams_ended += 1


def test_an_overdue_stream_answer_fails_the_round_and_replaces_stream_and_channel(
    harness: Harness, leader: Leader, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        service = SilentService(leader)
        server, port = await serve(service)
        with caplog.at_level(logging.INFO, logger="headwater.server.runtime.fetcher"):
            fetchers = await following(harness, leader, port)
            try:
                await until(lambda: service.streams_opened >= 2, "a second stream")
                await until(lambda: service.streams_ended >= 1, "the first stream over")
            finally:
                await fetchers.shutdown()
                await server.stop(None)
        failed = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
        assert (
            failed[0]
            == "fetch from broker 1 failed: no answer in 1500 ms (replica.socket.timeout.ms)"
        )
        assert any("new channel (after a call timed out)" in r.getMessage() for r in caplog.records)

    asyncio.run(scenario())
