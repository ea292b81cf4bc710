"""When each step of a one-at-a-time round trip happens, from ``send`` (issue 16).

    .venv/bin/python bench/e2e_timeline.py --bootstrap HOST:PORT [--records 2000]

One 100 B record at a time, acks=1, linger 0 (as ``headwater perf end-to-end``):
``send``, ``result()``, then ``poll`` until the record is back.  Prints, as the
median and average microseconds after ``send`` began (300 untimed records first):
the sender starting its inline Produce (a message on its ``ProduceStream``), the
answer reaching the sender, ``result()`` returning, the consumer's inline Fetch
answer reaching the fetcher thread, its records buffered for ``poll``, and
``poll`` returning them.  Where the fetch answer lands against the produce answer
says what the broker and the client's threads do between them.  The inline
callers and the fetcher's ``_buffer`` are wrapped, nothing else.  Never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import headwater
from e2e_steps import new_topic  # bench/ is on the path when run as a script
from headwater.client.types import TopicPartition

STEPS = [
    ("produce call starts", "produce_call"),
    ("produce answer in sender", "produce_answer"),
    ("result() returns", "result"),
    ("fetch answer in fetcher", "fetch_answer"),
    ("records buffered", "buffered"),
    ("poll returns them", "polled"),
]
WARMUP = 300


def _mark(obj: Any, name: str, marks: dict[str, float], start: str | None, end: str) -> None:
    """Wrap ``obj.name`` to stamp ``marks[start]`` on entry and ``marks[end]`` on exit."""
    inner: Callable[..., Any] = getattr(obj, name)
    pc = time.perf_counter

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if start is not None:
            marks[start] = pc()
        try:
            return inner(*args, **kwargs)
        finally:
            marks[end] = pc()

    setattr(obj, name, wrapped)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=2000)
    args = ap.parse_args()
    topic = new_topic(args.bootstrap, "e2e-timeline-")
    tp = TopicPartition(topic, 0)
    consumer = headwater.Consumer(
        bootstrap_servers=args.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=500
    )
    consumer.assign([tp])
    consumer.position(tp)
    producer = headwater.Producer(args.bootstrap, acks=1, linger_ms=0)
    marks: dict[str, float] = {}
    _mark(producer._sender._inline, "call", marks, "produce_call", "produce_answer")
    _mark(consumer._fetcher._inline, "call", marks, None, "fetch_answer")
    _mark(consumer._fetcher, "_buffer", marks, None, "buffered")
    pc = time.perf_counter
    rows: list[dict[str, float]] = []
    try:
        for i in range(WARMUP + args.records):
            marks.clear()
            t0 = pc()
            producer.send(topic, b"%08d" % i + b"x" * 92).result(10)
            marks["result"] = pc()
            for _ in range(100):  # bounded: 100 s at most
                if consumer.poll(1000):
                    break
            marks["polled"] = pc()
            if i >= WARMUP and all(key in marks for _, key in STEPS):
                rows.append({key: (marks[key] - t0) * 1e6 for _, key in STEPS})
    finally:
        producer.close()
        consumer.close()
    for name, key in STEPS:
        col = sorted(r[key] for r in rows)
        print(f"{name:26s} p50 {col[len(col) // 2]:7.0f} us  avg {statistics.fmean(col):7.0f} us")
    print(f"{len(rows)} of {args.records} timed round trips had every step inline")


if __name__ == "__main__":
    main()
