"""The one-partition Fetch round trip with nothing else: the ceiling of a one-partition consume.

    .venv/bin/python bench/fetch_roundtrip.py --bootstrap HOST:PORT --topic T [--broker-pid PID]
        [--fetches 300] [--rounds 3] [--mode stream,unary]

A consumer of one partition has one Fetch in flight at a time, as Kafka's has:
the next fetch's offset is the end of the answer before it.  Its rate is at most
``max_partition_fetch_bytes`` (1 MiB) per round trip: the broker reading and
sending an answer, the transport, and gRPC receiving it in the client.  This
script makes those round trips back to back from one thread, with the
consumer's request (1 MiB per partition, 50 MiB per fetch) on the consumer's
channel, its ``FetchStream`` (``stream``, what the fetcher's inline fetches use)
or unary ``Fetch`` (``unary``, the pool's), and per answer only what a fetcher
must do before its next fetch: read ``records`` and check the batches' CRCs
(no records are decoded).  From the start of ``T``, wrapping round to its
start at the end.

Per run it prints MB/s, the median round trip, the client's CPU per MiB
(``time.process_time``: gRPC's receive and the CRC check) and, with
``--broker-pid``, the broker's CPU per MiB (from ``/proc``; anything else it
serves meanwhile included).  Compare ``perf consume``'s MB/s on the same topic
in the same minutes with the ``stream`` figure: the gap is what the consumer's
decoding and ``poll`` cost the fetch cycle.  Never asserts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from headwater import records
from headwater.client.settings import ConsumerSettings
from headwater.client.transport import connection
from headwater.records.allocator import tune_allocator
from headwater.v1 import broker_pb2

MIB = 1024 * 1024


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a running process (0 without a pid)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request(topic: str, offset: int, settings: ConsumerSettings) -> Any:
    return broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=settings.fetch_max_wait_ms,
        min_bytes=settings.fetch_min_bytes,
        max_bytes=settings.fetch_max_bytes,
        partitions=[
            broker_pb2.FetchPartition(
                topic=topic,
                partition=0,
                fetch_offset=offset,
                current_leader_epoch=-1,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=settings.max_partition_fetch_bytes,
            )
        ],
    )


def run(
    channels: connection.Channels, address: str, topic: str, mode: str, fetches: int
) -> tuple[int, float, float, list[float]]:
    """(bytes fetched, seconds, client CPU seconds, round trips in seconds)."""
    settings = ConsumerSettings(bootstrap_servers=(address,))
    inline = channels.inline_caller("Fetch")
    stub = channels.broker(address)
    timeout_s = (settings.fetch_max_wait_ms + settings.request_timeout_ms) / 1000
    offset = nbytes = 0
    trips: list[float] = []
    try:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(fetches):
            sent = time.perf_counter()
            req = request(topic, offset, settings)
            if mode == "stream":
                response = inline.call(address, req, timeout_s=timeout_s)
            else:
                response = stub.Fetch(req, timeout=timeout_s)
            trips.append(time.perf_counter() - sent)
            part = response.partitions[0]
            if part.error:
                raise SystemExit(f"fetch of {topic} at {offset} failed: error {part.error}")
            data = part.records
            nbytes += len(data)
            batches = list(records.read_batches(data))  # the CRC check, as the fetcher's
            offset = batches[-1].next_offset if batches else 0
            if offset >= part.high_watermark:
                offset = 0
        return nbytes, time.perf_counter() - start, time.process_time() - cpu, trips
    finally:
        inline.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap", required=True, help="the partition leader's address")
    ap.add_argument("--topic", required=True, help="a topic whose partition 0 has records")
    ap.add_argument("--broker-pid", type=int)
    ap.add_argument("--fetches", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", default="stream,unary", help="stream, unary or both")
    args = ap.parse_args()
    modes = args.mode.split(",")
    for mode in modes:
        if mode not in ("stream", "unary"):
            raise SystemExit(f"--mode: {mode!r} is neither stream nor unary")
    tune_allocator()  # as the consumer does
    channels = connection.Channels()
    summary: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
    try:
        for r in range(args.rounds):
            for mode in modes:
                before = process_cpu_s(args.broker_pid)
                nbytes, seconds, cpu, trips = run(
                    channels, args.bootstrap, args.topic, mode, args.fetches
                )
                broker = process_cpu_s(args.broker_pid) - before
                mib = nbytes / MIB
                summary[mode].append((nbytes / seconds / 1e6, cpu / mib * 1e3, broker / mib * 1e3))
                print(
                    f"round {r + 1} {mode}: {nbytes / seconds / 1e6:,.0f} MB/s, "
                    f"{nbytes / len(trips) / MIB:.2f} MiB per answer, round trip median "
                    f"{statistics.median(trips) * 1e3:.2f} ms, client CPU "
                    f"{cpu / mib * 1e3:.3f} ms/MiB"
                    + (f", broker CPU {broker / mib * 1e3:.3f} ms/MiB" if args.broker_pid else ""),
                    flush=True,
                )
    finally:
        channels.close()
    for mode, runs in summary.items():
        rate, client, broker = (statistics.median(x) for x in zip(*runs, strict=True))
        print(
            f"{mode}: median {rate:,.0f} MB/s, client CPU {client:.3f} ms/MiB"
            + (f", broker CPU {broker:.3f} ms/MiB" if args.broker_pid else "")
        )


if __name__ == "__main__":
    main()
