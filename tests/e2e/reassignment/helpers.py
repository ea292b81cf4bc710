"""Shared steps of the reassignment e2e tests: the CLI as a subprocess, records in and out."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from headwater.client import Admin, Producer
from headwater.client.consumer.range_reader import RangeReader
from headwater.values import TopicPartition


def headwater(*args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run the ``headwater`` command; never raises on a non-zero exit."""
    return subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def headwater_json(*args: str, timeout_s: float = 120.0) -> Any:
    done = headwater(*args, "--output", "json", timeout_s=timeout_s)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return json.loads(done.stdout)


def produce(bootstrap: str, topic: str, count: int, *, size: int = 100) -> set[bytes]:
    """``count`` acks=all records spread over the partitions; the values acknowledged."""
    values = {f"{i:08d}".encode() + b"x" * max(0, size - 8) for i in range(count)}
    producer = Producer(bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, value=v, key=v[:8]) for v in sorted(values)]
        producer.flush(timeout=60)
        for f in futures:
            f.result(timeout=60)
    finally:
        producer.close()
    return values


def read_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every record of every partition, from the log start to the high watermark."""
    out: list[bytes] = []
    with Admin(bootstrap) as admin:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        start = admin.list_offsets(dict.fromkeys(tps, "earliest"))
        end = admin.list_offsets(dict.fromkeys(tps, "latest"))
    with RangeReader(bootstrap, default_api_timeout_ms=30000) as reader:
        for tp in tps:
            lo, hi = start[tp], end[tp]
            assert lo is not None and hi is not None
            for chunk in reader.read_range(tp, lo.offset, hi.offset):
                out += [r.value or b"" for r in chunk.all_records()]
    return out


def replicas(admin: Admin, topic: str) -> dict[int, tuple[int, ...]]:
    return {p.partition: p.replicas for p in admin.describe_topics([topic])[topic].partitions}


def isrs(admin: Admin, topic: str) -> dict[int, tuple[int, ...]]:
    return {p.partition: p.isr for p in admin.describe_topics([topic])[topic].partitions}


def plan_file_json(targets: dict[int, Sequence[int]], topic: str) -> str:
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": topic, "partition": p, "replicas": list(r)} for p, r in targets.items()
            ],
        }
    )
