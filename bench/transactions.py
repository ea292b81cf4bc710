"""Transactional produce and read_committed consume on a REAL local 3-broker cluster
(``headwater.testing.Cluster``), each side by side with its plain counterpart in one run.

* produce: 1 KiB records for ``--seconds`` to a 6-partition topic (replication 3,
  acks=all): plain idempotent, then transactional with a commit every
  ``--transaction-ms`` (Kafka's ProducerPerformance ``--transaction-duration-ms``);
* consume: the transactional topic read from the start with ``read_uncommitted``, then
  with ``read_committed``.

Prints records/s and MiB/s; the ratios are the issue's goals (transactional produce
>= 0.8x plain, read_committed >= 0.9x read_uncommitted).

    .venv/bin/python bench/transactions.py [--seconds 10] [--transaction-ms 100]
"""

from __future__ import annotations

import argparse
import time
import uuid

import headwater
from headwater.testing import Cluster

RECORD = b"x" * 1024
PARTITIONS = 6
OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "log.cleaner.backoff.ms": "60000",
}


def make_topic(admin: headwater.Admin) -> str:
    name = f"bench-{uuid.uuid4().hex[:6]}"
    admin.create_topic(name, PARTITIONS, 3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        parts = admin.describe_topics([name])[name].partitions
        if len(parts) == PARTITIONS and all(p.leader >= 0 for p in parts):
            return name
        time.sleep(0.1)
    raise SystemExit(f"{name} has no leaders after 60 s")


def produce_plain(bootstrap: str, topic: str, seconds: float) -> int:
    sent = 0
    with headwater.Producer(bootstrap, linger_ms=5, batch_size=256 * 1024) as p:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(1000):
                p.send(topic, RECORD)
            sent += 1000
        p.flush(120)
    return sent


def produce_transactional(bootstrap: str, topic: str, seconds: float, txn_ms: float) -> int:
    sent = 0
    with headwater.Producer(
        bootstrap,
        linger_ms=5,
        batch_size=256 * 1024,
        transactional_id=f"bench-{uuid.uuid4().hex[:6]}",
    ) as p:
        p.init_transactions()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            p.begin_transaction()
            txn_end = time.monotonic() + txn_ms / 1000.0
            while time.monotonic() < txn_end:
                for _ in range(100):
                    p.send(topic, RECORD)
                sent += 100
            p.commit_transaction()
    return sent


def consume(bootstrap: str, topic: str, count: int, level: str) -> float:
    with headwater.Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=level
    ) as c:
        c.assign([headwater.TopicPartition(topic, p) for p in range(PARTITIONS)])
        got, start = 0, time.monotonic()
        while got < count and time.monotonic() - start < 300:
            got += len(c.poll(500, max_records=10_000))
        return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--transaction-ms", type=float, default=100.0)
    args = parser.parse_args()
    mib = len(RECORD) / (1 << 20)
    with Cluster(brokers=3, overrides=OVERRIDES) as c, headwater.Admin(c.bootstrap) as admin:
        plain_topic, txn_topic = make_topic(admin), make_topic(admin)
        plain = produce_plain(c.bootstrap, plain_topic, args.seconds) / args.seconds
        txn = (
            produce_transactional(c.bootstrap, txn_topic, args.seconds, args.transaction_ms)
            / args.seconds
        )
        print(f"produce plain (idempotent, acks=all): {plain:,.0f} rec/s, {plain * mib:.1f} MiB/s")
        print(
            f"produce transactional ({args.transaction_ms:.0f} ms transactions): "
            f"{txn:,.0f} rec/s, {txn * mib:.1f} MiB/s ({txn / plain:.2f}x plain)"
        )
        count = int(txn * args.seconds)
        uncommitted = count / consume(c.bootstrap, txn_topic, count, "read_uncommitted")
        committed = count / consume(c.bootstrap, txn_topic, count, "read_committed")
        print(f"consume read_uncommitted: {uncommitted:,.0f} rec/s")
        print(
            f"consume read_committed: {committed:,.0f} rec/s "
            f"({committed / uncommitted:.2f}x read_uncommitted)"
        )


if __name__ == "__main__":
    main()
