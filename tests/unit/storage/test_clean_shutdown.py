"""Clean shutdown and crash through the log manager: the fast path and full recovery.

Covers: shutdown() writing the marker and checkpoints, the next start removing
the marker and trusting the files without rescanning (a damaged body byte is
not even read), the same damage found and cut when the marker is absent
(a crash), and a crash recovering from the checkpointed recovery point.
"""

from __future__ import annotations

from pathlib import Path

from headwater.storage import CLEAN_SHUTDOWN_FILE, LogConfig, LogManager

from .helpers import batch

CONFIG = LogConfig(segment_bytes=400)


def _populate(root: Path) -> None:
    manager = LogManager([root], default_config=CONFIG)
    log = manager.get_or_create_log("orders", 0, CONFIG)
    for i in range(10):
        log.append_as_leader(batch(3, first=3 * i, size=20), leader_epoch=0, now_ms=0)
    manager.shutdown()


def _damage_last_batch(root: Path) -> None:
    last = sorted((root / "orders-0").glob("*.log"))[-1]
    data = bytearray(last.read_bytes())
    data[-1] ^= 0xFF
    last.write_bytes(bytes(data))


def test_shutdown_writes_marker_and_start_removes_it(tmp_path: Path) -> None:
    _populate(tmp_path)
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 0 30\n"
    manager = LogManager([tmp_path], default_config=CONFIG)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    log = manager.get_log("orders", 0)
    assert log is not None
    assert log.load_info.clean_shutdown
    assert log.load_info.segments_recovered == 0
    assert log.log_end_offset == 30
    manager.shutdown()


def test_clean_start_trusts_the_files(tmp_path: Path) -> None:
    _populate(tmp_path)
    _damage_last_batch(tmp_path)
    manager = LogManager([tmp_path], default_config=CONFIG)
    log = manager.get_log("orders", 0)
    assert log is not None
    assert log.load_info.segments_recovered == 0
    assert log.log_end_offset == 30  # not rescanned: the damage is not even seen
    manager.shutdown()


def test_crash_start_finds_and_cuts_the_damage(tmp_path: Path) -> None:
    _populate(tmp_path)
    _damage_last_batch(tmp_path)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()  # as if the broker had been killed
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\norders 0 0\n")
    manager = LogManager([tmp_path], default_config=CONFIG)
    log = manager.get_log("orders", 0)
    assert log is not None
    assert not log.load_info.clean_shutdown
    assert log.load_info.segments_recovered == len(log.segments)
    assert log.log_end_offset == 27
    manager.shutdown()


def test_crash_recovers_only_from_the_recovery_point(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], default_config=CONFIG)
    log = manager.get_or_create_log("orders", 0, CONFIG)
    for i in range(10):
        log.append_as_leader(batch(3, first=3 * i, size=20), leader_epoch=0, now_ms=0)
    segments = len(log.segments)
    manager.checkpoint_all()  # recovery point = base of the active segment (rolls flush)
    for existing in manager.logs():
        existing.close()  # a crash: no shutdown(), no marker
    again = LogManager([tmp_path], default_config=CONFIG)
    reopened = again.get_log("orders", 0)
    assert reopened is not None
    assert segments > 2
    assert reopened.load_info.segments_recovered == 1
    assert reopened.log_end_offset == 30
    again.shutdown()
