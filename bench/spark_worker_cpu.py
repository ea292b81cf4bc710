"""CPU per row of the Spark reader's Python worker, phase by phase, without Spark.

    .venv/bin/python bench/spark_worker_cpu.py --bootstrap HOST:PORT --topic T \
        [--partitions 4] [--rounds 3] [--broker-pid PID] [--schema "value binary"]

Reads every partition of ``--topic`` (offsets 0 to the high watermark) the way an
executor's Python worker does for one task per partition, in three cumulative phases,
alternated each round:

- ``fetch``: the range reader's fetches (gRPC receive, the answer's view, CRC check),
  the batches dropped;
- ``arrow``: ``partition_reader.read_range``: the same plus the Arrow batches the
  reader yields;
- ``ipc``: the same plus what pyspark's worker does with each yielded batch for the
  JVM: wrap its columns in one struct column and write the Arrow IPC stream to a
  socket (a child process drains it).

Prints the CPU per row of this process (all its threads: gRPC's too) for each phase,
and, with ``--broker-pid``, the broker's.  Differences between the phases are what each
step costs.  Best (lowest) of the rounds and the median are printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import pyarrow as pa
from headwater import Admin
from headwater.client.consumer.range_reader import RangeReader
from headwater.client.types import TopicPartition
from headwater_spark import partition_reader
from headwater_spark.arrow import read_columns
from headwater_spark.planning import OffsetRange

_TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        raw = f.read()
    fields = raw[raw.rindex(")") + 2 :].split()
    return sum(int(x) for x in fields[11:13]) / _TICK


def wrap_struct(batch: pa.RecordBatch) -> pa.RecordBatch:
    """What pyspark's worker does to each batch of a Python data source's read."""
    struct = pa.StructArray.from_arrays(batch.columns, fields=pa.struct(list(batch.schema)))
    return pa.RecordBatch.from_arrays([struct], ["_0"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--broker-pid", type=int, default=None)
    parser.add_argument("--schema", default=None, help='an Arrow subset, e.g. "value binary"')
    parser.add_argument("--phases", default="fetch,arrow,ipc")
    parser.add_argument(
        "--max-partition-fetch-bytes", type=int, default=None, help="default: the reader's"
    )
    args = parser.parse_args()

    with Admin(args.bootstrap) as admin:
        ends = admin.list_offsets(
            {TopicPartition(args.topic, p): "latest" for p in range(args.partitions)}
        )
    ranges = [
        OffsetRange(args.topic, tp.partition, 0, found.offset if found else 0)
        for tp, found in sorted(ends.items())
    ]
    rows = sum(r.size for r in ranges)
    read_schema = None
    if args.schema:
        name, kind = args.schema.split()
        read_schema = read_columns(
            pa.schema([pa.field(name, getattr(pa, kind)())]), include_headers=False
        )
    settings = partition_reader.ReaderSettings(
        bootstrap_servers=args.bootstrap, read_schema=read_schema
    )
    if args.max_partition_fetch_bytes is not None:
        settings = dataclasses.replace(
            settings, max_partition_fetch_bytes=args.max_partition_fetch_bytes
        )
    client = partition_reader._client(settings)

    def fetch() -> None:
        reader: RangeReader = client
        for r in ranges:
            for answer in reader.read_range_batches(r.tp, r.from_offset, r.until_offset):
                del answer

    def arrow() -> None:
        for r in ranges:
            for batch in partition_reader.read_range(r, settings):
                del batch

    a, b = socket.socketpair()
    drain = subprocess.Popen(
        [sys.executable, "-c", "import os,sys\nwhile os.read(0, 1 << 20): pass"], stdin=b
    )
    b.close()
    out = a.makefile("wb", 65536)

    def ipc() -> None:
        for r in ranges:
            writer = None
            for batch in partition_reader.read_range(r, settings):
                wrapped = wrap_struct(batch)
                if writer is None:
                    writer = pa.RecordBatchStreamWriter(out, wrapped.schema)
                writer.write_batch(wrapped)
                del batch, wrapped
            if writer is not None:
                writer.close()
            out.flush()

    phases: dict[str, Callable[[], None]] = {"fetch": fetch, "arrow": arrow, "ipc": ipc}
    chosen = args.phases.split(",")
    results: dict[str, list[tuple[float, float, float]]] = {p: [] for p in chosen}
    fetch()  # warm: connections, page cache
    for rnd in range(args.rounds):
        for name in chosen:
            b0 = proc_cpu(args.broker_pid) if args.broker_pid else 0.0
            c0, t0 = time.process_time(), time.monotonic()
            phases[name]()
            cpu, wall = time.process_time() - c0, time.monotonic() - t0
            broker = (proc_cpu(args.broker_pid) - b0) if args.broker_pid else 0.0
            results[name].append((cpu / rows * 1e6, broker / rows * 1e6, wall))
            print(
                f"round {rnd} {name:>5}: {cpu / rows * 1e6:.3f} us/row "
                f"(broker {broker / rows * 1e6:.3f}), {rows / wall:,.0f} rows/s",
                flush=True,
            )
    out.close()
    a.close()
    drain.wait()
    partition_reader.close_clients()
    print(f"{rows:,} rows, {len(ranges)} partitions; CPU per row of this process (best, median)")
    for name in chosen:
        cpus = [c for c, _, _ in results[name]]
        brokers = [b for _, b, _ in results[name]]
        print(
            f"  {name:>5}: {min(cpus):.3f} us, {statistics.median(cpus):.3f} us"
            + (f"  broker median {statistics.median(brokers):.3f} us" if args.broker_pid else "")
        )


if __name__ == "__main__":
    main()
