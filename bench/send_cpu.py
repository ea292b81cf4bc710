"""CPU per record of ``Producer.send`` with a callback, then ``flush`` (issue 16).

    .venv/bin/python bench/send_cpu.py --bootstrap HOST:PORT [--records 500000]
        [--no-callback] [--broker-pid PID]

100 B records, acks=1, 1 MiB batches, linger 5 ms, one no-op callback per record,
to a new one-partition topic.  Prints records/s, the process's CPU per record
(``time.process_time``: every thread of the client), the caller's thread's
(``time.thread_time``: ``send`` itself) and, with ``--broker-pid``, the broker's
(from ``/proc``).  CPU per record is the figure to compare between versions on
a shared machine; alternate the runs.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid

import headwater


def _proc_cpu_s(pid: int | None) -> float:
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().split(")")[-1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--no-callback", action="store_true")
    ap.add_argument("--broker-pid", type=int)
    args = ap.parse_args()
    topic = "send-cpu-" + uuid.uuid4().hex[:8]
    with headwater.Admin(args.bootstrap) as admin:
        admin.create_topic(topic, 1, 1)
        for _ in range(100):
            parts = admin.describe_topics([topic])[topic].partitions
            if all(p.leader >= 0 for p in parts):
                break
            time.sleep(0.05)
    n = args.records
    value = b"x" * 100
    calls = [0]

    def callback(md: object, exc: object) -> None:
        calls[0] += 1

    with headwater.Producer(args.bootstrap, acks=1, batch_size=1 << 20, linger_ms=5) as p:
        p.send(topic, value).result(30)
        send = p.send
        b0, c0, t0 = _proc_cpu_s(args.broker_pid), time.process_time(), time.thread_time()
        w0 = time.perf_counter()
        if args.no_callback:
            for _ in range(n):
                send(topic, value)
        else:
            for _ in range(n):
                send(topic, value, callback=callback)
        p.flush()
        w1, c1, t1 = time.perf_counter(), time.process_time(), time.thread_time()
        b1 = _proc_cpu_s(args.broker_pid)
    print(
        f"{n / (w1 - w0):.0f} records/s; CPU per record: process {1e6 * (c1 - c0) / n:.2f} us, "
        f"caller's thread {1e6 * (t1 - t0) / n:.2f} us"
        + (f", broker {1e6 * (b1 - b0) / n:.2f} us" if args.broker_pid else "")
        + f"; callbacks {calls[0]}"
    )


if __name__ == "__main__":
    main()
