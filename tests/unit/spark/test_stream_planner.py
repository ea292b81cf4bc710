"""Streaming and batch plans over an in-memory cluster view.

Covers the micro-batch protocol the Spark reader delegates to: the initial
offset, ``maxOffsetsPerTrigger`` through ``latest_offset``, new partitions
from earliest, Trigger.AvailableNow's fixed target, batch plans with
``minPartitions``, and ``groupId`` commits (a transient failure does not stop the
query and is retried after the next batch; a refusal by the group stops it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest
from headwater import errors
from headwater.client.types import TopicPartition
from headwater_spark.driver import GroupCommitError, StreamPlanner, plan_batch
from headwater_spark.options import OptionError, Subscription, parse_read_options
from headwater_spark.planning import OffsetRange

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class FakeView:
    def __init__(self) -> None:
        self.earliest = {T0: 0, T1: 0}
        self.latest = {T0: 100, T1: 20}
        self.commits: list[tuple[str, dict[TopicPartition, int]]] = []
        self.fail_commit: errors.HeadwaterError | None = None

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        return sorted(tp for tp in self.latest if subscription.matches(tp.topic))

    def lookup(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp, ts in query.items():
            out[tp] = self.earliest[tp] if ts == -2 else self.latest[tp] if ts == -1 else None
        return out

    def commit(self, group_id: str, positions: Mapping[TopicPartition, int]) -> None:
        if self.fail_commit is not None:
            raise self.fail_commit
        self.commits.append((group_id, dict(positions)))


def planner(view: FakeView, **options: str) -> StreamPlanner:
    opts = parse_read_options(
        {"bootstrap.servers": "h:1", "subscribe": "t", **options}, streaming=True
    )
    return StreamPlanner(opts, view)


def test_a_new_query_starts_at_latest_by_default() -> None:
    assert planner(FakeView()).initial_offset() == {T0: 100, T1: 20}
    assert planner(FakeView(), startingOffsets="earliest").initial_offset() == {T0: 0, T1: 0}


def test_max_offsets_per_trigger_bounds_each_micro_batch() -> None:
    view = FakeView()
    p = planner(view, startingOffsets="earliest", maxOffsetsPerTrigger="24")
    start = p.initial_offset()
    end = p.latest_offset(start, 24)
    assert end == {T0: 20, T1: 4}
    ranges = p.partitions(start, end)
    assert sum(r.size for r in ranges) == 24
    # Spark may pass ReadAllAvailable (None here), e.g. for its own AvailableNow batches.
    assert p.latest_offset(start, None) == {T0: 100, T1: 20}


def test_new_partitions_are_read_from_earliest() -> None:
    view = FakeView()
    p = planner(view)
    start = p.initial_offset()
    t2 = TopicPartition("t", 2)
    view.latest[t2] = 7
    view.earliest[t2] = 0
    end = p.latest_offset(start, None)
    assert end[t2] == 7
    assert p.partitions(start, end) == [OffsetRange("t", 2, 0, 7)]


def test_available_now_never_reads_past_the_target() -> None:
    view = FakeView()
    p = planner(view, startingOffsets="earliest")
    p.prepare_available_now()
    view.latest = {T0: 500, T1: 500}
    assert p.latest_offset({T0: 0, T1: 0}, None) == {T0: 100, T1: 20}


def test_group_commits_follow_each_micro_batch(caplog: pytest.LogCaptureFixture) -> None:
    view = FakeView()
    p = planner(view, groupId="etl")
    p.commit({T0: 10, T1: 3})
    assert view.commits == [("etl", {T0: 10, T1: 3})]
    view.fail_commit = errors.CoordinatorNotAvailableError("no coordinator")
    with caplog.at_level(logging.WARNING):
        p.commit({T0: 11, T1: 3})
    assert "committing offsets for group 'etl' failed" in caplog.text
    view.fail_commit = None
    p.commit({T0: 11, T1: 3})  # not marked committed: the next call commits it again
    assert view.commits[-1] == ("etl", {T0: 11, T1: 3})
    assert planner(FakeView()).commit({T0: 1}) is None  # no groupId: nothing to commit


def test_group_commit_refused_by_an_active_group_stops_the_query() -> None:
    view = FakeView()
    p = planner(view, groupId="etl")
    view.fail_commit = errors.UnknownMemberIdError("group 'etl' has active members")
    with pytest.raises(GroupCommitError, match="groupId 'etl': UNKNOWN_MEMBER_ID") as info:
        p.commit({T0: 11, T1: 3})
    assert "stop its consumers or give the query a groupId of its own" in str(info.value)
    assert isinstance(info.value.error, errors.UnknownMemberIdError)
    view.fail_commit = errors.InvalidGroupIdError("bad group")
    with pytest.raises(GroupCommitError, match="INVALID_GROUP_ID") as info:
        p.commit({T0: 12, T1: 3})
    assert "stop its consumers" not in str(info.value)
    assert view.commits == []


def test_batch_plan_with_min_partitions_and_bounds() -> None:
    view = FakeView()
    opts = parse_read_options(
        {
            "bootstrap.servers": "h:1",
            "subscribe": "t",
            "startingOffsets": '{"t":{"0":10,"1":-2}}',
            "endingOffsets": '{"t":{"0":50,"1":-1}}',
            "minPartitions": "3",
        },
        streaming=False,
    )
    ranges = plan_batch(opts, view)
    assert [(r.partition, r.from_offset, r.until_offset) for r in ranges] == [
        (0, 10, 30),
        (0, 30, 50),
        (1, 0, 20),
    ]


def test_batch_start_after_end_is_refused() -> None:
    opts = parse_read_options(
        {
            "bootstrap.servers": "h:1",
            "subscribe": "t",
            "startingOffsets": '{"t":{"0":60,"1":0}}',
            "endingOffsets": '{"t":{"0":50,"1":5}}',
        },
        streaming=False,
    )
    with pytest.raises(OptionError, match="starting offset 60 of t-0 is after"):
        plan_batch(opts, FakeView())
