"""When the producer's sender thread gets to run after ``send``, with and without a consumer
in the same process (issue 16, one-at-a-time end-to-end latency).

    .venv/bin/python bench/e2e_sender_wake.py --bootstrap HOST:PORT --topic T [--consumer]

Sends one 100 B record at a time (acks=1, linger 0) to ``--topic`` (one partition) and
waits for its acknowledgement; with ``--consumer``, also polls each record back from a
consumer in the same process, as ``headwater perf end-to-end`` does.  Prints, for each
step of the sender thread's loop, the median time after ``send`` returned at which the
step began (``>``) or ended (``<``): its wake-up from ``Event.wait``, the metadata
refresh check, finished requests, expiry, the ready check, the producer id, the drain,
the encoding, and the start of the Produce call.  The producer's sender and stub are
wrapped, nothing else.  Never asserts.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from typing import Any

import headwater
from headwater.client.types import TopicPartition

WARMUP = 200
STEPS = [
    ("_metadata", "maybe_refresh", "refresh"),
    (None, "_handle_finished", "finished"),
    ("_acc", "expire", "expire"),
    ("_acc", "ready", "ready"),
    (None, "_ensure_producer_id", "producer id"),
    ("_acc", "drain", "drain"),
    (None, "_encode", "encode"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--consumer", action="store_true", help="poll each record back too")
    args = ap.parse_args()
    pc = time.perf_counter
    marks: dict[str, float] = {}
    producer = headwater.Producer(args.bootstrap, acks=1, linger_ms=0)
    sender = producer._sender

    def timed(owner: Any, name: str, label: str) -> None:
        method = getattr(owner, name)

        @functools.wraps(method)
        def call(*a: Any, **kw: Any) -> Any:
            marks.setdefault(label + " >", pc())
            try:
                return method(*a, **kw)
            finally:
                marks.setdefault(label + " <", pc())

        setattr(owner, name, call)

    for attr, name, label in STEPS:
        timed(getattr(sender, attr) if attr else sender, name, label)
    wakeup = sender._wakeup
    event_wait = wakeup.wait

    def wait(timeout: float | None = None) -> bool:
        woke = event_wait(timeout)
        marks.setdefault("woke", pc())
        return woke

    wakeup.wait = wait  # type: ignore[method-assign]
    consumer = None
    if args.consumer:
        consumer = headwater.Consumer(
            bootstrap_servers=args.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=500
        )
        tp = TopicPartition(args.topic, 0)
        consumer.assign([tp])
        consumer.position(tp)
    rows: list[dict[str, float]] = []
    try:
        for i in range(WARMUP + args.records):
            if i == WARMUP:  # the stubs exist now: time their Produce calls
                for _channel, stub in producer._channels._brokers.values():
                    timed(stub, "Produce", "Produce call")
            marks.clear()
            future = producer.send(args.topic, b"x" * 100)
            sent = pc()
            future.result(10)
            acked = pc()
            for _ in range(100 if consumer else 0):  # bounded: 100 s at most
                if consumer is not None and consumer.poll(1000):
                    break
            if i >= WARMUP:
                row = {k: (v - sent) * 1e6 for k, v in marks.items()}
                row["result() returns"] = (acked - sent) * 1e6
                rows.append(row)
    finally:
        producer.close()
        if consumer is not None:
            consumer.close()
    labels = {k for r in rows for k in r}
    for label in sorted(labels, key=lambda k: statistics.median(r[k] for r in rows if k in r)):
        col = [r[label] for r in rows if label in r]
        print(f"{label:20s} p50 {statistics.median(col):8.1f} us after send returned")


if __name__ == "__main__":
    main()
