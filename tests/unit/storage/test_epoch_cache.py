"""The leader-epoch cache and its ``leader-epoch-checkpoint`` file.

Covers: assign (ignored repeats, conflicting entries removed), Kafka's
OffsetsForLeaderEpoch answers for every case (undefined, latest, between,
before the first, after the last), truncation from the end and the start,
the file's text format, atomic persistence and reload, and a malformed file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from headwater.errors import KafkaStorageError
from headwater.storage import EpochEntry, LeaderEpochCache


@pytest.fixture
def cache(tmp_path: Path) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    c.assign(1, 0)
    c.assign(2, 10)
    c.assign(4, 25)
    return c


def test_assign_keeps_increasing_entries(cache: LeaderEpochCache) -> None:
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 25)]
    assert not cache.assign(4, 30)  # same epoch later: nothing new
    assert cache.latest_epoch == 4


def test_assign_removes_conflicting_entries(cache: LeaderEpochCache) -> None:
    assert cache.assign(3, 12)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(3, 12)]


def test_end_offset_for(cache: LeaderEpochCache) -> None:
    leo = 40
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # undefined
    assert cache.end_offset_for(4, leo) == (4, 40)  # latest: the log end
    assert cache.end_offset_for(2, leo) == (2, 25)  # ends where epoch 4 starts
    assert cache.end_offset_for(3, leo) == (2, 25)  # unknown epoch between: largest below
    assert cache.end_offset_for(0, leo) == (0, 0)  # before the first: first start offset
    assert cache.end_offset_for(5, leo) == (-1, -1)  # newer than any known


def test_epoch_for_offset(cache: LeaderEpochCache) -> None:
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 24, 25, 99)] == [1, 1, 2, 2, 4, 4]


def test_truncate_from_end(cache: LeaderEpochCache) -> None:
    cache.truncate_from_end(25)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(2, 10)]
    cache.truncate_from_end(5)
    assert cache.entries == [EpochEntry(1, 0)]


def test_truncate_from_start(cache: LeaderEpochCache) -> None:
    cache.truncate_from_start(12)
    assert cache.entries == [EpochEntry(2, 12), EpochEntry(4, 25)]
    cache.truncate_from_start(25)
    assert cache.entries == [EpochEntry(4, 25)]


def test_file_format_and_reload(cache: LeaderEpochCache, tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    assert path.read_text() == "0\n3\n1 0\n2 10\n4 25\n"
    assert not (tmp_path / "leader-epoch-checkpoint.tmp").exists()
    assert LeaderEpochCache(path).entries == cache.entries


def test_empty_and_cleared_cache(tmp_path: Path) -> None:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    assert c.latest_epoch == -1
    assert c.end_offset_for(0, 10) == (-1, -1)
    c.assign(0, 0)
    c.clear()
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n0\n"


def test_malformed_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n2\n1 0\n")
    with pytest.raises(KafkaStorageError):
        LeaderEpochCache(path)
