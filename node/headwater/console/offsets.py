"""Offsets the console computes without I/O: a group's lag, and reset-offsets plans.

A reset follows ``kafka-consumer-groups --reset-offsets``: each partition of the topic gets
a new committed offset from the spec (earliest, latest, an offset, a time, a shift from the
committed offset), clamped to the log's ``[log start, log end]`` so the group never commits
an offset the log cannot serve.  A partition the group never committed shifts from the log
end, as Kafka's tool does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from headwater.client import TopicPartition
from headwater.console.inputs import ResetForm


class ResetRow(NamedTuple):
    partition: int
    current: int | None
    new: int


def plan_reset(
    form: ResetForm,
    partitions: Iterable[TopicPartition],
    *,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    committed: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int],
) -> list[ResetRow]:
    """The new offset of each partition; ``by_time`` holds the first offset at the form's
    time (for ``to-datetime`` and ``by-duration``; a partition with none there resets to
    its log end)."""
    rows = []
    for tp in sorted(partitions):
        low, high = earliest[tp], latest[tp]
        current = committed.get(tp)
        if form.spec == "to-earliest":
            new = low
        elif form.spec == "to-latest":
            new = high
        elif form.spec == "to-offset":
            new = form.amount
        elif form.spec == "shift-by":
            new = (current if current is not None else high) + form.amount
        else:
            new = by_time.get(tp, high)
        rows.append(ResetRow(tp.partition, current, min(max(new, low), high)))
    return rows


class LagRow(NamedTuple):
    topic: str
    partition: int
    committed: int
    log_end: int | None
    lag: int | None
    member: str | None


def lag_rows(
    committed: Mapping[TopicPartition, int],
    log_end: Mapping[TopicPartition, int],
    owner: Mapping[TopicPartition, str],
) -> list[LagRow]:
    """Per committed partition: the log end offset and the lag (never negative: a log
    truncated below the committed offset has no lag to catch up)."""
    rows = []
    for tp, offset in sorted(committed.items()):
        end = log_end.get(tp)
        lag = None if end is None else max(0, end - offset)
        rows.append(LagRow(tp.topic, tp.partition, offset, end, lag, owner.get(tp)))
    return rows
