"""CPU per follower fetch round: a unary ``Fetch`` call against a message each way on an
open ``FetchStream``, both ends ``grpc.aio`` as between two brokers.

    .venv/bin/python bench/replica_fetch_rpc.py [--rounds 3000] [--records-bytes 300]
        [--repeat 3]

Starts a leader-like server in a child process on a free 127.0.0.1 port: it parses each
``FetchRequest`` and answers pre-encoded ``FetchResponse`` bytes (no response
serializer, as the broker's Fetch handlers), one partition with ``--records-bytes`` of
records.  The client sends what a follower's incremental fetch sends (session id and
epoch, one partition listed) as the replica fetcher does: unary with a deadline and
``wait_for_ready``, or write-then-read on one open stream under an ``asyncio.timeout``.
Runs unary and stream alternately ``--repeat`` times; prints per round the client's
CPU (``time.process_time``), the server's (from ``/proc``) and their sum, in
microseconds, the stream's saving against unary, and the wall time per round (under
load).  Never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from headwater.testing.zookeeper import free_port
from headwater.v1 import broker_pb2

SERVICE = "headwater.v1.Broker"


def answer_bytes(records_bytes: int) -> bytes:
    return broker_pb2.FetchResponse(
        session_id=12345,
        partitions=[
            broker_pb2.FetchedPartition(
                topic="busy",
                partition=0,
                high_watermark=1_000_000,
                last_stable_offset=1_000_000,
                log_start_offset=0,
                log_end_offset=1_000_003,
                preferred_read_replica=-1,
                records=b"r" * records_bytes,
            )
        ],
    ).SerializeToString()


def request(epoch: int) -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(
        replica_id=1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=8 << 20,
        session_id=12345,
        session_epoch=epoch,
        partitions=[
            broker_pb2.FetchPartition(
                topic="busy",
                partition=0,
                fetch_offset=1_000_000 + epoch,
                current_leader_epoch=3,
                last_fetched_epoch=3,
                log_start_offset=0,
                partition_max_bytes=8 << 20,
            )
        ],
    )


async def serve(port: int, records_bytes: int) -> None:
    answer = answer_bytes(records_bytes)

    async def unary(req: broker_pb2.FetchRequest, context: Any) -> bytes:
        return answer

    async def stream(requests: AsyncIterator[broker_pb2.FetchRequest], context: Any) -> Any:
        async for _ in requests:
            yield answer

    parse = broker_pb2.FetchRequest.FromString
    handlers = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Fetch": grpc.unary_unary_rpc_method_handler(unary, request_deserializer=parse),
            "FetchStream": grpc.stream_stream_rpc_method_handler(
                stream, request_deserializer=parse
            ),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handlers,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(port: int, server_pid: int, mode: str, rounds: int) -> tuple[float, float, float]:
    """(client, server) CPU microseconds per round, and wall microseconds per round."""
    from headwater.v1 import broker_pb2_grpc

    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    stub = broker_pb2_grpc.BrokerStub(channel)
    call = stub.FetchStream(wait_for_ready=True) if mode == "stream" else None

    async def one(epoch: int) -> broker_pb2.FetchResponse:
        req = request(epoch)
        if call is None:
            answer: broker_pb2.FetchResponse = await stub.Fetch(
                req, timeout=5.0, wait_for_ready=True
            )
            return answer
        async with asyncio.timeout(5.0):
            await call.write(req)
            streamed: broker_pb2.FetchResponse = await call.read()
        return streamed

    for epoch in range(1, 201):  # warm-up
        await one(epoch)
    server, client, wall = process_cpu_s(server_pid), time.process_time(), time.perf_counter()
    for epoch in range(1, rounds + 1):
        await one(epoch)
    client, wall = time.process_time() - client, time.perf_counter() - wall
    server = process_cpu_s(server_pid) - server
    if call is not None:
        call.cancel()
    await channel.close(grace=None)
    return client / rounds * 1e6, server / rounds * 1e6, wall / rounds * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--records-bytes", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.records_bytes))
        return 0
    port = free_port()
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--serve",
            str(port),
            "--records-bytes",
            str(args.records_bytes),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        child.stdout.readline()
        print(
            f"{args.rounds} fetch rounds per run, {args.records_bytes} B of records per answer, "
            "CPU in us per round (client + server)"
        )
        totals: dict[str, list[float]] = {"unary": [], "stream": []}
        for _ in range(args.repeat):
            for mode in ("unary", "stream"):
                client, server, wall = asyncio.run(measure(port, child.pid, mode, args.rounds))
                totals[mode].append(client + server)
                print(
                    f"{mode:6}: client {client:6.1f}  server {server:6.1f}  "
                    f"total {client + server:6.1f}  (wall {wall:7.1f}, under load)",
                    flush=True,
                )
        unary, stream = (statistics.median(totals[m]) for m in ("unary", "stream"))
        print(
            f"median total: unary {unary:.1f} us, stream {stream:.1f} us per round: "
            f"the stream saves {(1 - stream / unary) * 100:.0f}%"
        )
    finally:
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
