"""Follower appends keep the leader's offsets and epochs.

Covers: a replica built by copying a leader's fetched bytes ends identical,
the leader's epochs fill the follower's epoch cache, and offset gaps between
batches (as a compacted leader may have) are accepted when increasing.
"""

from __future__ import annotations

from pathlib import Path

from headwater.records import set_base_offset
from headwater.storage import Log

from .helpers import batch, open_log, read_all


def test_follower_copy_is_identical_to_the_leader(log: Log, tmp_path: Path) -> None:
    for epoch in (0, 0, 1, 1, 3):
        log.append_as_leader(
            batch(3, first=log.log_end_offset, size=30), leader_epoch=epoch, now_ms=0
        )
    follower = open_log(tmp_path / "replica", segment_bytes=1024)
    while follower.log_end_offset < log.log_end_offset:
        fetched = log.read(follower.log_end_offset, 200).records
        info = follower.append_as_follower(fetched)
        assert info.first_offset <= info.last_offset
    assert read_all(follower) == read_all(log)
    assert follower.epoch_cache.entries == log.epoch_cache.entries
    assert [tuple(e) for e in follower.epoch_cache.entries] == [(0, 0), (1, 6), (3, 12)]
    follower.close()


def test_follower_accepts_increasing_offsets_with_gaps(log: Log) -> None:
    first, second = bytearray(batch(2)), bytearray(batch(2, first=10))
    set_base_offset(first, 0, 0)
    set_base_offset(second, 0, 10)
    info = log.append_as_follower(bytes(first + second))
    assert (info.first_offset, info.last_offset) == (0, 11)
    assert log.log_end_offset == 12
    assert [o for o, _ in read_all(log)] == [0, 1, 10, 11]
