"""The `make up` demo: create a topic on the local cluster, produce, consume, describe.

Reads the bootstrap address from the `headwater dev` state in --data-dir, so it
runs against whatever `headwater dev up` started.  Exits non-zero with one line
on failure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import headwater
from headwater import errors
from headwater.client import NewTopic


def bootstrap_of(data_dir: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "headwater.cli.main",
            "dev",
            "status",
            "--data-dir",
            data_dir,
            "--output",
            "json",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return str(json.loads(out)["bootstrap"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--topic", default="demo")
    parser.add_argument("--records", type=int, default=1000)
    args = parser.parse_args()
    bootstrap = bootstrap_of(args.data_dir)
    print(f"demo: cluster at {bootstrap}")
    with headwater.Admin(bootstrap) as admin:
        try:
            admin.create_topics([NewTopic(args.topic, 3, 3, configs={"min.insync.replicas": "2"})])
            print(f"demo: created topic {args.topic!r} (3 partitions, RF=3, min.insync.replicas=2)")
        except errors.TopicAlreadyExistsError:
            print(f"demo: topic {args.topic!r} already exists")
    started = time.monotonic()
    with headwater.Producer(bootstrap, acks="all", linger_ms=5) as producer:
        futures = [
            producer.send(args.topic, key=f"user-{i % 10}".encode(), value=f"event {i}".encode())
            for i in range(args.records)
        ]
        producer.flush(30)
        offsets = [f.result(30).offset for f in futures]
    print(
        f"demo: produced {len(offsets)} records with acks=all in {time.monotonic() - started:.2f}s"
    )
    seen = 0
    with headwater.Consumer(
        args.topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        deadline = time.monotonic() + 30
        while seen < args.records and time.monotonic() < deadline:
            seen += len(consumer.poll(timeout_ms=500))
    print(f"demo: consumed {seen} records")
    print(f"demo: try `headwater topics describe {args.topic} --bootstrap {bootstrap}`")
    print("demo: stop the cluster with `make down`")
    return 0 if seen >= args.records else 1


if __name__ == "__main__":
    sys.exit(main())
