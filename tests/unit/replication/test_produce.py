"""acks admission (min.insync.replicas) and delayed acks=all completion."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.replication import FetchWait

from .conftest import leader


@pytest.mark.parametrize("acks", [2, -2, 5])
def test_invalid_acks(acks: int) -> None:
    assert leader().check_produce(acks) is ErrorCode.INVALID_REQUIRED_ACKS


def test_acks_all_refused_below_min_isr() -> None:
    p = leader(isr=(1,), replicas=(1, 2, 3), min_isr=2)
    assert p.check_produce(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.check_produce(1) is ErrorCode.NONE
    assert p.check_produce(0) is ErrorCode.NONE


def test_delayed_produce_completes_when_hw_reaches_offset() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2))
    p.on_leader_append(10)
    assert p.add_delayed_produce(7, required_offset=10) is None
    p.update_follower_fetch(2, fetch_offset=6, now_ms=1)
    assert p.complete_delayed_produces() == []
    p.update_follower_fetch(2, fetch_offset=10, now_ms=2)
    assert p.complete_delayed_produces() == [(7, ErrorCode.NONE)]
    assert p.delayed_produce_count == 0


def test_delayed_produce_already_satisfied() -> None:
    p = leader(isr=(1,), replicas=(1,), min_isr=1)
    p.on_leader_append(3)
    assert p.add_delayed_produce(1, required_offset=3) == (1, ErrorCode.NONE)


def test_isr_shrank_below_min_after_append() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2), min_isr=2, lag_ms=100)
    p.on_leader_append(5)
    assert p.add_delayed_produce(1, required_offset=5) is None
    change = p.maybe_shrink_isr(1000)
    assert change is not None
    p.isr_change_committed(change, new_zk_version=8)
    assert p.complete_delayed_produces() == [(1, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)]


def test_delayed_produce_expiry() -> None:
    p = leader()
    p.on_leader_append(5)
    p.add_delayed_produce(4, required_offset=5)
    assert p.expire_delayed_produce(4) == (4, ErrorCode.REQUEST_TIMED_OUT)
    assert p.expire_delayed_produce(4) is None


def test_fetch_wait_min_bytes_and_deadline() -> None:
    wait = FetchWait.start(now_ms=1000, max_wait_ms=500, min_bytes=100)
    assert not wait.is_satisfied(available_bytes=99, has_error=False, now_ms=1200)
    assert wait.is_satisfied(available_bytes=100, has_error=False, now_ms=1200)
    assert wait.is_satisfied(available_bytes=0, has_error=False, now_ms=1500)
    assert wait.is_satisfied(available_bytes=0, has_error=True, now_ms=1000)
    assert wait.remaining_ms(1200) == 300


def test_fetch_wait_zero_min_bytes_still_needs_one_byte_before_deadline() -> None:
    wait = FetchWait.start(now_ms=0, max_wait_ms=500, min_bytes=0)
    assert not wait.is_satisfied(available_bytes=0, has_error=False, now_ms=10)
    assert wait.is_satisfied(available_bytes=1, has_error=False, now_ms=10)


def test_a_re_elected_leader_keeps_waiting_produces_and_completes_them_over_the_new_isr() -> None:
    """Controlled shutdown of follower 3: the controller shrinks it out of the ISR with a
    new leader epoch for the same leader.  The waiting acks=all produce is answered as soon
    as the remaining ISR holds it, not left to time out."""
    p = leader(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2)
    p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=1)
    assert p.add_delayed_produce(7, required_offset=10) is None  # follower 3 is behind
    assert p.make_leader(
        leader_epoch=6, isr=(1, 2), replicas=(1, 2, 3), zk_version=8,
        log_end_offset=10, high_watermark=p.high_watermark, now_ms=2,
    )  # fmt: skip
    assert p.followers[2].log_end_offset == 10, "a re-elected leader keeps what it knew"
    assert p.high_watermark == 10
    assert p.complete_delayed_produces() == [(7, ErrorCode.NONE)]


def test_a_re_sent_smaller_isr_in_the_same_epoch_advances_the_high_watermark() -> None:
    p = leader(isr=(1, 2, 3), replicas=(1, 2, 3), min_isr=2, epoch=5)
    p.on_leader_append(4)
    p.update_follower_fetch(2, fetch_offset=4, now_ms=1)
    p.add_delayed_produce(9, required_offset=4)
    assert not p.make_leader(
        leader_epoch=5, isr=(1, 2), replicas=(1, 2, 3), zk_version=8,
        log_end_offset=4, high_watermark=p.high_watermark, now_ms=2,
    )  # fmt: skip
    assert p.high_watermark == 4
    assert p.complete_delayed_produces() == [(9, ErrorCode.NONE)]


def test_a_new_leader_starts_without_waiting_produces_or_follower_positions() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2))
    p.on_leader_append(3)
    p.update_follower_fetch(2, fetch_offset=3, now_ms=1)
    p.make_follower(leader_id=2, leader_epoch=6, isr=(1, 2), replicas=(1, 2), zk_version=8)
    assert p.make_leader(
        leader_epoch=7, isr=(1, 2), replicas=(1, 2), zk_version=9,
        log_end_offset=3, high_watermark=3, now_ms=2,
    )  # fmt: skip
    assert p.followers[2].log_end_offset == 0
    assert p.delayed_produce_count == 0
