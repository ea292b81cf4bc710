"""The log manager: placement over log.dirs, checkpoints, retention runs, the scheduler.

Covers: new partitions going to the dir with the fewest, reloading every
partition from every dir, checkpoint files in Kafka's format, offsets
restored from them, delete_log, cleanup() with an injected clock, the
scheduler thread starting and stopping, and invalid topic names refused.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from headwater.errors import InvalidPartitionsError, InvalidTopicError
from headwater.storage import LogConfig, LogManager

from .helpers import batch


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    manager = LogManager(dirs)
    for p in range(6):
        manager.get_or_create_log("orders", p)
    assert {d.name: len(list(d.glob("orders-*"))) for d in dirs} == {"a": 2, "b": 2, "c": 2}
    manager.delete_log("orders", 0)
    manager.get_or_create_log("payments", 0)
    assert manager.log_dir_of("orders", 0) is None
    assert manager.log_dir_of("payments", 0) == tmp_path / "a"  # orders-0 had been there
    manager.shutdown()


def test_reload_finds_every_partition_in_every_dir(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = LogManager(dirs)
    for p in range(4):
        log = manager.get_or_create_log("orders", p)
        log.append_as_leader(batch(p + 1), leader_epoch=0, now_ms=0)
    manager.shutdown()
    again = LogManager(dirs)
    assert sorted((log.topic, log.partition, log.log_end_offset) for log in again.logs()) == [
        ("orders", p, p + 1) for p in range(4)
    ]
    again.shutdown()


def test_checkpoint_files_in_kafka_format(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    log = manager.get_or_create_log("orders", 1)
    log.append_as_leader(batch(5), leader_epoch=0, now_ms=0)
    log.high_watermark = 4
    log.flush()
    manager.checkpoint_all()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n1\norders 1 5\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\norders 1 4\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\norders 1 0\n"
    manager.shutdown()


def test_offsets_are_restored_from_checkpoints(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    log = manager.get_or_create_log("orders", 0, LogConfig(segment_bytes=300))
    for i in range(10):
        log.append_as_leader(batch(3, first=3 * i, size=20), leader_epoch=0, now_ms=0)
    log.high_watermark = 20
    log.maybe_increment_log_start_offset(7)
    manager.shutdown()
    again = LogManager([tmp_path])
    restored = again.get_log("orders", 0)
    assert restored is not None
    assert (restored.log_start_offset, restored.high_watermark, restored.log_end_offset) == (
        7,
        20,
        30,
    )
    again.shutdown()


def test_delete_log_removes_the_directory(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    manager.get_or_create_log("orders", 0).append_as_leader(batch(1), leader_epoch=0, now_ms=0)
    assert manager.delete_log("orders", 0)
    assert not (tmp_path / "orders-0").exists()
    assert manager.get_log("orders", 0) is None
    assert not manager.delete_log("orders", 0)
    manager.shutdown()


def test_cleanup_uses_the_injected_clock(tmp_path: Path) -> None:
    now = [0]
    manager = LogManager([tmp_path], clock=lambda: now[0])
    config = LogConfig(segment_bytes=300, retention_ms=1000)
    log = manager.get_or_create_log("orders", 0, config)
    for i in range(10):
        log.append_as_leader(
            batch(3, first=3 * i, size=20, timestamp_ms=i), leader_epoch=0, now_ms=i
        )
    assert manager.cleanup() == 0
    segments = len(log.segments)
    assert segments > 2
    now[0] = 10_000
    assert manager.cleanup() == segments - 1  # all but the active segment
    assert len(log.segments) == 1
    manager.shutdown()


def test_periodic_tasks_are_a_plain_call_without_a_thread(tmp_path: Path) -> None:
    threads_before = {t.name for t in threading.enumerate()}
    manager = LogManager([tmp_path])
    manager.get_or_create_log("orders", 0).append_as_leader(batch(1), leader_epoch=0, now_ms=0)
    manager.run_periodic_tasks(now_ms=1)
    assert (tmp_path / "recovery-point-offset-checkpoint").exists()
    assert {t.name for t in threading.enumerate()} <= threads_before
    manager.shutdown()


def test_invalid_names_are_refused(tmp_path: Path) -> None:
    manager = LogManager([tmp_path])
    for bad in ("", "..", "a/b", "x" * 250, "sp ace"):
        with pytest.raises(InvalidTopicError):
            manager.get_or_create_log(bad, 0)
    with pytest.raises(InvalidPartitionsError):
        manager.get_or_create_log("orders", -1)
    manager.shutdown()
