"""Retention by time (retention.ms) and size (retention.bytes), with virtual time.

Covers: whole segments deleted oldest first by their largest timestamp, the
active segment never deleted however old, retention.bytes keeping the total
at or under the limit, -1 meaning infinite, cleanup.policy=compact disabling
both, and the log start offset advancing with the deleted segments.
"""

from __future__ import annotations

from pathlib import Path

from headwater.storage import Log, LogConfig

from .helpers import batch, open_log, read_all

HOUR = 3600 * 1000


def _fill_hourly(log: Log, hours: int) -> None:
    """One batch per hour of timestamps, each segment holding ~one batch (they are 600 B)."""
    for h in range(hours):
        log.append_as_leader(
            batch(3, first=3 * h, size=150, timestamp_ms=h * HOUR), leader_epoch=0, now_ms=h * HOUR
        )


def test_retention_ms_deletes_segments_older_than_the_limit(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=5 * HOUR)
    _fill_hourly(log, 10)
    segments = len(log.segments)
    deleted = log.delete_retention_segments(now_ms=10 * HOUR)
    # segments whose newest record is more than 5 hours old at t=10h: hours 0..4
    assert deleted == 5
    assert len(log.segments) == segments - 5
    assert log.log_start_offset == log.segments[0].base_offset == 15
    assert next(o for o, _ in read_all(log)) == 15
    log.close()


def test_retention_ms_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=HOUR)
    _fill_hourly(log, 4)
    log.delete_retention_segments(now_ms=1000 * HOUR)
    assert len(log.segments) == 1
    assert log.segments[0].size > 0
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_nothing_is_deleted_while_records_are_young(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=5 * HOUR)
    _fill_hourly(log, 10)
    assert log.delete_retention_segments(now_ms=5 * HOUR) == 0


def test_infinite_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=-1)
    _fill_hourly(log, 10)
    assert log.delete_retention_segments(now_ms=10**12) == 0
    log.close()


def test_retention_bytes_keeps_the_newest_segments_within_the_limit(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=-1, retention_bytes=2000)
    _fill_hourly(log, 10)
    assert log.delete_retention_segments(now_ms=0) == 6
    # Kafka's rule: delete the oldest segment only while what remains is still
    # at least retention.bytes, so the log ends less than one segment above it.
    assert log.size_in_bytes >= 2000
    assert log.size_in_bytes - log.segments[0].size < 2000
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_retention_bytes_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=-1, retention_bytes=0)
    _fill_hourly(log, 5)
    log.delete_retention_segments(now_ms=0)
    assert len(log.segments) == 1
    assert log.log_end_offset == 15
    log.close()


def test_compact_policy_disables_time_and_size_retention(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=600, retention_ms=1, retention_bytes=0)
    log.update_config(
        LogConfig(segment_bytes=600, retention_ms=1, retention_bytes=0, cleanup_policy="compact")
    )
    _fill_hourly(log, 5)
    assert log.delete_retention_segments(now_ms=100 * HOUR) == 0
    log.close()
