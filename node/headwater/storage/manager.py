"""The log manager: every partition log of a broker, across its ``log.dirs``.

As Kafka's ``LogManager`` it owns the per-directory state that no single log
can: the checkpoint files (recovery points, log start offsets, high
watermarks), the clean-shutdown marker that lets the next start skip recovery,
placement of new partitions (the directory holding the fewest), and the
background work (retention, ``flush.ms``, checkpoints) run by one daemon
thread.  The clock is injected so that tests drive retention with virtual time.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

from headwater.clock import WallClock, wall_ms
from headwater.errors import InvalidPartitionsError, InvalidTopicError, KafkaStorageError
from headwater.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
    fsync_dir,
)
from headwater.storage.config import DEFAULT_LOG_CONFIG, LogConfig
from headwater.storage.log import Log, parse_topic_partition
from headwater.values import TopicPartition

__all__ = ["CLEAN_SHUTDOWN_FILE", "LogManager"]

_logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".headwater_cleanshutdown"
"""Written in each log dir by :meth:`LogManager.shutdown`, removed once the logs are open."""

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class LogManager:
    """All logs of one broker.

    Threads: any thread may call any method.  A manager lock guards the map of
    logs (creation, deletion, listing); each :class:`Log` has its own lock for
    appends and reads, so appends to different partitions do not contend.  The
    manager has no thread of its own: the broker's scheduler calls
    :meth:`run_periodic_tasks` (retention, ``flush.ms``, checkpoints) from a
    worker thread every ``log.retention.check.interval.ms``.
    """

    def __init__(
        self,
        log_dirs: Sequence[str | Path],
        *,
        default_config: LogConfig = DEFAULT_LOG_CONFIG,
        clock: WallClock = wall_ms,
    ) -> None:
        if not log_dirs:
            raise KafkaStorageError("log.dirs is empty")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.clock = clock
        self._lock = threading.RLock()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        for directory in self.log_dirs:
            self._load_dir(directory)

    def _load_dir(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        marker = directory / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT).read()
        start_offsets = OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT).read()
        high_watermarks = OffsetCheckpointFile(directory / REPLICATION_OFFSET_CHECKPOINT).read()
        now_ms = self.clock()
        for entry in sorted(directory.iterdir()):
            if not entry.is_dir():
                continue
            if entry.name.endswith("-delete"):
                shutil.rmtree(entry, ignore_errors=True)  # a deletion cut short
                continue
            try:
                key = parse_topic_partition(entry.name)
            except ValueError:
                continue
            if key in self._logs:
                raise KafkaStorageError(
                    f"partition {entry.name} is in both {self._dir_of[key]} and {directory}"
                )
            log = Log.open(
                entry,
                self.default_config,
                now_ms=now_ms,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                high_watermark=high_watermarks.get(key, 0),
                had_clean_shutdown=clean,
            )
            self._logs[key] = log
            self._dir_of[key] = directory
            info = log.load_info
            if info.bytes_truncated or info.indexes_rebuilt:
                _logger.warning("recovered %s: %s", entry.name, info)
        if clean:
            marker.unlink()
            fsync_dir(directory)

    # -- partitions --------------------------------------------------------------------------

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of ``topic-partition``, created in the emptiest log dir if new.

        A ``config`` given for an existing log replaces its config.
        """
        if not _TOPIC_NAME.match(topic) or topic in (".", ".."):
            raise InvalidTopicError(f"invalid topic name {topic!r}")
        if partition < 0:
            raise InvalidPartitionsError(f"invalid partition {partition}")
        key = TopicPartition(topic, partition)
        with self._lock:
            log = self._logs.get(key)
            if log is not None:
                if config is not None:
                    log.update_config(config)
                return log
            counts = {d: 0 for d in self.log_dirs}
            for directory in self._dir_of.values():
                counts[directory] += 1
            directory = min(self.log_dirs, key=lambda d: counts[d])
            log = Log.open(
                directory / f"{topic}-{partition}",
                config if config is not None else self.default_config,
                now_ms=self.clock(),
                had_clean_shutdown=True,  # brand new: nothing to recover
            )
            self._logs[key] = log
            self._dir_of[key] = directory
            return log

    def get_log(self, topic: str, partition: int) -> Log | None:
        with self._lock:
            return self._logs.get(TopicPartition(topic, partition))

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close and remove a partition's log; False if there was none."""
        with self._lock:
            log = self._logs.pop(TopicPartition(topic, partition), None)
            self._dir_of.pop(TopicPartition(topic, partition), None)
        if log is None:
            return False
        log.delete()
        return True

    def logs(self) -> list[Log]:
        with self._lock:
            return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        with self._lock:
            return self._dir_of.get(TopicPartition(topic, partition))

    # -- background work -------------------------------------------------------------------

    def checkpoint_all(self) -> None:
        """Write the recovery-point, log-start-offset and high-watermark checkpoints."""
        with self._lock:
            by_dir: dict[Path, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
            for key, log in self._logs.items():
                by_dir[self._dir_of[key]].append((key, log))
            for directory, entries in by_dir.items():
                OffsetCheckpointFile(directory / RECOVERY_POINT_CHECKPOINT).write(
                    {key: log.recovery_point for key, log in entries}
                )
                OffsetCheckpointFile(directory / LOG_START_OFFSET_CHECKPOINT).write(
                    {key: log.log_start_offset for key, log in entries}
                )
                OffsetCheckpointFile(directory / REPLICATION_OFFSET_CHECKPOINT).write(
                    {key: log.high_watermark for key, log in entries}
                )

    def cleanup(self, now_ms: int | None = None) -> int:
        """Run retention over every log; returns the number of segments deleted."""
        now = self.clock() if now_ms is None else now_ms
        deleted = 0
        for log in self.logs():
            try:
                deleted += log.delete_retention_segments(now)
            except KafkaStorageError:
                continue  # closed or deleted meanwhile
        return deleted

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Apply each log's ``flush.ms``; returns how many logs were flushed."""
        now = self.clock() if now_ms is None else now_ms
        return sum(log.flush_if_due(now) for log in self.logs())

    def run_periodic_tasks(self, now_ms: int | None = None) -> None:
        """One scheduler tick: retention, ``flush.ms``, checkpoints."""
        now = self.clock() if now_ms is None else now_ms
        self.cleanup(now)
        self.flush_dirty_logs(now)
        self.checkpoint_all()

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, and mark each dir cleanly shut down.

        The caller stops calling :meth:`run_periodic_tasks` first.
        """
        with self._lock:
            for log in self._logs.values():
                log.close()
            self.checkpoint_all()
            for directory in self.log_dirs:
                (directory / CLEAN_SHUTDOWN_FILE).touch()
                fsync_dir(directory)
