"""Spark batch-read throughput beside a plain consumer on the same data, printed.

    .venv/bin/python bench/spark_read.py [--records 2000000] [--sizes 100,1024]
                                         [--partitions 2] [--bootstrap HOST:PORT]

For each record size: produce ``--records`` records into a fresh topic of
``--partitions`` partitions, then read them all twice in the same run:

1. a plain ``headwater.Consumer`` (one process, assigned every partition);
2. Spark, ``local[2]``, ``spark.read.format("headwater")``, forcing every
   value through Arrow to the JVM (``sum(length(value))``), twice: the first
   read of a large topic also pays the JVM's JIT compiling the scan's code (about
   2 us of JVM CPU per row at 1M rows), so the second is the figure compared;
3. Spark again with the user-specified schema ``value binary``: only that column is
   built and handed to the JVM (Spark converts every column of every row it gets).

Prints rows/s and MB/s (value bytes) for both and the ratio; the floor is
Spark >= 0.5x the consumer.  Wall-clock figures move with the machine's load,
so the Spark read's CPU per row is printed too, split between the JVM and its
Python workers (``/proc`` of this process's descendants: live processes plus
what they reaped; workers are reused, so they are still alive when counted).
Without ``--bootstrap`` a one-broker ``headwater.testing.Cluster`` is started
in a temporary directory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import headwater
from headwater.client.types import TopicPartition

MB = 1_000_000
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def descendant_cpu() -> dict[str, float]:
    """CPU seconds of Spark's JVM (a child of this process) and its descendants, by
    kind (``java``, ``python``: the Python workers); the test cluster's ZooKeeper (a
    JVM too) and brokers are not counted.

    Each live descendant's own time plus its reaped children's, so a worker
    that exited and was waited for by a live parent still counts once.
    """
    parents: dict[int, int] = {}
    stats: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        stats[pid] = (comm, ticks / _TICK)
    me = os.getpid()
    totals = {"java": 0.0, "python": 0.0}
    spark_jvm = {pid for pid, (comm, _) in stats.items() if comm == "java" and _is_spark(pid)}
    for pid, (comm, cpu) in stats.items():
        under_jvm = pid in spark_jvm
        p = parents.get(pid, 0)
        while p not in (0, 1, me):
            under_jvm = under_jvm or p in spark_jvm
            p = parents.get(p, 0)
        if p == me and under_jvm:  # not the test cluster's brokers and ZooKeeper
            totals["java" if comm == "java" else "python"] += cpu
    return totals


def _is_spark(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"org.apache.spark" in f.read()
    except OSError:
        return False


@contextlib.contextmanager
def cluster(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from headwater.testing.cluster import Cluster

    with (
        tempfile.TemporaryDirectory(prefix="hw-spark-bench-") as tmp,
        Cluster(brokers=1, data_dir=Path(tmp)) as c,
    ):
        yield c.bootstrap


def progress(label: str, done: int, total: int, started: float) -> None:
    rate = done / max(time.monotonic() - started, 1e-9)
    print(f"\r  {label}: {done:,}/{total:,} ({rate:,.0f}/s)   ", end="", flush=True)


def produce(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    value = os.urandom(size)
    started = time.monotonic()
    with headwater.Producer(
        bootstrap, acks=1, linger_ms=20, batch_size=1024 * 1024, buffer_memory=256 * 1024 * 1024
    ) as p:
        for i in range(records):
            p.send(topic, value, partition=i % partitions)
            if i % 50_000 == 0:
                progress("produce", i, records, started)
        p.flush()
    progress("produce", records, records, started)
    print()


def consume(bootstrap: str, topic: str, records: int, partitions: int) -> tuple[float, int]:
    """Seconds to read every record with a plain consumer, and the value bytes read."""
    seen = nbytes = 0
    with headwater.Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=100_000,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    ) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        started = time.monotonic()
        deadline = started + 1800
        while seen < records and time.monotonic() < deadline:
            batch = c.poll(1000)
            seen += len(batch)
            nbytes += sum(len(r.value or b"") for r in batch)
            progress("consumer", seen, records, started)
        elapsed = time.monotonic() - started
    print()
    if seen != records:
        raise SystemExit(f"consumer read {seen} records, expected {records}")
    return elapsed, nbytes


def spark_read(
    spark: object, bootstrap: str, topic: str, records: int, schema: str | None = None
) -> tuple[float, int, dict[str, float]]:
    """Seconds for Spark to read every record and sum the value lengths, the value
    bytes, and the CPU seconds Spark's JVM and Python workers spent on it.  ``schema``:
    a user-specified schema (DDL) naming some of the source's columns."""
    reader = spark.read.format("headwater")  # type: ignore[attr-defined]
    if schema is not None:
        reader = reader.schema(schema)
    df = reader.option("bootstrap.servers", bootstrap).option("subscribe", topic).load()
    print("  spark: reading ...", flush=True)
    cpu_before = descendant_cpu()
    started = time.monotonic()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
    elapsed = time.monotonic() - started
    cpu = {k: v - cpu_before[k] for k, v in descendant_cpu().items()}
    if row["n"] != records:
        raise SystemExit(f"spark read {row['n']} records, expected {records}")
    return elapsed, int(row["b"]), cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--sizes", default="100,1024", help="record value sizes in bytes")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--bootstrap", default=None)
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    import headwater_spark
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-spark-read-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    headwater_spark.register(spark)
    results = []
    try:
        with cluster(args.bootstrap) as bootstrap:
            # Warm up Spark's Python workers so the first figure is not start-up time.
            warm = f"bench-warm-{uuid.uuid4().hex[:8]}"
            with headwater.Admin(bootstrap) as admin:
                admin.create_topic(warm, args.partitions, 1)
            produce(bootstrap, warm, 1000, 10, args.partitions)
            spark_read(spark, bootstrap, warm, 1000)
            for size in (int(s) for s in args.sizes.split(",")):
                topic = f"bench-{size}-{uuid.uuid4().hex[:8]}"
                with headwater.Admin(bootstrap) as admin:
                    admin.create_topic(topic, args.partitions, 1)
                print(f"{args.records:,} records of {size} B, {args.partitions} partitions")
                produce(bootstrap, topic, args.records, size, args.partitions)
                c_s, c_b = consume(bootstrap, topic, args.records, args.partitions)
                cold = spark_read(spark, bootstrap, topic, args.records)
                s_s, s_b, s_cpu = spark_read(spark, bootstrap, topic, args.records)
                narrow = spark_read(spark, bootstrap, topic, args.records, "value binary")
                results.append((size, c_s, c_b, s_s, s_b, s_cpu, cold, narrow))
    finally:
        spark.stop()

    print()
    print(f"{'size':>6} {'reader':>9} {'rows/s':>12} {'MB/s':>8} {'vs consumer':>12}")
    for size, c_s, c_b, s_s, s_b, s_cpu, cold, narrow in results:
        c_rate, s_rate = args.records / c_s, args.records / s_s
        print(f"{size:>5}B {'consumer':>9} {c_rate:>12,.0f} {c_b / c_s / MB:>8.1f} {'1.00x':>12}")
        ratio = s_rate / c_rate
        verdict = "ok" if ratio >= 0.5 else "BELOW the 0.5x floor"
        print(
            f"{size:>5}B {'spark':>9} {s_rate:>12,.0f} {s_b / s_s / MB:>8.1f} "
            f"{ratio:>11.2f}x  {verdict}"
        )
        for label, (secs, cpu) in (
            ("first", (cold[0], cold[2])),
            ("second", (s_s, s_cpu)),
            ('third, schema "value binary",', (narrow[0], narrow[2])),
        ):
            per_row = {k: v / args.records * 1e6 for k, v in cpu.items()}
            print(
                f"{size:>5}B spark {label} read: {args.records / secs:,.0f} rows/s, CPU per row: "
                f"Python workers {per_row['python']:.2f} us, JVM {per_row['java']:.2f} us"
            )


if __name__ == "__main__":
    main()
