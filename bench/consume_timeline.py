"""Where a consumer's time goes at full speed: its fetch cycle and each thread's CPU.

    .venv/bin/python bench/consume_timeline.py --bootstrap HOST:PORT --topic T --messages N

Reads ``N`` records of ``T`` from the beginning as ``headwater perf consume`` does
(``max_poll_records=10000``, the value and key sizes summed per record) in this
process, with the fetcher's steps stamped: a fetch starting (``_start_fetch``), its
answer reaching the fetcher thread (``_handle``), the answers decoded
(``_decode_pending``) and ``poll`` taking records.  Prints the records/s, the
average gaps of the fetch cycle (send to answer: the broker and the transport;
answer to the next send: this process), the share of the run with a fetch in
flight, and the CPU of each thread of the process (from ``/proc``: Python's by
name, gRPC's C threads by their OS name) per record.  Never asserts.
"""

from __future__ import annotations

import argparse
import itertools
import operator
import os
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater.client.consumer import fetcher as fetcher_mod
from headwater.client.consumer.consumer import Consumer
from headwater.client.types import TopicPartition

CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process, by name (several of a name added up)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = defaultdict(float)
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        cpu = (int(fields[11]) + int(fields[12])) / CLOCK_TICK
        name = names.get(int(task.name), comm)
        out[name.split("-")[0] if name.startswith("headwater-call") else name] += cpu
    return out


def stamp(cls: Any, name: str, marks: list[tuple[str, float]], label: str) -> None:
    original: Callable[..., Any] = getattr(cls, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        marks.append((label + ">", time.perf_counter()))
        try:
            return original(*args, **kwargs)
        finally:
            marks.append((label + "<", time.perf_counter()))

    setattr(cls, name, wrapped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--messages", type=int, required=True)
    args = ap.parse_args()
    marks: list[tuple[str, float]] = []
    stamp(fetcher_mod.Fetcher, "_start_fetch", marks, "send")
    stamp(fetcher_mod.Fetcher, "_handle", marks, "answer")
    stamp(fetcher_mod.Fetcher, "_decode_pending", marks, "decode")
    value, key = operator.itemgetter(5), operator.itemgetter(4)
    count = nbytes = 0
    with Consumer(
        bootstrap_servers=args.bootstrap, auto_offset_reset="earliest", max_poll_records=10000
    ) as consumer:
        consumer.assign([TopicPartition(args.topic, 0)])
        cpu0 = thread_cpu()
        start = time.perf_counter()
        while count < args.messages:
            recs = consumer.poll(500)
            nbytes += sum(map(len, filter(None, map(value, recs))))
            nbytes += sum(map(len, filter(None, map(key, recs))))
            count += len(recs)
        elapsed = time.perf_counter() - start
        cpu1 = thread_cpu()
    print(
        f"{count} records in {elapsed:.2f} s: {count / elapsed:,.0f} rec/s, "
        f"{nbytes / elapsed / 1e6:.1f} MB/s"
    )
    marks = [m for m in marks if m[1] >= start]
    sends = [t for label, t in marks if label == "send>"]
    answers = [t for label, t in marks if label == "answer>"]
    handled = [t for label, t in marks if label == "answer<"]
    decodes = [
        b - a
        for (la, a), (lb, b) in itertools.pairwise(marks)
        if la == "decode>" and lb == "decode<"
    ]
    checks = [h - a for a, h in zip(answers, handled, strict=False)]
    n = min(len(sends), len(answers))
    if n > 1:
        rtt = [answers[i] - sends[i] for i in range(n)]
        turn = [sends[i + 1] - answers[i] for i in range(n - 1)]
        in_flight = sum(rtt) / (answers[n - 1] - sends[0])
        print(f"fetches {len(sends)}, {count / len(sends):.0f} records each")
        print(
            f"send -> answer in fetcher (broker, transport, receive): "
            f"median {statistics.median(rtt) * 1e3:.2f} ms, mean {statistics.mean(rtt) * 1e3:.2f}"
        )
        print(
            f"answer -> next send (this process): median {statistics.median(turn) * 1e3:.2f} ms, "
            f"mean {statistics.mean(turn) * 1e3:.2f}"
        )
        print(f"answer handled (CRC check) mean {statistics.mean(checks) * 1e3:.2f} ms")
        if decodes:
            print(f"decode mean {statistics.mean(decodes) * 1e3:.2f} ms")
        print(f"a fetch in flight {in_flight:.0%} of the time")
    print("CPU per thread, us/record:")
    for name in sorted(cpu1, key=lambda k: -(cpu1[k] - cpu0.get(k, 0.0))):
        used = cpu1[name] - cpu0.get(name, 0.0)
        if used > 0:
            print(f"  {name:32s} {used / count * 1e6:6.3f}")
    total = sum(cpu1.values()) - sum(cpu0.values())
    print(f"  {'all':32s} {total / count * 1e6:6.3f}")


if __name__ == "__main__":
    main()
