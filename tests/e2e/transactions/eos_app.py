"""A consume-transform-produce application, run as its own process by
``test_eos_pipeline.py`` (which kill -9s and restarts it).

    python eos_app.py BOOTSTRAP GROUP SOURCE SINK TRANSACTIONAL_ID

It reads SOURCE in GROUP with ``read_committed``, writes each record's value with
``in-`` replaced by ``out-`` to the same partition of SINK, and commits the output and
the consumed offsets in one transaction per poll.  Any error ends the process with
code 3 (the test starts a new one: ``init_transactions`` fences this one and aborts
what it left open); it never ends on its own otherwise.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import headwater


def main(bootstrap: str, group: str, source: str, sink: str, tid: str) -> None:
    producer = headwater.Producer(
        bootstrap,
        transactional_id=tid,
        transaction_timeout_ms=10000,
        max_block_ms=30000,
        request_timeout_ms=10000,
    )
    consumer = headwater.Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=20000,
        fetch_max_wait_ms=200,
    )
    producer.init_transactions()
    print("initialized", flush=True)
    consumer.subscribe([source])
    while True:
        got = consumer.poll(500, max_records=5)
        if not got:
            continue
        producer.begin_transaction()
        ends: dict[headwater.TopicPartition, int] = {}
        for r in got:
            value = (r.value or b"").replace(b"in-", b"out-")
            producer.send(sink, value, key=r.key, partition=r.partition)
            tp = headwater.TopicPartition(r.topic, r.partition)
            ends[tp] = max(ends.get(tp, 0), r.offset + 1)
        time.sleep(0.05)  # widen the window in which a kill finds the transaction open
        producer.send_offsets_to_transaction(ends, consumer.group_metadata())
        producer.commit_transaction()
        print("committed", {f"{tp.topic}-{tp.partition}": o for tp, o in ends.items()}, flush=True)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:6])
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)
