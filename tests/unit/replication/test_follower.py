"""The follower's decisions: truncate-to after OffsetsForLeaderEpoch, append, back off,
and the TRUNCATING/FETCHING phases with their illegal transitions."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.replication import IllegalStateTransition
from headwater.replication.follower import (
    Append,
    Backoff,
    FollowerFetchState,
    FollowerPhase,
    LocalLog,
    StartAt,
    TruncateTo,
    complete_batches_from,
)

from .conftest import new_partition


def local(*, start: int = 0, end: int = 10, hw: int = 6, epoch: int = 3) -> LocalLog:
    return LocalLog(start, end, hw, epoch)


def fetching(backoff_ms: float = 100) -> FollowerFetchState:
    st = FollowerFetchState(4, backoff_ms=backoff_ms)
    st.phase = FollowerPhase.FETCHING
    return st


def batch(base_offset: int, count: int) -> bytes:
    return build_batch([Record(None, b"v")] * count, base_offset=base_offset, timestamp_ms=0)


def epoch_end(
    st: FollowerFetchState,
    log: LocalLog,
    *,
    leader_epoch: int,
    end_offset: int,
    local_end: int = -1,
    error: ErrorCode = ErrorCode.NONE,
) -> TruncateTo | Backoff:
    return st.on_epoch_end_offset(
        log,
        error=error,
        leader_epoch=leader_epoch,
        end_offset=end_offset,
        local_end_offset_for_leader_epoch=local_end,
        now_ms=1000,
    )


# -- truncation -----------------------------------------------------------------------------


def test_a_new_follower_starts_truncating() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    assert st.needs_truncation and st.is_ready(0)


def test_a_log_without_epochs_truncates_to_its_high_watermark_without_asking() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    assert st.truncation_without_leader(local(epoch=-1, hw=6)) == TruncateTo(6)
    assert not st.needs_truncation


def test_a_log_with_epochs_asks_the_leader() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    assert st.truncation_without_leader(local(epoch=3)) is None
    assert st.needs_truncation


def test_same_epoch_on_the_leader_keeps_the_common_prefix() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    assert epoch_end(st, local(end=10), leader_epoch=3, end_offset=8) == TruncateTo(8)
    assert st.phase is FollowerPhase.FETCHING


def test_a_leader_ahead_in_our_epoch_truncates_nothing() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    assert epoch_end(st, local(end=10), leader_epoch=3, end_offset=50) == TruncateTo(10)


def test_an_older_epoch_on_the_leader_uses_the_local_end_of_that_epoch() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    decision = epoch_end(st, local(end=10), leader_epoch=2, end_offset=9, local_end=7)
    assert decision == TruncateTo(7)


def test_an_older_epoch_unknown_locally_falls_back_to_the_high_watermark() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    decision = epoch_end(st, local(end=10, hw=6), leader_epoch=2, end_offset=9, local_end=-1)
    assert decision == TruncateTo(6)


def test_no_epoch_known_on_the_leader_truncates_to_the_high_watermark() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    assert epoch_end(st, local(hw=6), leader_epoch=-1, end_offset=-1) == TruncateTo(6)


def test_an_epoch_error_backs_off_and_keeps_truncating() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    decision = epoch_end(
        st, local(), leader_epoch=3, end_offset=8, error=ErrorCode.FENCED_LEADER_EPOCH
    )
    assert decision == Backoff(1100, "OffsetsForLeaderEpoch: FENCED_LEADER_EPOCH")
    assert st.needs_truncation
    assert not st.is_ready(1099) and st.is_ready(1100)


def test_truncating_twice_is_illegal() -> None:
    st = FollowerFetchState(4, backoff_ms=100)
    epoch_end(st, local(), leader_epoch=3, end_offset=8)
    with pytest.raises(IllegalStateTransition):
        epoch_end(st, local(), leader_epoch=3, end_offset=8)
    with pytest.raises(IllegalStateTransition):
        st.truncation_without_leader(local(epoch=-1))


# -- fetching ---------------------------------------------------------------------------------


def fetched(
    st: FollowerFetchState,
    log: LocalLog,
    *,
    error: ErrorCode = ErrorCode.NONE,
    start: int = 0,
    end: int = 20,
    hw: int = 15,
    records: bytes = b"",
) -> object:
    return st.on_fetched(
        log,
        error=error,
        leader_log_start_offset=start,
        leader_log_end_offset=end,
        leader_high_watermark=hw,
        records=records,
        now_ms=500,
    )


def test_fetched_data_is_appended_with_the_leaders_high_watermark() -> None:
    data = batch(10, 3)
    assert fetched(fetching(), local(end=10), records=data, hw=12) == Append(data, 12)


def test_batches_already_held_locally_are_not_appended_again() -> None:
    data = batch(8, 2) + batch(10, 3)
    decision = fetched(fetching(), local(end=10), records=data)
    assert decision == Append(batch(10, 3), 15)


def test_an_empty_fetch_still_follows_the_high_watermark() -> None:
    assert fetched(fetching(), local(end=10), hw=9) == Append(b"", 9)


def test_out_of_range_above_the_leader_end_truncates_to_it() -> None:
    decision = fetched(fetching(), local(end=30), error=ErrorCode.OFFSET_OUT_OF_RANGE, end=20)
    assert decision == TruncateTo(20)


def test_out_of_range_below_the_leader_start_restarts_the_log_there() -> None:
    decision = fetched(
        fetching(), local(end=3), error=ErrorCode.OFFSET_OUT_OF_RANGE, start=5, end=20
    )
    assert decision == StartAt(5)


def test_out_of_range_inside_the_leaders_log_backs_off() -> None:
    st = fetching()
    decision = fetched(st, local(end=10), error=ErrorCode.OFFSET_OUT_OF_RANGE, start=0, end=20)
    assert isinstance(decision, Backoff) and decision.until_ms == 600
    assert not st.needs_truncation


def test_another_error_backs_off_the_partition() -> None:
    st = fetching()
    decision = fetched(st, local(), error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert decision == Backoff(600, "NOT_LEADER_OR_FOLLOWER")
    assert not st.is_ready(599)


def test_a_refused_append_backs_off_and_truncates_again() -> None:
    st = fetching()
    assert st.on_append_failed(500, "corrupt") == Backoff(600, "corrupt")
    assert st.needs_truncation
    with pytest.raises(IllegalStateTransition):
        st.on_append_failed(500, "again")


def test_fetching_before_truncation_is_illegal() -> None:
    with pytest.raises(IllegalStateTransition):
        fetched(FollowerFetchState(4, backoff_ms=100), local())


def test_complete_batches_from_keeps_whole_batches_only() -> None:
    a, b = batch(0, 2), batch(2, 2)
    assert complete_batches_from(a + b, 0) == a + b
    assert complete_batches_from(a + b, 1) == a + b  # a batch ending past the start is kept
    assert complete_batches_from(a + b, 2) == b
    assert complete_batches_from(a + b, 4) == b""
    assert complete_batches_from(b"", 0) == b""


# -- the follower's high watermark after a truncation ----------------------------------------


def test_a_truncation_caps_the_followers_high_watermark_at_the_new_end() -> None:
    p = new_partition()
    p.make_follower(leader_id=2, leader_epoch=5, isr=(1, 2), replicas=(1, 2), zk_version=0)
    p.on_follower_append(log_end_offset=10, leader_high_watermark=8)
    assert p.on_follower_truncate(log_start_offset=0, log_end_offset=6)
    assert (p.high_watermark, p.log_end_offset) == (6, 6)
    assert not p.on_follower_truncate(log_start_offset=0, log_end_offset=7)


def test_a_restarted_log_lifts_the_high_watermark_to_its_start() -> None:
    p = new_partition()
    p.make_follower(leader_id=2, leader_epoch=5, isr=(1, 2), replicas=(1, 2), zk_version=0)
    assert p.on_follower_truncate(log_start_offset=40, log_end_offset=40)
    assert p.high_watermark == 40


def test_a_leader_ignores_follower_truncations() -> None:
    p = new_partition()
    p.make_leader(
        leader_epoch=5, isr=(1,), replicas=(1,), zk_version=0,
        log_end_offset=10, high_watermark=10, now_ms=0,
    )  # fmt: skip
    assert not p.on_follower_truncate(log_start_offset=0, log_end_offset=3)
    assert p.high_watermark == 10
