"""Checkpoint files in Kafka's text format, written atomically.

Kafka keeps small per-log-dir files (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``) and a
per-partition ``leader-epoch-checkpoint``, all in the same shape::

    0                 <- format version
    2                 <- number of entries
    orders 0 1500     <- one entry per line, space separated
    orders 1 1320

Keeping the format means an operator can read them with ``cat`` and recognise
them.  Every write goes to ``<name>.tmp``, is fsynced, renamed over the old file
and the directory is fsynced, so a crash leaves either the old or the new file,
never a torn one (Kafka's ``CheckpointFile``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from headwater.errors import KafkaStorageError
from headwater.values import TopicPartition

__all__ = [
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "OffsetCheckpointFile",
    "atomic_write",
    "fsync_dir",
    "read_entries",
    "write_entries",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"

_VERSION = 0


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or create in it survives a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: write a temp file, fsync, rename, fsync the dir."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_entries(path: Path, entries: Iterable[Sequence[object]]) -> None:
    """Write ``entries`` (each a sequence of space-free fields) in the checkpoint format."""
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    atomic_write(path, text.encode("utf-8"))


def read_entries(path: Path, fields: int) -> list[list[str]]:
    """Read a checkpoint file; a missing file is empty.

    Raises KafkaStorageError for a malformed file (wrong version, count, or field count).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != _VERSION:
            raise ValueError("bad version line")
        count = int(lines[1])
        body = lines[2:]
        if count != len(body):
            raise ValueError(f"expected {count} entries, found {len(body)}")
        entries = [line.split() for line in body]
        if any(len(entry) != fields for entry in entries):
            raise ValueError(f"each entry needs {fields} fields")
    except ValueError as exc:
        raise KafkaStorageError(f"malformed checkpoint file {path}: {exc}") from None
    return entries


class OffsetCheckpointFile:
    """A ``topic partition offset`` checkpoint (one per log dir per kind).

    Not thread-safe by itself: the log manager serialises writes.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        write_entries(
            self.path, ((topic, part, offset) for (topic, part), offset in sorted(offsets.items()))
        )

    def read(self) -> dict[TopicPartition, int]:
        """The stored offsets; raises KafkaStorageError if the file is malformed."""
        out: dict[TopicPartition, int] = {}
        for topic, part, offset in read_entries(self.path, 3):
            try:
                out[TopicPartition(topic, int(part))] = int(offset)
            except ValueError:
                raise KafkaStorageError(f"malformed checkpoint file {self.path}") from None
        return out
