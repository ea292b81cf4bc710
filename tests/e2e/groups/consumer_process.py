"""A group consumer run as its own process by ``test_commits`` (which SIGKILLs it).

``python consumer_process.py BOOTSTRAP TOPIC GROUP commit|nocommit``: prints one line
``<partition> <offset>`` per record, and after each ``commit()`` a line ``committed``.
"""

from __future__ import annotations

import sys

import headwater


def main() -> None:
    bootstrap, topic, group, mode = sys.argv[1:5]
    with headwater.Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    ) as consumer:
        for _ in range(10_000):
            recs = consumer.poll(200, max_records=5)
            for r in recs:
                print(r.partition, r.offset, flush=True)
            if recs and mode == "commit":
                consumer.commit()
                print("committed", flush=True)


if __name__ == "__main__":
    main()
