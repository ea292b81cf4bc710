"""CPU per unary gRPC call with and without the request quota interceptor and no
quota stored (the cost every broker pays for ``request_percentage`` on the gRPC door).

Client and server in one process; CPU time (``time.process_time``) per call, runs
alternated so machine load falls on both alike::

    .venv/bin/python bench/grpc_interceptor_cost.py [calls]
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import grpc
from headwater.quotas.manager import ClientQuotas
from headwater.server.services.throttling import RequestQuotaInterceptor
from headwater.v1 import broker_pb2


def _handler() -> Any:
    async def metadata(request: Any, context: Any) -> broker_pb2.MetadataResponse:
        return broker_pb2.MetadataResponse()

    return grpc.method_handlers_generic_handler(
        "headwater.v1.Broker",
        {
            "Metadata": grpc.unary_unary_rpc_method_handler(
                metadata,
                request_deserializer=broker_pb2.MetadataRequest.FromString,
                response_serializer=broker_pb2.MetadataResponse.SerializeToString,
            )
        },
    )


async def cpu_us_per_call(with_interceptor: bool, calls: int) -> float:
    interceptors = [RequestQuotaInterceptor(ClientQuotas())] if with_interceptor else []
    server = grpc.aio.server(interceptors=interceptors)
    server.add_generic_rpc_handlers((_handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(
            "/headwater.v1.Broker/Metadata",
            request_serializer=broker_pb2.MetadataRequest.SerializeToString,
            response_deserializer=broker_pb2.MetadataResponse.FromString,
        )
        for _ in range(calls // 8):  # warm up
            await call(broker_pb2.MetadataRequest())
        start = time.process_time()
        for _ in range(calls):
            await call(broker_pb2.MetadataRequest())
        cpu = time.process_time() - start
    await server.stop(None)
    return cpu / calls * 1e6


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    for _ in range(3):
        for with_interceptor in (False, True):
            us = asyncio.run(cpu_us_per_call(with_interceptor, calls))
            name = "interceptor" if with_interceptor else "none"
            print(f"{name:12} {us:7.1f} us CPU per call (client and server)")


if __name__ == "__main__":
    main()
