"""Role changes driven by LeaderAndIsr / StopReplica: epochs, staleness, fencing."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.replication import IllegalStateTransition, PartitionRole

from .conftest import leader, new_partition


def test_new_partition_has_no_role() -> None:
    p = new_partition()
    assert p.role is PartitionRole.NONE
    assert p.check_produce(1) is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_make_leader_sets_epoch_isr_and_followers() -> None:
    p = leader(leo=10, epoch=3)
    assert p.role is PartitionRole.LEADER
    assert p.leader_id == 1
    assert p.leader_epoch == 3
    assert p.leader_epoch_start_offset == 10
    assert set(p.followers) == {2, 3}
    assert p.high_watermark == 0  # followers have not reported yet


def test_stale_leader_epoch_is_ignored() -> None:
    p = leader(epoch=5)
    changed = p.make_follower(leader_id=2, leader_epoch=4, isr=(2,), replicas=(1, 2), zk_version=9)
    assert not changed
    assert p.role is PartitionRole.LEADER


def test_same_epoch_leader_updates_isr_only() -> None:
    p = leader(epoch=5)
    again = p.make_leader(
        leader_epoch=5,
        isr=(1, 2),
        replicas=(1, 2, 3),
        zk_version=8,
        log_end_offset=0,
        high_watermark=0,
        now_ms=0,
    )
    assert not again
    assert p.isr == (1, 2)
    assert p.zk_version == 8


def test_leader_to_follower_aborts_waiting_produces() -> None:
    p = leader(leo=5)
    assert p.add_delayed_produce(1, 5) is None
    assert p.make_follower(
        leader_id=2, leader_epoch=6, isr=(2, 3), replicas=(1, 2, 3), zk_version=9
    )
    assert p.role is PartitionRole.FOLLOWER
    assert p.leader_id == 2
    done = p.complete_delayed_produces()
    assert [(c.produce_id, c.error) for c in done] == [(1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]


def test_follower_same_leader_same_epoch_is_not_a_change() -> None:
    p = new_partition()
    assert p.make_follower(leader_id=2, leader_epoch=1, isr=(1, 2), replicas=(1, 2), zk_version=1)
    assert not p.make_follower(leader_id=2, leader_epoch=1, isr=(2,), replicas=(1, 2), zk_version=2)
    assert p.isr == (2,)


def test_stopped_partition_refuses_new_roles() -> None:
    p = leader()
    p.stop()
    assert p.role is PartitionRole.STOPPED
    with pytest.raises(IllegalStateTransition):
        p.make_leader(
            leader_epoch=9,
            isr=(1,),
            replicas=(1,),
            zk_version=1,
            log_end_offset=0,
            high_watermark=0,
            now_ms=0,
        )


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (-1, ErrorCode.NONE),
        (5, ErrorCode.NONE),
        (4, ErrorCode.FENCED_LEADER_EPOCH),
        (6, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_fetch_epoch_fencing(current: int, expected: ErrorCode) -> None:
    assert leader(epoch=5).check_fetch_epoch(current) is expected
