"""ISR shrink after replica.lag.time.max.ms, expand at the HW, pending states."""

from __future__ import annotations

from headwater.replication import IsrState

from .conftest import leader


def test_lagging_follower_is_proposed_for_removal() -> None:
    p = leader(lag_ms=1000, leo=0, now_ms=0)
    p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=900)
    assert p.maybe_shrink_isr(1000) is None
    change = p.maybe_shrink_isr(1001)
    assert change is not None
    assert change.new_isr == (1, 2)
    assert not change.is_expand
    assert change.expected_zk_version == 7
    assert p.isr_state is IsrState.PENDING_SHRINK
    # While pending, the HW still waits for the replica being removed.
    assert p.maximal_isr == (1, 2, 3)
    assert p.high_watermark == 0


def test_committed_shrink_advances_hw() -> None:
    p = leader(lag_ms=1000)
    p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=1500)
    change = p.maybe_shrink_isr(1500)
    assert change is not None
    assert p.isr_change_committed(change, new_zk_version=8)
    assert p.isr == (1, 2)
    assert p.zk_version == 8
    assert p.high_watermark == 10
    assert p.isr_state is IsrState.COMMITTED


def test_failed_isr_write_returns_to_committed_without_change() -> None:
    p = leader(lag_ms=1000)
    change = p.maybe_shrink_isr(5000)
    assert change is not None
    p.isr_change_failed(change)
    assert p.isr_state is IsrState.COMMITTED
    assert p.isr == (1, 2, 3)


def test_no_second_change_while_one_is_pending() -> None:
    p = leader(lag_ms=1000, isr=(1, 2), replicas=(1, 2, 3))
    assert p.maybe_shrink_isr(5000) is not None
    p.update_follower_fetch(3, fetch_offset=0, now_ms=5000)
    assert p.maybe_expand_isr(3) is None
    assert p.maybe_shrink_isr(9000) is None


def test_follower_rejoins_when_it_reaches_hw() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2, 3), leo=0)
    p.on_leader_append(10)
    p.update_follower_fetch(2, fetch_offset=10, now_ms=1)
    assert p.high_watermark == 10
    assert p.update_follower_fetch(3, fetch_offset=5, now_ms=2).isr_change is None
    change = p.update_follower_fetch(3, fetch_offset=10, now_ms=3).isr_change
    assert change is not None and change.is_expand
    assert change.new_isr == (1, 2, 3)
    assert p.isr_state is IsrState.PENDING_EXPAND
    assert p.maximal_isr == (1, 2, 3)
    assert not p.isr_change_committed(change, new_zk_version=8)
    assert p.isr == (1, 2, 3)


def test_expand_requires_reaching_leader_epoch_start() -> None:
    p = leader(isr=(1,), replicas=(1, 2), leo=10, min_isr=1)
    assert p.high_watermark == 10
    assert p.update_follower_fetch(2, fetch_offset=9, now_ms=1).isr_change is None


def test_controller_isr_overrides_pending_change() -> None:
    p = leader(lag_ms=1000)
    change = p.maybe_shrink_isr(5000)
    assert change is not None
    p.make_leader(
        leader_epoch=5,
        isr=(1, 3),
        replicas=(1, 2, 3),
        zk_version=20,
        log_end_offset=0,
        high_watermark=0,
        now_ms=5000,
    )
    assert p.isr_state is IsrState.COMMITTED
    assert not p.isr_change_committed(change, new_zk_version=21)
    assert p.isr == (1, 3)
    assert p.zk_version == 20


def test_under_replicated_flag() -> None:
    p = leader(isr=(1, 2), replicas=(1, 2, 3))
    assert p.is_under_replicated
    assert not leader().is_under_replicated


def test_shutting_down_follower_counts_for_the_hw_but_never_rejoins() -> None:
    """KIP-841: a broker in controlled shutdown that fetches on its way out (it became
    a follower of the partitions it led) must not be put back into the ISR it was just
    taken out of; its position still moves the high watermark."""
    p = leader(isr=(1, 2), replicas=(1, 2, 3), leo=0)
    p.on_leader_append(10)
    outcome = p.update_follower_fetch(3, fetch_offset=10, now_ms=1, may_join_isr=False)
    assert outcome.isr_change is None
    assert p.isr == (1, 2) and p.isr_state is IsrState.COMMITTED
    assert p.maybe_expand_isr(2) is None  # already in; 3 was never proposed
    p.update_follower_fetch(2, fetch_offset=10, now_ms=2)
    assert p.high_watermark == 10
    # The same broker back from its restart fetches as usual and rejoins.
    change = p.update_follower_fetch(3, fetch_offset=10, now_ms=3).isr_change
    assert change is not None and change.new_isr == (1, 2, 3)
