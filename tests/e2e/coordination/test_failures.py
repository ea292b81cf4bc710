"""Broker failures against a real ZooKeeper: death re-elects from the ISR with a bumped leader
epoch, ISR writes conflict on the znode version, controlled shutdown moves leadership, a real
session expiry re-registers the broker with a new epoch, preferred leaders come back."""

from __future__ import annotations

import dataclasses

import pytest
from headwater import errors
from headwater.coordination.admin import NewTopic
from headwater.coordination.session import expire_session
from headwater.errors import ErrorCode

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.e2e


def _topic(cluster: Cluster, name: str, assignment: dict[int, list[int]]) -> None:
    b = cluster.controller()
    b.create_topic(NewTopic(name, assignments=assignment))
    assert b.wait_for_leaders([name], timeout_s=15)


def test_broker_death_elects_from_isr_and_bumps_epoch(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b)
    ctrl = cluster.controller()
    _topic(cluster, "t", {0: [2, 3, 1], 1: [3, 1, 2]})
    victim = 3 if ctrl.broker_id != 3 else 2
    survivor = next(b for b in (1, 2, 3) if b not in (victim, ctrl.broker_id))
    cluster.stop(victim)
    led_by_victim = 0 if victim == 2 else 1

    def moved() -> bool:
        s = ctrl.get_partition_state("t", led_by_victim)
        return s is not None and s.leader not in (victim, -1)

    wait_until(moved, what="leader re-election")
    for p in (0, 1):
        s = ctrl.get_partition_state("t", p)
        assert s is not None
        assert victim not in s.isr
        assert s.leader_epoch == 1
    new_leader = ctrl.get_partition_state("t", led_by_victim)
    assert new_leader is not None and new_leader.leader in (ctrl.broker_id, survivor)
    wait_until(
        lambda: any(
            s.broker_id == survivor
            and any(
                st.key == ("t", led_by_victim) and st.leader_and_isr.leader_epoch == 1
                for st in s.states
            )
            for s in cluster.channel.of("LeaderAndIsr")
        ),
        what="LeaderAndIsr with the new leader epoch",
    )


def test_isr_update_is_conditional(cluster: Cluster) -> None:
    for b in (1, 2):
        cluster.start(b)
    _topic(cluster, "isr", {0: [1, 2]})
    b1 = cluster.brokers[1]
    state = b1.get_partition_state("isr", 0)
    assert state is not None
    shrunk = state.with_isr([1])
    new_version = b1.update_isr("isr", 0, shrunk, state.zk_version)
    assert new_version == state.zk_version + 1
    # A second write based on the old version loses.
    assert b1.update_isr("isr", 0, state.with_isr([1, 2]), state.zk_version) is None
    current = b1.get_partition_state("isr", 0)
    assert current is not None and current.isr == (1,)
    # The controller consumes the ISR change notification and tells the brokers.
    wait_until(lambda: b1.store.get_isr_change_notifications() == [], what="notification")
    wait_until(
        lambda: any(
            any(st.key == ("isr", 0) and st.leader_and_isr.isr == (1,) for st in s.states)
            for s in cluster.channel.of("UpdateMetadata")
        ),
        what="UpdateMetadata after ISR change",
    )


def test_controlled_shutdown_moves_leadership(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b)
    ctrl = cluster.controller()
    leaving = next(b for b in (1, 2, 3) if b != ctrl.broker_id)
    other = next(b for b in (1, 2, 3) if b not in (leaving, ctrl.broker_id))
    _topic(cluster, "cs", {0: [leaving, other], 1: [other, leaving]})
    _topic(cluster, "single", {0: [leaving]})
    with pytest.raises(errors.HeadwaterError):
        ctrl.controller.controlled_shutdown(leaving, cluster.brokers[leaving].broker_epoch + 1)
    remaining = ctrl.controller.controlled_shutdown(leaving, cluster.brokers[leaving].broker_epoch)
    assert remaining == []  # single-0 has one replica, so it cannot move and is not counted
    s0 = ctrl.get_partition_state("cs", 0)
    s1 = ctrl.get_partition_state("cs", 1)
    assert s0 is not None and s0.leader == other and leaving not in s0.isr
    assert s1 is not None and s1.leader == other and s1.isr == (other,)
    non_ctrl = cluster.brokers[other]
    if not non_ctrl.is_controller:
        with pytest.raises(errors.NotControllerError):
            non_ctrl.controller.controlled_shutdown(leaving, -1, timeout_s=5)


def test_session_expiry_reregisters_with_new_epoch(cluster: Cluster) -> None:
    b1 = cluster.start(1)
    b2 = cluster.start(2)
    cluster.controller()
    epochs: list[int] = []
    b2._on_broker_epoch = epochs.append
    old_epoch = b2.broker_epoch
    expire_session(b2.store.client)
    wait_until(lambda: b2.broker_epoch != old_epoch, what="re-registration")
    reg = b1.store.get_broker(2)
    assert reg is not None and reg.epoch == b2.broker_epoch == epochs[-1]
    assert sum(b.is_controller for b in (b1, b2)) <= 1
    # Expiring the controller's session moves (or re-wins) the controllership with a new epoch.
    ctrl = cluster.controller()
    epoch = ctrl.controller.controller_epoch
    expire_session(ctrl.store.client)
    wait_until(
        lambda: any(b.is_controller and b.controller.controller_epoch > epoch for b in (b1, b2)),
        what="a new controller epoch",
    )


def test_preferred_leader_election(cluster: Cluster) -> None:
    for b in (1, 2):
        cluster.start(b)
    ctrl = cluster.controller()
    _topic(cluster, "pref", {0: [1, 2]})
    state = ctrl.get_partition_state("pref", 0)
    assert state is not None
    # Make 2 the leader, as after a failover.
    moved = dataclasses.replace(state.new_leader(2, [2, 1]))
    assert ctrl.update_isr("pref", 0, moved, state.zk_version) is not None
    for b in (1, 2):
        result = cluster.brokers[b].elect_preferred_leaders([("pref", 0)], timeout_s=15)
        assert result[("pref", 0)] in (ErrorCode.NONE, ErrorCode.ELECTION_NOT_NEEDED)
        after = ctrl.get_partition_state("pref", 0)
        assert after is not None and after.leader == 1
    unknown = ctrl.elect_preferred_leaders([("nope", 0)], timeout_s=15)
    assert unknown[("nope", 0)] in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,)
