"""What an append will write, decided before any byte is: pure functions over headers.

A produce request's batches arrive as bytes already validated by
:func:`headwater.records.validate_batches`.  Here, without I/O:

- :func:`plan_leader_append` assigns offsets from the log end offset and stamps
  ``baseOffset`` and ``partitionLeaderEpoch`` (outside the CRC) into copies of
  the 61-byte headers only; the bodies are written from the request's own
  buffer.  ``LogAppendTime`` changes bytes under the CRC, so then the whole
  request is copied once and patched in place.
- :func:`plan_follower_append` keeps the leader's offsets and epochs but refuses
  batches that do not start at the log end offset or whose offsets do not
  increase (InvalidRecordError).
- :func:`append_info` summarises a planned append as Kafka's ``LogAppendInfo``.

:class:`~headwater.storage.log.Log` calls them under its lock (offsets depend on
the log end offset) and then writes the planned pieces with one ``writev``; a
refusal raises before anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from headwater.errors import InvalidRecordError
from headwater.records import (
    HEADER_SIZE,
    BatchHeader,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from headwater.storage.values import LogAppendInfo

__all__ = ["PlannedAppend", "append_info", "plan_follower_append", "plan_leader_append"]


class PlannedAppend(NamedTuple):
    """The bytes of one append and where each batch lands in them."""

    pieces: list[bytes | bytearray | memoryview]
    """Gathered by one ``writev``, in order."""
    size: int
    """Total bytes of ``pieces``."""
    placed: list[tuple[int, BatchHeader]]
    """``(position within the written bytes, header with final offsets and epoch)``."""
    log_append_time_ms: int
    """The broker's timestamp for LogAppendTime topics, else -1."""

    def max_timestamp(self) -> tuple[int, int]:
        """``(largest batch max timestamp, last offset of that batch)``; ``(-1, -1)`` if none."""
        max_ts, offset_of_max = -1, -1
        for _, header in self.placed:
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.last_offset
        return max_ts, offset_of_max


def plan_leader_append(
    records: bytes,
    headers: Sequence[BatchHeader],
    *,
    base_offset: int,
    leader_epoch: int,
    now_ms: int,
    log_append_time: bool,
) -> PlannedAppend:
    """Offsets from ``base_offset`` (the log end offset), the leader's epoch, and with
    ``log_append_time`` the append time as every batch's max timestamp."""
    view = memoryview(records)
    whole = bytearray(records) if log_append_time else None
    pieces: list[bytes | bytearray | memoryview] = [whole] if whole is not None else []
    offset = base_offset
    position = 0
    placed: list[tuple[int, BatchHeader]] = []
    for header in headers:
        size = header.size_in_bytes
        max_ts = header.max_timestamp
        if whole is not None:
            set_base_offset(whole, position, offset)
            set_partition_leader_epoch(whole, position, leader_epoch)
            set_log_append_time(whole, position, now_ms)
            max_ts = now_ms
        else:
            head = bytearray(view[position : position + HEADER_SIZE])
            set_base_offset(head, 0, offset)
            set_partition_leader_epoch(head, 0, leader_epoch)
            pieces.append(head)
            pieces.append(view[position + HEADER_SIZE : position + size])
        placed.append(
            (
                position,
                header._replace(
                    base_offset=offset, partition_leader_epoch=leader_epoch, max_timestamp=max_ts
                ),
            )
        )
        offset += header.last_offset_delta + 1
        position += size
    return PlannedAppend(pieces, len(records), placed, now_ms if log_append_time else -1)


def plan_follower_append(
    records: bytes, headers: Sequence[BatchHeader], *, log_end_offset: int, where: str
) -> PlannedAppend:
    """The leader's batches as they are, if they continue the log at ``log_end_offset``.

    Raises InvalidRecordError (naming ``where``, the partition) when the first
    batch does not start at the log end offset or offsets do not increase.
    """
    if headers[0].base_offset != log_end_offset:
        raise InvalidRecordError(
            f"{where}: follower append starts at offset "
            f"{headers[0].base_offset}, the log end offset is {log_end_offset}"
        )
    placed: list[tuple[int, BatchHeader]] = []
    position = 0
    previous_last = log_end_offset - 1
    for header in headers:
        if header.base_offset <= previous_last or header.last_offset < header.base_offset:
            raise InvalidRecordError(
                f"{where}: non-monotonic offsets in follower "
                f"append: batch {header.base_offset}..{header.last_offset} after "
                f"offset {previous_last}"
            )
        previous_last = header.last_offset
        placed.append((position, header))
        position += header.size_in_bytes
    return PlannedAppend([records], len(records), placed, -1)


def append_info(plan: PlannedAppend, *, log_start_offset: int) -> LogAppendInfo:
    """Kafka's ``LogAppendInfo`` for a written ``plan``."""
    first, last = plan.placed[0][1], plan.placed[-1][1]
    max_ts, offset_of_max = plan.max_timestamp()
    return LogAppendInfo(
        first_offset=first.base_offset,
        last_offset=last.last_offset,
        max_timestamp=max_ts,
        offset_of_max_timestamp=offset_of_max,
        log_append_time_ms=plan.log_append_time_ms,
        log_start_offset=log_start_offset,
        num_batches=len(plan.placed),
        num_records=sum(h.records_count for _, h in plan.placed),
        valid_bytes=plan.size,
    )
