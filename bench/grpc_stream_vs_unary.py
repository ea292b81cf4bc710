"""What one request/answer costs through gRPC as Headwater uses it (a ``grpc.aio`` server, a
sync client): as a unary call, and as one message each way on an open bidi stream
(issue 16: where one-at-a-time end-to-end latency goes).

    .venv/bin/python bench/grpc_stream_vs_unary.py [--count 3000] [--size 150] [--gap-us 0]

Starts an echo server in a child process (raw bytes, no protobuf, no Headwater code) on
a free 127.0.0.1 port, then times ``--count`` round trips of ``--size`` bytes each way:
unary, stream, unary again.  The stream's requests come from a generator that grpc
drains on a thread of its own, as a client streaming Produce or Fetch would; last, a
``grpc.aio`` stream driven from the calling thread's own event loop.  ``--gap-us``
sleeps between round trips, as a client sending one record at a time idles between
them (its threads' wake-ups then cost more).  Prints p50 and average in
microseconds.  Never asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import grpc
from headwater.testing.zookeeper import free_port

SERVICE = "bench.Echo"


async def _serve(port: int) -> None:
    async def unary(request: bytes, context: Any) -> bytes:
        return request

    async def stream(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for message in requests:
            yield message

    handlers = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Stream": grpc.stream_stream_rpc_method_handler(stream),
        },
    )
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handlers,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def _timed(fn: Callable[[], object], count: int, gap_s: float = 0.0) -> str:
    for _ in range(min(300, count)):  # warm-up, not timed
        fn()
    samples = []
    for _ in range(count):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e6)
        if gap_s:
            time.sleep(gap_s)
    return f"p50 {statistics.median(samples):7.1f} us  avg {statistics.fmean(samples):7.1f} us"


def _aio_stream(port: int, message: bytes, count: int, gap_s: float) -> str:
    """The same round trip with a ``grpc.aio`` client on an event loop the calling
    thread runs itself: no request thread, but a loop turn per call."""
    loop = asyncio.new_event_loop()

    async def open_stream() -> tuple[Any, Any]:
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        return channel, channel.stream_stream(f"/{SERVICE}/Stream")()

    channel, call = loop.run_until_complete(open_stream())

    async def round_trip() -> bytes:
        await call.write(message)
        return await call.read()  # type: ignore[no-any-return]

    try:
        return _timed(lambda: loop.run_until_complete(round_trip()), count, gap_s)
    finally:
        call.cancel()
        loop.run_until_complete(channel.close())
        loop.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--size", type=int, default=150)
    ap.add_argument(
        "--gap-us",
        type=int,
        default=0,
        help="sleep between round trips (a one-at-a-time client's threads go idle between them)",
    )
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    port = free_port()
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        unary = channel.unary_unary(f"/{SERVICE}/Unary")
        stream = channel.stream_stream(f"/{SERVICE}/Stream")
        message = b"x" * args.size
        gap = args.gap_us / 1e6
        print(f"unary call         {_timed(lambda: unary(message, timeout=5), args.count, gap)}")
        outbox: queue.Queue[bytes | None] = queue.Queue()

        def requests() -> Iterator[bytes]:
            while (item := outbox.get()) is not None:
                yield item

        answers = stream(requests())

        def one() -> None:
            outbox.put(message)
            next(answers)

        print(f"message on stream  {_timed(one, args.count, gap)}")
        print(f"unary call again   {_timed(lambda: unary(message, timeout=5), args.count, gap)}")
        outbox.put(None)
        channel.close()
        print(f"aio stream, own loop {_aio_stream(port, message, args.count, gap)}")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
