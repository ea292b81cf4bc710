"""Offset planning rules: bound resolution, data loss, range splitting, rate limiting.

The splitting and rate-limit expectations are those of Spark's
``KafkaOffsetRangeCalculatorSuite`` and ``KafkaMicroBatchStream.rateLimit``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping

import pytest
from headwater.client.types import TopicPartition
from headwater_spark import planning
from headwater_spark.options import OffsetBound, OptionError
from headwater_spark.planning import DataLossError, OffsetRange

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)

EARLIEST = {T0: 5, T1: 0, T2: 10}
LATEST = {T0: 100, T1: 50, T2: 10}
BY_TIME = {1000: {T0: 20, T1: 7, T2: None}}


def lookup(query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
    out: dict[TopicPartition, int | None] = {}
    for tp, ts in query.items():
        if ts == -2:
            out[tp] = EARLIEST[tp]
        elif ts == -1:
            out[tp] = LATEST[tp]
        else:
            out[tp] = BY_TIME[ts][tp]
    return out


def resolve(bound: OffsetBound, *, starting: bool = True, strategy: str = "error") -> dict:
    return planning.resolve_bound(
        bound, [T0, T1, T2], lookup=lookup, starting=starting, strategy=strategy
    )


def test_earliest_and_latest() -> None:
    assert resolve(OffsetBound("earliest", "startingOffsets")) == EARLIEST
    assert resolve(OffsetBound("latest", "endingOffsets"), starting=False) == LATEST


def test_json_offsets_resolve_markers_and_keep_numbers() -> None:
    bound = OffsetBound("offsets", "startingOffsets", offsets={T0: 7, T1: -2, T2: -1})
    assert resolve(bound) == {T0: 7, T1: 0, T2: 10}


def test_json_offsets_must_cover_exactly_the_subscribed_partitions() -> None:
    bound = OffsetBound("offsets", "startingOffsets", offsets={T0: 7, TopicPartition("x", 0): 1})
    with pytest.raises(OptionError, match=r"startingOffsets.*missing t-1, t-2.*not subscribed x-0"):
        resolve(bound)


def test_timestamp_without_a_match_fails_a_start_by_default() -> None:
    with pytest.raises(OptionError, match=r"startingTimestamp.*t-2"):
        resolve(OffsetBound("timestamp", "startingTimestamp", timestamp_ms=1000))


def test_timestamp_without_a_match_is_latest_with_the_strategy_or_for_an_end() -> None:
    expected = {T0: 20, T1: 7, T2: 10}
    bound = OffsetBound("timestamp", "startingTimestamp", timestamp_ms=1000)
    assert resolve(bound, strategy="latest") == expected
    end = OffsetBound("timestamps", "endingOffsetsByTimestamp", offsets=dict.fromkeys(LATEST, 1000))
    assert resolve(end, starting=False) == expected


def test_plan_ranges_within_what_exists() -> None:
    ranges = planning.plan_ranges(
        {T0: 5, T1: 10}, {T0: 100, T1: 50}, earliest=EARLIEST, fail_on_data_loss=True
    )
    assert ranges == [OffsetRange("t", 0, 5, 100), OffsetRange("t", 1, 10, 50)]


def test_deleted_offsets_fail_by_default() -> None:
    with pytest.raises(DataLossError, match=r"\[0, 5\) of t-0.*failOnDataLoss"):
        planning.plan_ranges({T0: 0}, {T0: 100}, earliest=EARLIEST, fail_on_data_loss=True)


def test_deleted_offsets_are_skipped_without_fail_on_data_loss(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        ranges = planning.plan_ranges(
            {T0: 0, T1: 60}, {T0: 100, T1: 50}, earliest=EARLIEST, fail_on_data_loss=False
        )
    assert ranges == [OffsetRange("t", 0, 5, 100)]
    assert "were deleted" in caplog.text and "reset or recreated" in caplog.text


def test_new_partitions_start_from_earliest_and_gone_ones_are_data_loss() -> None:
    ranges = planning.plan_ranges(
        {T1: 3},
        {T1: 50, T2: 10},
        earliest={T1: 0, T2: 0},
        fail_on_data_loss=True,
        new_partitions_from_earliest=True,
    )
    assert ranges == [OffsetRange("t", 1, 3, 50), OffsetRange("t", 2, 0, 10)]
    with pytest.raises(DataLossError, match="t-0 is gone"):
        planning.plan_ranges({T0: 1}, {}, earliest={}, fail_on_data_loss=True)


def r(p: int, start: int, end: int) -> OffsetRange:
    return OffsetRange("t", p, start, end)


def test_split_without_options_drops_empty_ranges_only() -> None:
    got = planning.split_ranges(
        [r(0, 1, 2), r(1, 5, 5)], min_partitions=None, max_records_per_partition=None
    )
    assert got == [r(0, 1, 2)]


def test_min_partitions_splits_in_proportion() -> None:
    # KafkaOffsetRangeCalculatorSuite: "with minPartition = 4 ... split the large ones".
    got = planning.split_ranges(
        [r(1, 1, 5), r(2, 1, 21)], min_partitions=4, max_records_per_partition=None
    )
    assert got == [r(1, 1, 5), r(2, 1, 7), r(2, 7, 14), r(2, 14, 21)]
    even = planning.split_ranges([r(1, 1, 5)], min_partitions=3, max_records_per_partition=None)
    assert even == [r(1, 1, 2), r(1, 2, 3), r(1, 3, 5)]


def test_min_partitions_already_met_keeps_the_ranges() -> None:
    ranges = [r(1, 1, 5), r(2, 1, 21)]
    assert planning.split_ranges(ranges, min_partitions=2, max_records_per_partition=None) == ranges


def test_max_records_per_partition_caps_every_range() -> None:
    got = planning.split_ranges([r(0, 0, 10)], min_partitions=None, max_records_per_partition=4)
    assert got == [r(0, 0, 3), r(0, 3, 6), r(0, 6, 10)]
    assert all(x.size <= 4 for x in got)


def test_ranges_cover_the_input_exactly() -> None:
    ranges = [r(0, 0, 1000), r(1, 17, 18), r(2, 3, 99)]
    got = planning.split_ranges(ranges, min_partitions=7, max_records_per_partition=300)
    for original in ranges:
        pieces = [x for x in got if x.partition == original.partition]
        assert pieces[0].from_offset == original.from_offset
        assert pieces[-1].until_offset == original.until_offset
        assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(pieces))
    assert all(x.size <= 300 for x in got)
    # Kafka's proportional rule is approximate: 1000 / 1097 of 7 parts round to 6 pieces.
    assert len(got) == 6


def test_rate_limit_prorates_and_never_starves_small_partitions() -> None:
    start = {T0: 0, T1: 0}
    latest = {T0: 1000, T1: 1, T2: 50}
    got = planning.rate_limit(100, start, latest, new_from={T2: 40})
    # backlog 1000 + 1 + 10 = 1011: t-0 gets floor(98.9) = 98, t-1 its 1, t-2 floor(0.99 -> ceil) 1
    assert got == {T0: 98, T1: 1, T2: 41}


def test_rate_limit_with_nothing_new_returns_latest() -> None:
    assert planning.rate_limit(10, {T0: 5}, {T0: 5}, new_from={}) == {T0: 5}


def test_checkpoint_json_has_string_partition_keys_and_round_trips() -> None:
    offsets = {T1: 7, T0: 3, TopicPartition("a", 10): 1}
    data = planning.to_json(offsets)
    assert data == {"a": {"10": 1}, "t": {"0": 3, "1": 7}}
    assert planning.from_json(data) == offsets
