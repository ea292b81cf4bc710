"""The ``.txnindex`` beside each segment and the producer ``.snapshot`` files of a Log:
written as aborts land, read back on opening, cut with the log, deleted with their
segment, and distrusted (``valid`` False) when damaged."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from headwater.storage import Log
from headwater.storage.transactions import ENTRY_SIZE, AbortedTxn, TransactionIndexFile

from .helpers import batch, open_log, reopen


def fill(log: Log, batches: int) -> list[int]:
    """Append ``batches`` batches of 5 records; their base offsets."""
    return [
        int(log.append_as_leader(batch(5), leader_epoch=0, now_ms=0).first_offset)
        for _ in range(batches)
    ]


def txnindex_files(log: Log) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(log.dir.glob("*.txnindex"))}


def small_log(tmp_path: Path) -> Log:
    return open_log(tmp_path, segment_bytes=400, index_interval_bytes=100)


def test_an_abort_lands_in_the_txnindex_of_its_markers_segment(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    first = AbortedTxn(7, bases[0], bases[1] + 1, bases[1] + 2)  # data in 0, marker in 1
    second = AbortedTxn(8, bases[1] + 2, bases[2] + 1, bases[2] + 2)
    log.append_aborted(first)
    log.append_aborted(second)
    assert txnindex_files(log) == {
        f"{bases[1]:020d}.txnindex": ENTRY_SIZE,
        f"{bases[2]:020d}.txnindex": ENTRY_SIZE,
    }
    assert log.collect_aborted(bases[0], log.log_end_offset) == [first, second]
    assert log.collect_aborted(bases[1] + 2, log.log_end_offset) == [second]
    # Opened again (crashed or not), the files are the index.
    log = reopen(log)
    assert log.aborted_indexes_valid()
    assert log.collect_aborted(bases[0], log.log_end_offset) == [first, second]
    log.close()


def test_retention_keeps_the_index_of_every_remaining_aborted_record(tmp_path: Path) -> None:
    """A transaction aborted across segments: after the oldest goes, a fetch of what
    remains still names it, since its entry is in the marker's (later) segment."""
    log = small_log(tmp_path)
    fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    aborted = AbortedTxn(7, bases[0] + 1, bases[1] + 1, bases[1] + 2)
    log.append_aborted(aborted)
    log.delete_records_before(bases[1])
    assert log.segments[0].base_offset == bases[1]
    assert log.collect_aborted(log.log_start_offset, log.log_end_offset) == [aborted]
    log.close()


def test_deleting_or_truncating_a_segment_takes_its_index_along(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    fill(log, 12)
    bases = [s.base_offset for s in log.segments]
    log.append_aborted(AbortedTxn(1, bases[0], bases[0] + 1, bases[0] + 2))
    log.append_aborted(AbortedTxn(2, bases[1], bases[1] + 1, bases[1] + 2))
    log.append_aborted(AbortedTxn(3, bases[1] + 5, bases[1] + 6, bases[1] + 7))
    log.delete_records_before(bases[1])  # retention / DeleteRecords
    assert f"{bases[0]:020d}.txnindex" not in txnindex_files(log)
    log.truncate_to(bases[1] + 5)  # the third abort's marker is cut
    assert txnindex_files(log) == {f"{bases[1]:020d}.txnindex": ENTRY_SIZE}
    assert [e.producer_id for e in log.collect_aborted(0, log.log_end_offset)] == [2]
    log.close()


def test_a_damaged_txnindex_is_not_trusted(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    fill(log, 4)
    log.append_aborted(AbortedTxn(1, 0, 1, 2))
    path = log.dir / f"{0:020d}.txnindex"
    log.close()
    path.write_bytes(path.read_bytes() + b"\x00" * 10)  # a torn second entry
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=100)
    assert not log.aborted_indexes_valid()
    assert log.collect_aborted(0, log.log_end_offset) == []
    log.reset_aborted_from(0)  # what a rebuild does first
    assert log.aborted_indexes_valid() and not path.exists()
    log.close()


def test_an_index_ahead_of_its_log_is_not_trusted(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    fill(log, 2)
    end = log.log_end_offset
    log.close()
    index = TransactionIndexFile(log.dir / f"{0:020d}.txnindex", 0)
    index.append(AbortedTxn(1, 0, end + 3, end + 4))  # a marker the log lost
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=100)
    assert not log.aborted_indexes_valid()
    log.close()


def test_index_entries_of_another_version_or_before_the_segment_are_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.txnindex"
    path.write_bytes(b"\x00\x01" + b"\x00" * (ENTRY_SIZE - 2))
    assert not TransactionIndexFile(path, 0).valid
    good = TransactionIndexFile(tmp_path / "y.txnindex", 0)
    good.append(AbortedTxn(1, 0, 5, 6))
    assert not TransactionIndexFile(tmp_path / "y.txnindex", 10).valid


def test_producer_snapshots_keep_the_newest_and_go_with_truncation(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    fill(log, 6)
    for offset in (5, 10, 20):
        log.write_producer_snapshot(offset, b"state at %d" % offset)
    assert log.producer_snapshots() == [10, 20]  # only the newest two are kept
    assert log.read_producer_snapshot(20) == b"state at 20"
    log.truncate_to(15)  # the snapshot at 20 describes batches the log no longer has
    assert log.producer_snapshots() == [10]
    log.close()


def test_snapshots_past_the_end_after_a_crash_are_deleted_on_opening(tmp_path: Path) -> None:
    log = small_log(tmp_path)
    fill(log, 2)
    log.close()
    (log.dir / f"{500:020d}.snapshot").write_bytes(b"from a longer log")
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=100)
    assert log.producer_snapshots() == []
    assert not (log.dir / f"{500:020d}.snapshot").exists()
    log.close()


def test_a_producer_snapshot_taken_before_a_truncation_is_not_stored(tmp_path: Path) -> None:
    """Even once the log has grown past its offset again: those are other batches."""
    log = small_log(tmp_path)
    fill(log, 2)  # offsets 0-9
    taken = log.truncations
    log.truncate_to(5)
    fill(log, 2)  # 5-14: not the batches the snapshot described
    assert not log.write_producer_snapshot(10, b"stale", truncations=taken)
    assert log.producer_snapshots() == []
    assert log.write_producer_snapshot(10, b"fresh", truncations=log.truncations)
    assert log.producer_snapshots() == [10]
    assert log.read_producer_snapshot(10) == b"fresh"
    assert sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".tmp")) == []
    log.close()


def test_appends_do_not_wait_for_a_producer_snapshots_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = small_log(tmp_path)
    fill(log, 1)
    in_fsync, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        if threading.current_thread().name == "snapshot":
            in_fsync.set()
            release.wait(10)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    writer = threading.Thread(
        target=log.write_producer_snapshot, args=(5, b"state"), name="snapshot"
    )
    writer.start()
    try:
        assert in_fsync.wait(10)
        appender = threading.Thread(target=fill, args=(log, 1))
        appender.start()
        appender.join(5)
        assert not appender.is_alive()  # the append did not wait for the fsync
        assert log.producer_snapshots() == []  # not in place before it is durable
    finally:
        release.set()
        writer.join(10)
    assert log.producer_snapshots() == [5]
    log.close()
