"""The leader-epoch cache: which leader epoch started at which offset.

A returning follower asks the leader "where did my latest epoch end in your
log?" (Kafka's OffsetsForLeaderEpoch) and truncates anything after that point,
so divergent suffixes written by a deposed leader disappear instead of being
silently kept (KIP-101).  This cache answers that question from a short list of
``(epoch, start_offset)`` entries, strictly increasing in both, persisted in the
partition directory as ``leader-epoch-checkpoint`` in Kafka's text format.
"""

from __future__ import annotations

import bisect
import threading
from pathlib import Path
from typing import NamedTuple

from headwater.errors import KafkaStorageError
from headwater.storage.checkpoints import read_entries, write_entries

__all__ = [
    "LEADER_EPOCH_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
]

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch start offsets of one partition, kept in memory and on disk.

    Invariants: entries are strictly increasing in epoch and in start offset;
    the file always matches memory after a mutating call returns.  Every method
    takes an internal lock, so any thread may call any method; the owning
    :class:`~headwater.storage.log.Log` mutates it under its own lock.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._entries: list[EpochEntry] = []
        for epoch, start in read_entries(path, 2):
            try:
                entry = EpochEntry(int(epoch), int(start))
            except ValueError:
                raise KafkaStorageError(f"malformed leader epoch checkpoint {path}") from None
            self._drop_conflicts(entry)
            self._entries.append(entry)

    @property
    def entries(self) -> list[EpochEntry]:
        with self._lock:
            return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or -1 when no epoch is known."""
        with self._lock:
            return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose range holds ``offset`` (-1 if before every known epoch)."""
        with self._lock:
            starts = [e.start_offset for e in self._entries]
            i = bisect.bisect_right(starts, offset) - 1
            return self._entries[i].epoch if i >= 0 else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        Entries that conflict (an epoch >= ``epoch`` or a start offset >=
        ``start_offset``) are removed first, as Kafka's ``assign`` does; the
        caller (the log) only assigns epochs newer than the latest.
        """
        if epoch < 0:
            return False
        entry = EpochEntry(epoch, start_offset)
        with self._lock:
            if self._entries:
                last = self._entries[-1]
                if last.epoch == epoch and last.start_offset <= start_offset:
                    return False
            self._drop_conflicts(entry)
            self._entries.append(entry)
            self._flush()
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer: ``(epoch, end_offset)``.

        The end offset of ``requested_epoch`` is the start offset of the next
        larger epoch (or the log end offset for the latest epoch); the epoch
        returned is the largest known epoch <= the requested one.
        ``(-1, -1)`` when the epoch is undefined or newer than every known one.
        """
        with self._lock:
            if requested_epoch == UNDEFINED_EPOCH or not self._entries:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if self._entries[-1].epoch == requested_epoch:
                return requested_epoch, log_end_offset
            epochs = [e.epoch for e in self._entries]
            higher = bisect.bisect_right(epochs, requested_epoch)
            if higher == len(epochs):
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if higher == 0:
                return requested_epoch, self._entries[0].start_offset
            return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was truncated there)."""
        with self._lock:
            kept = [e for e in self._entries if e.start_offset < end_offset]
            if len(kept) != len(self._entries):
                self._entries = kept
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly before ``start_offset``; the one covering it now starts there."""
        with self._lock:
            starts = [e.start_offset for e in self._entries]
            i = bisect.bisect_right(starts, start_offset) - 1
            if i < 0:
                return
            first = self._entries[i]
            kept = [EpochEntry(first.epoch, start_offset), *self._entries[i + 1 :]]
            if kept != self._entries:
                self._entries = kept
                self._flush()

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._flush()

    def _drop_conflicts(self, entry: EpochEntry) -> None:
        self._entries = [
            e
            for e in self._entries
            if e.epoch < entry.epoch and e.start_offset < entry.start_offset
        ]

    def _flush(self) -> None:
        write_entries(self._path, self._entries)
