"""Headwater Console's page times on a REAL local one-broker cluster (``headwater.testing``).

Creates ``--topics`` topics (one partition each) and ``--groups`` consumer groups (each with
a committed offset), fills one partition with ``--records`` records of 100 bytes and
another with ``--partition-bytes`` of 1 KiB records (``10G`` for the ten-gigabyte case;
the log lands in the test cluster's temporary directory, so that much disk must be
free), serves the console on a thread and prints, over ``--repeat`` requests each (after
one warm-up): the topics page, the consumer groups page, one group's page, and the
message browser reading 100 records from the middle of each full partition.  Each time is
the whole HTTP request as a browser makes it (the client calls, rendering, the transfer)
on 127.0.0.1.  Figures only; never asserted.

    .venv/bin/python bench/console.py [--topics 1000] [--groups 200] [--records 100000]
        [--partition-bytes 1G]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import urllib.request

from headwater.client import Admin, NewTopic, Producer, TopicPartition
from headwater.console.app import Settings, make_app
from headwater.console.backend import ClientOptions, ClusterView
from headwater.console.server import RunningConsole
from headwater.testing import Cluster

OVERRIDES = {"offsets.topic.num.partitions": "5", "group.initial.rebalance.delay.ms": "0"}
MIB = 1024 * 1024
UNITS = {"": 1, "K": 1024, "M": MIB, "G": 1024 * MIB}


def byte_size(text: str) -> int:
    """``512M``, ``10G``, ``100000``: a byte count (binary units)."""
    unit = text[-1:].upper() if text[-1:].isalpha() else ""
    if unit not in UNITS:
        raise argparse.ArgumentTypeError(f"{text!r}: a size is a number with K, M or G")
    try:
        number = float(text[: len(text) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a size is a number with K, M or G") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a size cannot be negative")
    return int(number * UNITS[unit])


def fill(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    """Send ``count`` records of ``value`` to partition 0 of ``topic``; MB/s."""
    start = time.perf_counter()
    with Producer(
        bootstrap, acks=1, linger_ms=5, batch_size=MIB, buffer_memory=256 * MIB
    ) as producer:
        for _ in range(count):
            producer.send(topic, value, partition=0)
        producer.flush()
    return count * len(value) / (time.perf_counter() - start) / 1e6


def timed(url: str, repeat: int) -> tuple[float, float, int]:
    """(median ms, max ms, bytes) of GET ``url``, after one warm-up request."""
    with urllib.request.urlopen(url, timeout=120) as resp:
        size = len(resp.read())
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as resp:
            assert resp.status == 200, url
            resp.read()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), max(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument(
        "--partition-bytes",
        type=byte_size,
        default=256 * MIB,
        help="bytes of 1 KiB records in the large partition (default 256M; 0: none)",
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with Cluster(brokers=1, overrides=OVERRIDES) as cluster, Admin(cluster.bootstrap) as admin:
        start = time.perf_counter()
        names = [f"bench-{i:05d}" for i in range(args.topics)]
        for i in range(0, len(names), 100):
            admin.create_topics([NewTopic(n, 1, 1) for n in names[i : i + 100]])
        print(f"created {args.topics} topics in {time.perf_counter() - start:.1f} s")

        data = names[0]
        fill(cluster.bootstrap, data, args.records, b"x" * 100)
        large = args.partition_bytes // 1024
        if large:
            admin.create_topics([NewTopic("bench-large", 1, 1)])
            rate = fill(cluster.bootstrap, "bench-large", large, os.urandom(1024))
            print(
                f"wrote {large} records of 1 KiB ({args.partition_bytes / MIB:.0f} MiB) "
                f"to bench-large at {rate:.0f} MB/s"
            )
        start = time.perf_counter()
        groups = [f"bench-group-{g:04d}" for g in range(args.groups)]
        for g in groups:
            admin.alter_consumer_group_offsets(g, {TopicPartition(data, 0): args.records // 2})
        print(f"committed offsets of {args.groups} groups in {time.perf_counter() - start:.1f} s")

        view = ClusterView(ClientOptions(cluster.bootstrap, request_timeout_ms=30000))
        try:
            with RunningConsole(make_app(view, Settings())) as console:
                middle = args.records // 2
                pages = [
                    (f"topics page ({args.topics} topics)", "/topics"),
                    (f"groups page ({args.groups} groups)", "/groups"),
                    ("one group's page", f"/group?id={groups[0]}" if groups else "/groups"),
                    (
                        f"100 records from offset {middle} of {args.records}",
                        f"/topics/{data}/messages?start=offset&offset={middle}&limit=100",
                    ),
                ]
                if large:
                    pages.append(
                        (
                            f"100 records of 1 KiB from offset {large // 2} of {large}",
                            f"/topics/bench-large/messages?start=offset&offset={large // 2}"
                            "&limit=100&format=hex",
                        )
                    )
                for label, path in pages:
                    median, worst, size = timed(console.url + path, args.repeat)
                    print(
                        f"{label:<44} median {median:7.1f} ms  max {worst:7.1f} ms  "
                        f"({size / 1024:.0f} KiB)"
                    )
        finally:
            view.close()


if __name__ == "__main__":
    main()
