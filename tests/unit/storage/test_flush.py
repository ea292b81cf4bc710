"""Flush policy: flush.messages and flush.ms move the recovery point.

Covers: by default nothing is fsynced before a roll (the page cache is
trusted, as in Kafka), flush.messages flushing after N unflushed messages,
flush_if_due applying flush.ms with virtual time, and an explicit flush().
"""

from __future__ import annotations

from pathlib import Path

from .helpers import batch, open_log


def test_default_policy_leaves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(5), leader_epoch=0, now_ms=0)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 5
    log.close()


def test_flush_messages(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=10)
    log.append_as_leader(batch(6), leader_epoch=0, now_ms=0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(6, first=6), leader_epoch=0, now_ms=0)
    assert log.recovery_point == 12
    log.close()


def test_flush_ms_with_virtual_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_ms=1000, now_ms=0)
    log.append_as_leader(batch(3), leader_epoch=0, now_ms=0)
    assert not log.flush_if_due(999)
    assert log.flush_if_due(1000)
    assert log.recovery_point == 3
    assert not log.flush_if_due(5000)  # nothing unflushed
    log.close()
