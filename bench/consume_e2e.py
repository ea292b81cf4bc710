"""``headwater perf consume`` against a real broker: records/s and the consumer's CPU per record.

    .venv/bin/python bench/consume_e2e.py [--bootstrap HOST:PORT] [--rounds 3]
        [--headwater PATH ...] [--sizes 100,1024] [--records 1000000,500000] [--group]

Writes ``--records`` records of each value size (``headwater perf produce``,
1 MiB batches, as bench/kafka_side_by_side.sh does) to a new one-partition
topic, then reads them back with ``<headwater> perf consume`` ``--rounds``
times for each ``--headwater`` executable given, alternating (default: this
checkout's), so that two code versions are compared on the same broker and
data: give ``/work/main/.venv/bin/headwater`` and ``.venv/bin/headwater``.  Per
run it prints the records/s and MB/s ``perf consume`` reports and the consumer
process's CPU (user + system, from ``wait4``, its start included) per record;
then the median of each.  With ``--group`` each executable also reads as a
group member (``perf consume --group``, a new group each run: ``subscribe()``,
the time until the group assigns the partition left out of the rate as Kafka's
ConsumerPerformance does; the CPU figure includes the join), alternating with
the assigned reads, so that the two paths are compared run by run.  Without
``--bootstrap`` a one-broker ``headwater dev up`` cluster is started in a
temporary directory and stopped at the end.  The broker's CPU over each read
(all its threads, anything else it serves meanwhile included) is printed when
its pid is known: the cluster started here, or ``--broker-pid``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
OWN = HERE / ".venv" / "bin" / "headwater"


@contextlib.contextmanager
def cluster(bootstrap: str | None, broker_pid: int | None) -> Iterator[tuple[str, int | None]]:
    """(bootstrap, the broker's pid when known)."""
    if bootstrap:
        yield bootstrap, broker_pid
        return
    with tempfile.TemporaryDirectory(prefix="consume-e2e-") as tmp:
        out = subprocess.run(
            [str(OWN), "dev", "up", "--brokers", "1", "--data-dir", tmp, "--output", "json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        try:
            up = json.loads(out)
            yield str(up["bootstrap"]), int(up["brokers"][0]["pid"])
        finally:
            subprocess.run([str(OWN), "dev", "down", "--data-dir", tmp], capture_output=True)


def process_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a running process (0 without a pid)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    hw = [str(OWN)]
    subprocess.run(
        [
            *hw,
            "topics",
            "create",
            topic,
            "--partitions",
            "1",
            "--replication-factor",
            "1",
            "--bootstrap",
            bootstrap,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *hw,
            "perf",
            "produce",
            "--topic",
            topic,
            "--num-records",
            str(count),
            "--record-size",
            str(size),
            "--acks",
            "1",
            "--batch-size",
            "1048576",
            "--linger-ms",
            "5",
            "--bootstrap",
            bootstrap,
            "--output",
            "json",
        ],
        check=True,
        capture_output=True,
    )


def consume(
    headwater: str, bootstrap: str, topic: str, count: int, group: bool
) -> tuple[float, float, float]:
    """(records/s, MB/s, CPU seconds of the consumer process)."""
    proc = subprocess.Popen(
        [
            headwater,
            "perf",
            "consume",
            "--topic",
            topic,
            "--messages",
            str(count),
            "--bootstrap",
            bootstrap,
            "--output",
            "json",
            *(["--group", f"consume-e2e-{uuid.uuid4().hex[:8]}"] if group else []),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{headwater} perf consume failed ({proc.returncode}): {out}")
    summary = json.loads(out.strip().splitlines()[-1])
    return summary["records_per_s"], summary["mb_per_s"], usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap")
    ap.add_argument(
        "--broker-pid", type=int, help="with --bootstrap: the broker's pid, for its CPU per record"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--headwater", action="append", help="a headwater executable (repeatable)")
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--records", default="1000000,500000", help="records per size, in order")
    ap.add_argument("--group", action="store_true", help="also read as a group member")
    args = ap.parse_args()
    exes = args.headwater or [str(OWN)]
    modes = ["assigned", "group"] if args.group else ["assigned"]
    runs_of = [(exe, mode) for exe in exes for mode in modes]
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(n) for n in args.records.split(",")]
    with cluster(args.bootstrap, args.broker_pid) as (bootstrap, broker):
        for size, count in zip(sizes, counts, strict=True):
            topic = f"consume-e2e-{size}-{uuid.uuid4().hex[:8]}"
            produce(bootstrap, topic, count, size)
            results: dict[tuple[str, str], list[tuple[float, float, float]]] = {
                k: [] for k in runs_of
            }
            broker_cpu: dict[tuple[str, str], list[float]] = {k: [] for k in runs_of}
            for r in range(args.rounds):
                for exe, mode in runs_of:
                    before = process_cpu_s(broker)
                    rate, mb, cpu = consume(exe, bootstrap, topic, count, mode == "group")
                    served = process_cpu_s(broker) - before
                    results[exe, mode].append((rate, mb, cpu))
                    broker_cpu[exe, mode].append(served)
                    print(
                        f"{size:>5} B round {r + 1} {exe} {mode}: {rate:,.0f} rec/s "
                        f"{mb:.1f} MB/s, consumer CPU {cpu:.2f} s = {cpu / count * 1e6:.2f} "
                        "us/record"
                        + (
                            f", broker CPU {served:.2f} s = {served / count * 1e6:.2f} us/record"
                            if broker
                            else ""
                        ),
                        flush=True,
                    )
            for (exe, mode), runs in results.items():
                rates = sorted(x[0] for x in runs)
                cpus = sorted(x[2] / count * 1e6 for x in runs)
                print(
                    f"{size:>5} B x {count} {exe} {mode}: "
                    f"median {statistics.median(rates):,.0f} rec/s "
                    f"({rates[0]:,.0f}-{rates[-1]:,.0f}), CPU {statistics.median(cpus):.2f} "
                    f"us/record ({cpus[0]:.2f}-{cpus[-1]:.2f}), start included"
                    + (
                        ", broker CPU "
                        f"{statistics.median(broker_cpu[exe, mode]) / count * 1e6:.2f} us/record"
                        if broker
                        else ""
                    ),
                    flush=True,
                )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
