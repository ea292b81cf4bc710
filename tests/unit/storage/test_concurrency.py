"""Readers on other threads while one thread appends and retention runs.

Covers the Log's locking contract: concurrent reads always see whole batches
with contiguous offsets below the log end offset, while the writer rolls
segments and retention deletes old ones.  Bounded in count, no timing.
"""

from __future__ import annotations

import threading

from headwater.errors import OffsetOutOfRangeError
from headwater.storage import Log

from .helpers import batch, offsets_and_values


def test_reads_during_appends_and_retention(log: Log) -> None:
    failures: list[str] = []
    done = threading.Event()

    def reader() -> None:
        for _ in range(2000):
            if done.is_set():
                return
            start = log.log_start_offset
            try:
                data = log.read(start, 500).records
            except OffsetOutOfRangeError:
                continue  # retention moved the start meanwhile: allowed
            offsets = [o for o, _ in offsets_and_values(data)]
            if offsets and offsets != list(range(offsets[0], offsets[0] + len(offsets))):
                failures.append(f"non-contiguous read {offsets}")

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(300):
        log.append_as_leader(batch(2, first=2 * i, size=20), leader_epoch=0, now_ms=0)
        if i % 50 == 49:
            log.delete_records_before(log.log_end_offset - 20)
            log.delete_retention_segments(now_ms=0)
    done.set()
    for t in threads:
        t.join()
    assert failures == []
    assert log.log_end_offset == 600
