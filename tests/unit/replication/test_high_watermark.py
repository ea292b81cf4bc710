"""High watermark: min LEO over the (maximal) ISR, monotonic, follower tracking."""

from __future__ import annotations

from .conftest import leader


def test_hw_is_min_leo_over_isr() -> None:
    p = leader(leo=0)
    assert not p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=1)
    assert p.high_watermark == 0  # follower 3 still at 0
    result = p.update_follower_fetch(3, fetch_offset=7, now_ms=1)
    assert result.high_watermark_changed
    assert p.high_watermark == 7


def test_single_replica_leader_hw_follows_leo() -> None:
    p = leader(isr=(1,), replicas=(1,), min_isr=1)
    assert p.on_leader_append(3)
    assert p.high_watermark == 3


def test_hw_never_moves_backwards() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2))
    p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=1)
    assert p.high_watermark == 10
    # A fetch from an older offset (e.g. a retried request) cannot lower it.
    assert not p.update_follower_fetch(2, fetch_offset=4, now_ms=2).high_watermark_changed
    assert p.high_watermark == 10


def test_follower_leo_is_capped_at_leader_leo() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2), leo=5)
    p.update_follower_fetch(2, fetch_offset=50, now_ms=1)
    assert p.followers[2].log_end_offset == 5


def test_fetch_from_unknown_replica_is_ignored() -> None:
    p = leader()
    result = p.update_follower_fetch(9, fetch_offset=5, now_ms=1)
    assert result == (False, None)


def test_follower_partition_does_not_compute_hw() -> None:
    p = leader()
    p.make_follower(leader_id=2, leader_epoch=6, isr=(1, 2), replicas=(1, 2), zk_version=1)
    assert not p.maybe_increment_high_watermark()


def test_caught_up_time_uses_previous_fetch_end() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2), leo=0, now_ms=0)
    p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=0, now_ms=100)  # behind: leader LEO was 10
    assert p.followers[2].last_caught_up_time_ms == 0
    p.on_leader_append(20)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=200)  # reached LEO as of previous fetch
    assert p.followers[2].last_caught_up_time_ms == 100
    p.update_follower_fetch(2, fetch_offset=20, now_ms=300)
    assert p.followers[2].last_caught_up_time_ms == 300


def test_follower_hw_is_leader_hw_capped_at_own_leo() -> None:
    p = leader()
    p.make_follower(leader_id=2, leader_epoch=6, isr=(1, 2), replicas=(1, 2), zk_version=1)
    assert p.on_follower_append(log_end_offset=5, leader_high_watermark=9)
    assert p.high_watermark == 5
    assert p.on_follower_append(log_end_offset=12, leader_high_watermark=9)
    assert p.high_watermark == 9
    assert not p.on_follower_append(log_end_offset=12, leader_high_watermark=9)


def test_leader_ignores_follower_append() -> None:
    assert not leader().on_follower_append(log_end_offset=5, leader_high_watermark=9)
