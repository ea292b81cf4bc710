"""Log compaction (storage.cleaner): latest value per key kept, tombstones dropped after
delete.retention.ms, offsets preserved, the active segment untouched, and the segment
swap safe against a crash at any step."""

from __future__ import annotations

import os
from pathlib import Path

from headwater.records import Record, build_batch, read_batches
from headwater.records.control import ControlRecordType, build_control_batch, set_batch_flags
from headwater.storage import Log, LogConfig
from headwater.storage.cleaner import CLEANED_SUFFIX, LogCleaner, clean_log
from headwater.storage.segment import segment_file_name

DAY = 24 * 3600 * 1000


def _open(path: Path, *, policy: str = "compact", clean: bool = True) -> Log:
    config = LogConfig(
        segment_bytes=400, index_interval_bytes=100, cleanup_policy=policy, delete_retention_ms=DAY
    )
    return Log.open(path / "t-0", config, now_ms=0, had_clean_shutdown=clean)


def _put(log: Log, key: str, value: str | None, *, ts: int = 1_000) -> None:
    records = [Record(key.encode(), value.encode() if value is not None else None, (), ts)]
    log.append_as_leader(build_batch(records, timestamp_ms=ts), leader_epoch=3, now_ms=ts)
    log.high_watermark = log.log_end_offset


def _contents(log: Log) -> list[tuple[int, str, str | None]]:
    data = log.read(log.log_start_offset, 1 << 30).records
    return [
        (r.offset, (r.key or b"").decode(), r.value.decode() if r.value is not None else None)
        for b in read_batches(data)
        for r in b.records()
    ]


def _fill(log: Log) -> None:
    for i in range(30):
        _put(log, f"k{i % 3}", f"v{i}")


def test_latest_value_per_key_kept_with_original_offsets(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    before = _contents(log)
    active_base = log.segments[-1].base_offset
    stats = clean_log(log, now_ms=2_000)
    after = _contents(log)
    assert stats.segments_rewritten > 0 and stats.records_removed > 0
    cleanable_end = active_base
    # below the active segment only the latest per key survives
    cleaned = [r for r in after if r[0] < cleanable_end]
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys))
    for off, key, value in cleaned:
        assert (off, key, value) in before
    # the active segment is untouched
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    # the latest value of every key is still readable
    latest = {k: v for _, k, v in before}
    assert {k: v for _, k, v in after} == latest
    assert log.log_end_offset == 30
    log.close()


def test_tombstones_kept_until_delete_retention(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _put(log, "gone", "x")
    _put(log, "gone", None, ts=5_000)
    for i in range(30):
        _put(log, f"other{i}", "y")
    clean_log(log, now_ms=5_000 + DAY - 1)
    assert (1, "gone", None) in _contents(log)
    assert all(r[0] != 0 for r in _contents(log))
    stats = clean_log(log, now_ms=5_000 + DAY)
    assert stats.tombstones_removed == 1
    assert all(k != "gone" for _, k, _ in _contents(log))
    log.close()


def test_delete_policy_is_not_compacted(tmp_path: Path) -> None:
    log = _open(tmp_path, policy="delete")
    _fill(log)
    before = _contents(log)
    assert clean_log(log, now_ms=2_000).segments_rewritten == 0
    assert _contents(log) == before
    log.close()


def test_nothing_above_the_high_watermark_is_cleaned(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    log.high_watermark = 0
    before = _contents(log)
    assert clean_log(log, now_ms=2_000).segments_rewritten == 0
    assert _contents(log) == before
    log.close()


def test_compacted_log_reopens_after_crash(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    clean_log(log, now_ms=2_000)
    after = _contents(log)
    log.close()
    reopened = _open(tmp_path, clean=False)
    reopened.high_watermark = reopened.log_end_offset
    assert _contents(reopened) == after
    reopened.close()


def test_crash_before_swap_leaves_old_segment_and_drops_cleaned_file(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    before = _contents(log)
    first = log.segments[0]
    log.close()
    # a crash after writing the cleaned file but before the swap
    stray = tmp_path / "t-0" / (segment_file_name(first.base_offset, "") + CLEANED_SUFFIX)
    stray.write_bytes(b"partial garbage")
    reopened = _open(tmp_path, clean=False)
    reopened.high_watermark = reopened.log_end_offset
    assert _contents(reopened) == before
    assert not stray.exists()
    reopened.close()


def test_crash_between_index_removal_and_swap_rebuilds_indexes(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    before = _contents(log)
    base = log.segments[0].base_offset
    log.close()
    for suffix in (".index", ".timeindex"):
        os.unlink(tmp_path / "t-0" / segment_file_name(base, suffix))
    reopened = _open(tmp_path)  # even after a "clean" shutdown, missing indexes are rebuilt
    reopened.high_watermark = reopened.log_end_offset
    assert _contents(reopened) == before
    reopened.close()


def test_cleaner_threshold(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _fill(log)
    cleaner = LogCleaner(min_dirty_bytes=10 << 20)
    assert cleaner.maybe_clean([log], now_ms=2_000).segments_rewritten == 0
    cleaner = LogCleaner(min_dirty_bytes=1)
    assert cleaner.maybe_clean([log], now_ms=2_000).segments_rewritten > 0
    assert cleaner.maybe_clean([log], now_ms=2_000).segments_rewritten == 0
    log.close()


def _put_txn(log: Log, key: str, value: str, *, pid: int, ts: int = 1_000) -> None:
    batch = build_batch(
        [Record(key.encode(), value.encode(), (), ts)],
        timestamp_ms=ts,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=-1,
    )
    log.append_as_leader(set_batch_flags(batch, transactional=True), leader_epoch=3, now_ms=ts)
    log.high_watermark = log.log_end_offset


def _end_txn(log: Log, *, pid: int, commit: bool, ts: int = 1_000) -> None:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    batch = build_control_batch(
        kind, producer_id=pid, producer_epoch=1, coordinator_epoch=0, timestamp_ms=ts
    )
    log.append_as_leader(batch, leader_epoch=3, now_ms=ts)
    log.high_watermark = log.log_end_offset


def test_aborted_transactions_are_dropped_and_shadow_nothing(tmp_path: Path) -> None:
    log = _open(tmp_path)
    _put(log, "a", "committed-plain")
    _put_txn(log, "a", "aborted", pid=7)  # later than the plain value, but aborted
    _end_txn(log, pid=7, commit=False)
    _put_txn(log, "b", "committed-txn", pid=8)
    _end_txn(log, pid=8, commit=True)
    _put_txn(log, "a", "undecided", pid=9)  # no marker yet
    for i in range(12):  # roll the above out of the active segment
        _put(log, f"filler{i}", "x")
    clean_log(log, now_ms=2_000)
    values = {(k, v) for _, k, v in _contents(log)}
    assert ("a", "committed-plain") in values  # not shadowed by the aborted record
    assert ("a", "aborted") not in values
    assert ("b", "committed-txn") in values
    assert ("a", "undecided") in values  # kept until its transaction is decided
    data = log.read(log.log_start_offset, 1 << 30).records
    batches = list(read_batches(data))
    assert sum(b.is_control for b in batches) == 2  # markers are kept
    kept = [b for b in batches if not b.is_control and b.producer_id in (8, 9)]
    assert kept and all(b.is_transactional for b in kept)
