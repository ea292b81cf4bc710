"""Controller election against a real ZooKeeper: one controller, failover with a higher epoch,
and fencing of a deposed controller's writes."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.coordination.model import LeaderAndIsr
from headwater.coordination.store import ControllerEpochZk

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.e2e


def test_exactly_one_controller_and_failover_bumps_epoch(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b)
    first = cluster.controller()
    wait_until(lambda: sum(b.is_controller for b in cluster.brokers.values()) == 1)
    epoch = first.controller.controller_epoch
    assert first.controller_id() == first.broker_id
    cluster.stop(first.broker_id)
    second = cluster.controller()
    assert second.broker_id != first.broker_id
    assert second.controller.controller_epoch > epoch
    assert second.describe_cluster().controller_id == second.broker_id


def test_deposed_controller_write_is_refused(cluster: Cluster) -> None:
    b = cluster.start(1)
    wait_until(lambda: b.is_controller)
    store = b.store
    stale = store.get_controller_epoch()
    assert stale is not None
    # Another controller takes over: /controller_epoch moves on.
    store.client.set("/controller_epoch", str(stale.epoch + 1).encode())
    state = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,), controller_epoch=stale.epoch)
    store.client.ensure_path("/brokers/topics/t/partitions/0")
    with pytest.raises(errors.StaleControllerEpochError):
        store.create_partition_state(
            "t", 0, state, ControllerEpochZk(stale.epoch, stale.zk_version)
        )
    assert store.get_partition_state("t", 0) is None
