"""Where one-at-a-time end-to-end latency goes, step by step (issue 16).

    .venv/bin/python bench/e2e_steps.py --bootstrap HOST:PORT [--records 2000]

Sends one 100 B record at a time (acks=1, linger 0, as ``headwater perf
end-to-end``), waits for its acknowledgement, polls it back, and timestamps
each step: ``send`` returning, the sender thread's ``CallPool.submit`` of the
Produce request (if it went through the pool), the start and end of the
blocking Produce call (on the pool worker, or on the sender thread itself when
it calls inline, see ``headwater.client.transport.inline_calls``, as a message on a
``ProduceStream``: then the submit step is 0 and "send -> sender submits" ends
when the call starts), ``result()``
returning, and ``poll`` returning the record.  Prints the median and average of
each step in microseconds (after 200 untimed records), and how many timed
requests went through the pool.  The producer under test's pool, Broker stub
and inline caller are wrapped, nothing else.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

import headwater
from headwater.client.types import TopicPartition

STEPS = [
    "send() returns",
    "send -> sender submits",
    "submit -> call starts",
    "gRPC call",
    "call end -> result()",
    "result() -> polled",
    "total",
]
WARMUP = 200


def new_topic(bootstrap: str, prefix: str) -> str:
    """A new one-partition topic named ``prefix`` + 8 hex digits, its leader known."""
    topic = prefix + uuid.uuid4().hex[:8]
    with headwater.Admin(bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
        for _ in range(100):  # bounded: 5 s
            parts = admin.describe_topics([topic])[topic].partitions
            if all(p.leader >= 0 for p in parts):
                break
            time.sleep(0.05)
    return topic


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=2000)
    args = ap.parse_args()
    topic = new_topic(args.bootstrap, "e2e-steps-")
    tp = TopicPartition(topic, 0)
    consumer = headwater.Consumer(
        bootstrap_servers=args.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=500
    )
    consumer.assign([tp])
    consumer.position(tp)
    producer = headwater.Producer(args.bootstrap, acks=1, linger_ms=0)
    marks: dict[str, float] = {}
    pool = producer._channels.pool
    submit = pool.submit
    pc = time.perf_counter

    def timed_submit(method: Any, request: Any, **kw: Any) -> None:
        marks["submit"] = pc()
        submit(method, request, **kw)

    def timed(method: Any) -> Any:
        def call(*args: Any, **kw: Any) -> Any:
            marks["call"] = pc()
            try:
                return method(*args, **kw)
            finally:
                marks["called"] = pc()

        return call

    pool.submit = timed_submit  # type: ignore[method-assign]
    rows: list[tuple[float, ...]] = []
    pooled = 0
    try:
        for i in range(WARMUP + args.records):
            if i == WARMUP:  # the stubs exist now: time their Produce calls
                for _channel, stub in producer._channels._brokers.values():
                    stub.Produce = timed(stub.Produce)  # type: ignore[method-assign]
                inline = producer._sender._inline  # an inline call: a message on a stream
                inline.call = timed(inline.call)  # type: ignore[method-assign]
            marks.pop("submit", None)
            value = b"%08d" % i + b"x" * 92
            t0 = pc()
            future = producer.send(topic, value)
            t1 = pc()
            future.result(10)
            t2 = pc()
            for _ in range(100):  # bounded: 100 s at most
                if consumer.poll(1000):
                    break
            t3 = pc()
            if i >= WARMUP:
                submitted = marks.get("submit", marks["call"])
                pooled += "submit" in marks
                rows.append(
                    (
                        t1 - t0,
                        submitted - t0,
                        marks["call"] - submitted,
                        marks["called"] - marks["call"],
                        t2 - marks["called"],
                        t3 - t2,
                        t3 - t0,
                    )
                )
    finally:
        producer.close()
        consumer.close()
    for k, name in enumerate(STEPS):
        col = sorted(r[k] for r in rows)
        print(
            f"{name:24s} p50 {1e6 * col[len(col) // 2]:8.1f} us"
            f"  avg {1e6 * statistics.fmean(col):8.1f} us"
        )
    print(f"{pooled} of {len(rows)} timed requests through the pool")


if __name__ == "__main__":
    main()
