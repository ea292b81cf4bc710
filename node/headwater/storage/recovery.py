"""Opening a partition directory: find the segments, trust or rebuild them.

After a clean shutdown (the log manager's marker file is present) every
segment's indexes are trusted after Kafka's cheap sanity check, so a broker
with thousands of partitions opens in moments.  After a crash nothing past the
last flush (the *recovery point*) can be trusted: the page cache may have
written some pages and not others.  So, as Kafka's ``LogLoader`` does, every
segment from the one holding the recovery point on is rescanned batch by
batch, each CRC checked and both indexes rebuilt; the first torn, corrupt or
out-of-order batch ends the log there, and later segments are deleted, since
they would leave a hole.  Nothing valid before the tear is lost.
"""

from __future__ import annotations

import bisect
import os
from pathlib import Path
from typing import NamedTuple

from headwater.storage.config import LogConfig
from headwater.storage.segment import INT32_MAX, LogSegment

__all__ = ["LoadInfo", "load_segments", "new_segment"]


class LoadInfo(NamedTuple):
    """What opening a log found and did (for logs, metrics and tests)."""

    clean_shutdown: bool
    segments_loaded: int
    segments_recovered: int
    """Segments rescanned (CRC checked, indexes rebuilt)."""
    bytes_truncated: int
    segments_deleted: int
    """Segments after a tear, removed."""
    indexes_rebuilt: int
    """Segments whose index files failed the sanity check."""


def new_segment(directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
    """Open (creating if needed) the segment at ``base_offset`` with ``config``'s index settings."""
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_bytes=config.segment_index_bytes,
        created_ms=now_ms,
    )


def _base_offsets(directory: Path) -> list[int]:
    bases = []
    for entry in os.listdir(directory):
        stem, _, suffix = entry.partition(".")
        if len(stem) != 20 or not stem.isdigit():
            if entry.endswith(".tmp"):
                (directory / entry).unlink(missing_ok=True)  # a checkpoint cut by a crash
            continue
        if suffix == "log":
            bases.append(int(stem))
        elif suffix in ("index", "timeindex", "txnindex"):
            if not (directory / f"{stem}.log").exists():
                (directory / entry).unlink()  # an index without its log
        elif suffix == "snapshot":
            continue  # producer state, read by the partition's leader
        else:
            (directory / entry).unlink(missing_ok=True)  # .deleted, .tmp and the like
    return sorted(bases)


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    now_ms: int,
    recovery_point: int,
    clean_shutdown: bool,
) -> tuple[list[LogSegment], LoadInfo]:
    """Open every segment in ``directory``, recovering as needed (see module docstring)."""
    bases = _base_offsets(directory)
    segments: list[LogSegment] = []
    damaged: set[int] = set()
    for i, base in enumerate(bases):
        mtime_ms = int(os.stat(directory / f"{base:020d}.log").st_mtime * 1000)
        segment = new_segment(directory, base, config, min(mtime_ms, now_ms))
        bound = bases[i + 1] - 1 if i + 1 < len(bases) else base + INT32_MAX
        if not segment.load(last_offset_bound=bound):
            damaged.add(i)
        segments.append(segment)

    to_recover = set(damaged)
    if not clean_shutdown and segments:
        first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        to_recover.update(range(first, len(segments)))

    recovered = truncated = deleted = 0
    for i in sorted(to_recover):
        if i >= len(segments):
            break
        removed = segments[i].recover()
        recovered += 1
        truncated += removed
        if removed:
            for later in segments[i + 1 :]:
                truncated += later.size
                later.delete()
                deleted += 1
            del segments[i + 1 :]
    info = LoadInfo(
        clean_shutdown=clean_shutdown,
        segments_loaded=len(bases),
        segments_recovered=recovered,
        bytes_truncated=truncated,
        segments_deleted=deleted,
        indexes_rebuilt=len(damaged),
    )
    return segments, info
