"""Keepalive between a replica fetcher's channel and the leader's server, over real gRPC on
the loopback: the server accepts the pings, and a connection that went silent (a network
partition, made by a :class:`LinkProxy`) fails the call in flight within about 2 s."""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio
from headwater.server.runtime.channels import replica_channel_options, server_options
from headwater.testing.netsplit import LinkProxy

MAX_MESSAGE = 1 << 20


class SlowHealth(health_aio.HealthServicer):  # type: ignore[misc]
    """Answers Check after a long poll, as a leader answers a fetch with no data."""

    async def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.aio.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        await asyncio.sleep(0.3)
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


async def start_server() -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server(options=server_options(MAX_MESSAGE))
    health_pb2_grpc.add_HealthServicer_to_server(SlowHealth(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


def replica_channel(address: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(
        address, options=replica_channel_options(MAX_MESSAGE, backoff_ms=100)
    )


def test_the_server_accepts_the_replica_channels_pings() -> None:
    """A call open 3.5 s sees three pings or more; a server with gRPC's default ping policy
    closes the connection (GOAWAY too_many_pings) and the call fails UNAVAILABLE."""

    async def scenario() -> None:
        server, port = await start_server()
        channel = replica_channel(f"127.0.0.1:{port}")
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            watch = stub.Watch(health_pb2.HealthCheckRequest(), timeout=3.5)
            try:
                async for _ in watch:
                    pass
                raise AssertionError("the watch ended before its deadline")
            except grpc.aio.AioRpcError as exc:
                assert exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED, exc
        finally:
            await channel.close(None)
            await server.stop(None)

    asyncio.run(scenario())


def test_a_call_on_a_silenced_connection_fails_within_about_two_seconds() -> None:
    async def scenario() -> None:
        server, port = await start_server()
        with LinkProxy("127.0.0.1", port) as proxy:
            channel = replica_channel(proxy.address)
            stub = health_pb2_grpc.HealthStub(channel)
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                call = stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                await asyncio.sleep(0.1)  # sent, its answer not yet
                await asyncio.to_thread(proxy.cut)
                started = time.monotonic()
                try:
                    await call
                    raise AssertionError("a call across the cut was answered")
                except grpc.aio.AioRpcError as exc:
                    assert exc.code() is grpc.StatusCode.UNAVAILABLE, exc
                assert time.monotonic() - started < 4.0  # keepalive 1 s + 1 s; deadline 10 s
                await asyncio.to_thread(proxy.heal)
                reply = await stub.Check(
                    health_pb2.HealthCheckRequest(), timeout=10, wait_for_ready=True
                )
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            finally:
                await channel.close(None)
                await server.stop(None)

    asyncio.run(scenario())
