"""Offset planning on the driver: bounds to offsets, offsets to ranges, ranges to tasks.

The driver only plans; executors read.  Planning is a chain of pure steps so
every rule of Spark's Kafka source has a unit test without a cluster:

1. :func:`resolve_bound` turns a ``startingOffsets``-style bound into one
   offset per partition, asking the cluster through a ``lookup`` function
   (Kafka's ListOffsets: ``-2`` earliest, ``-1`` latest, else a timestamp) that
   the caller passes in.
2. :func:`plan_ranges` pairs start and end offsets into :class:`OffsetRange`\\ s,
   applying ``failOnDataLoss`` to offsets that retention deleted or that went
   backwards, and :func:`split_ranges` cuts them for ``minPartitions`` /
   ``maxRecordsPerPartition`` exactly as Spark's ``KafkaOffsetRangeCalculator``.
3. :func:`rate_limit` caps a micro-batch at ``maxOffsetsPerTrigger`` records,
   spread across partitions in proportion to their backlog (Kafka's rule).

Streaming offsets travel through Spark's checkpoint as JSON dicts
``{"topic": {"0": 42}}`` (:func:`to_json` / :func:`from_json`): string
partition keys, as in the Kafka source's checkpoints.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from headwater.client.types import TopicPartition

from headwater_spark.options import EARLIEST, LATEST, OffsetBound, OptionError

log = logging.getLogger(__name__)

Lookup = Callable[[Mapping[TopicPartition, int]], Mapping[TopicPartition, int | None]]
"""ListOffsets: ``{tp: -2 | -1 | timestamp}`` to ``{tp: offset or None (no match)}``."""

PartitionOffsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Offsets the query needs no longer exist (retention, a deleted or recreated topic)."""


_DATA_LOSS_HINT = (
    " Some data may have been lost because it is no longer available in Headwater (deleted "
    "by retention, or the topic was deleted or recreated). If you want your query to skip "
    "lost data and continue, set the source option failOnDataLoss to 'false'."
)


def report_data_loss(message: str, *, fail_on_data_loss: bool) -> None:
    """Raise :class:`DataLossError`, or log a warning when ``failOnDataLoss`` is false."""
    if fail_on_data_loss:
        raise DataLossError(message + _DATA_LOSS_HINT)
    log.warning("%s; skipping (failOnDataLoss=false)", message)


class OffsetRange(NamedTuple):
    """Offsets ``[from_offset, until_offset)`` of one partition: one Spark task's work."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """``{tp: offset}`` to the checkpointed form ``{"topic": {"0": offset}}`` (sorted)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    """The inverse of :func:`to_json`."""
    return {
        TopicPartition(topic, int(p)): int(off)
        for topic, parts in data.items()
        for p, off in parts.items()
    }


def _check_covers(bound: OffsetBound, partitions: Iterable[TopicPartition]) -> None:
    wanted = set(partitions)
    given = set(bound.offsets)
    if given != wanted:
        missing = sorted(wanted - given)
        extra = sorted(given - wanted)
        detail = []
        if missing:
            detail.append("missing " + ", ".join(map(str, missing)))
        if extra:
            detail.append("not subscribed " + ", ".join(map(str, extra)))
        raise OptionError(
            f"option {bound.option!r} must give every subscribed partition "
            f"and no other ({'; '.join(detail)})"
        )


def resolve_bound(
    bound: OffsetBound,
    partitions: Iterable[TopicPartition],
    *,
    lookup: Lookup,
    starting: bool,
    strategy: str = "error",
) -> PartitionOffsets:
    """One concrete offset per partition for ``bound``.

    A timestamp with no record at or after it resolves to the latest offset,
    except for a start with ``startingOffsetsByTimestampStrategy=error``
    (the default), which fails naming the partition, as in Spark.
    """
    tps = sorted(set(partitions))
    if not tps:
        return {}
    if bound.kind in ("earliest", "latest"):
        which = EARLIEST if bound.kind == "earliest" else LATEST
        return _answers(lookup(dict.fromkeys(tps, which)), tps, what=bound.option)
    if bound.kind == "offsets":
        _check_covers(bound, tps)
        special = {tp: off for tp, off in bound.offsets.items() if off in (EARLIEST, LATEST)}
        out = {tp: off for tp, off in bound.offsets.items() if off >= 0}
        if special:
            out.update(_answers(lookup(special), list(special), what=bound.option))
        return out
    if bound.kind == "timestamps":
        _check_covers(bound, tps)
        query = dict(bound.offsets)
    else:
        query = dict.fromkeys(tps, bound.timestamp_ms)
    found = lookup(query)
    out = {}
    unmatched = []
    for tp in tps:
        off = found.get(tp)
        if off is None:
            unmatched.append(tp)
        else:
            out[tp] = off
    if unmatched:
        if starting and strategy == "error":
            raise OptionError(
                f"option {bound.option!r}: no record at or after the given timestamp in "
                + ", ".join(map(str, unmatched))
                + " (set startingOffsetsByTimestampStrategy=latest to start at the end)"
            )
        out.update(_answers(lookup(dict.fromkeys(unmatched, LATEST)), unmatched, what="latest"))
    return out


def _answers(
    found: Mapping[TopicPartition, int | None], tps: Iterable[TopicPartition], *, what: str
) -> PartitionOffsets:
    out: PartitionOffsets = {}
    for tp in tps:
        off = found.get(tp)
        out[tp] = off if off is not None and off >= 0 else 0
    return out


def plan_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    *,
    earliest: Mapping[TopicPartition, int],
    fail_on_data_loss: bool,
    new_partitions_from_earliest: bool = False,
) -> list[OffsetRange]:
    """``[start, end)`` per partition of ``end``, checked against what still exists.

    ``earliest`` holds each partition's log start offset now.  A start below it
    lost data to retention; an end below the start means the partition was
    reset.  Partitions of ``end`` missing from ``start`` are new and start at
    their earliest offset when ``new_partitions_from_earliest`` (streaming);
    partitions of ``start`` missing from ``end`` were deleted.  Each of these is
    reported through :func:`report_data_loss`; with ``failOnDataLoss=false``
    the range is clamped to what exists.
    """
    ranges: list[OffsetRange] = []
    for tp in sorted(set(start) - set(end)):
        report_data_loss(
            f"partition {tp} is gone (it was at offset {start[tp]})",
            fail_on_data_loss=fail_on_data_loss,
        )
    for tp in sorted(end):
        until = end[tp]
        low = earliest.get(tp, 0)
        if tp in start:
            begin = start[tp]
        elif new_partitions_from_earliest:
            begin = low
            if low != 0:
                report_data_loss(
                    f"added partition {tp} starts from offset {low} instead of 0",
                    fail_on_data_loss=fail_on_data_loss,
                )
        else:
            raise OptionError(f"no starting offset for partition {tp}")
        if begin < low:
            report_data_loss(
                f"offsets [{begin}, {low}) of {tp} were deleted before they were read",
                fail_on_data_loss=fail_on_data_loss,
            )
            begin = low
        if until < begin:
            report_data_loss(
                f"the end offset {until} of {tp} is before the start offset {begin} "
                "(the partition was reset or recreated)",
                fail_on_data_loss=fail_on_data_loss,
            )
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, begin, until))
    return ranges


def _divide(parts: int, r: OffsetRange) -> list[OffsetRange]:
    """``r`` cut into ``parts`` contiguous pieces; the last takes the rounding."""
    remaining = r.size
    begin = r.from_offset
    out = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        stop = min(begin + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, begin, stop))
        begin = stop
    return [x for x in out if x.size > 0]


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round rounds half up.
    return max(math.floor(size / total * min_parts + 0.5), 1)


def split_ranges(
    ranges: Iterable[OffsetRange],
    *,
    min_partitions: int | None,
    max_records_per_partition: int | None,
) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``: drop empty ranges, then split.

    ``maxRecordsPerPartition`` cuts every range into pieces of at most that
    many records; then, if there are still fewer than ``minPartitions``
    ranges, the big ones are cut in proportion to their share of the records.
    """
    non_empty = [r for r in ranges if r.size > 0]
    if (min_partitions is None or len(non_empty) >= min_partitions) and (
        max_records_per_partition is None
    ):
        return non_empty
    if max_records_per_partition is not None:
        divided = [
            piece
            for r in non_empty
            for piece in _divide(math.ceil(r.size / max_records_per_partition), r)
        ]
    else:
        divided = non_empty
    if min_partitions is None or min_partitions <= len(divided):
        return divided
    total = sum(r.size for r in divided)
    unsplit = {i for i, r in enumerate(divided) if _part_count(r.size, total, min_partitions) == 1}
    split_total = total - sum(divided[i].size for i in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    out: list[OffsetRange] = []
    for i, r in enumerate(divided):
        parts = 1 if i in unsplit else _part_count(r.size, split_total, split_min)
        out.extend(_divide(parts, r))
    return out


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    *,
    new_from: Mapping[TopicPartition, int],
) -> PartitionOffsets:
    """The end offsets of a micro-batch of at most about ``limit`` records.

    Each partition gets ``limit`` times its share of the backlog (rounded
    down, but at least one record so small partitions never starve: Kafka's
    rule); partitions absent from ``start`` are new and begin at ``new_from``.
    """
    sizes: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, new_from.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        begin = start.get(tp, new_from.get(tp, 0))
        prorate = limit * (size / total)
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin + step)
    return out
