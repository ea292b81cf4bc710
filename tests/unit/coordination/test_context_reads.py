"""ControllerContext reads: replicas, partition listing order, partitions on a broker, the
partition states sent to brokers, live and eligible brokers, the controller epoch."""

from __future__ import annotations

from headwater.coordination.context import ControllerContext
from headwater.coordination.model import ControllerEpochZk, PartitionState

from .helpers import ORDERS, lai, view


def test_controller_epoch_is_minus_one_without_a_term() -> None:
    assert ControllerContext().controller_epoch == -1
    assert view(epoch=ControllerEpochZk(7, 4)).controller_epoch == 7


def test_replicas_of_unknown_partitions_are_empty() -> None:
    ctx = view(topics=ORDERS)
    assert ctx.replicas(("orders", 1)) == (2, 3, 1)
    assert ctx.replicas(("orders", 9)) == ()
    assert ctx.replicas(("nope", 0)) == ()


def test_all_partitions_sorted_by_topic_then_partition() -> None:
    ctx = view(topics={"b": {1: (1,), 0: (1,)}, "a": {2: (1,), 10: (1,)}})
    assert ctx.all_partitions() == [("a", 2), ("a", 10), ("b", 0), ("b", 1)]


def test_partitions_on_broker() -> None:
    ctx = view(topics={"t": {0: (1, 2), 1: (2, 3), 2: (3, 1)}})
    assert ctx.partitions_on_broker(1) == [("t", 0), ("t", 2)]
    assert ctx.partitions_on_broker(4) == []


def test_partition_state_joins_state_and_replicas() -> None:
    ctx = view(topics={"t": {0: (2, 1)}}, states={("t", 0): lai(2, (1, 2), zk_version=5)})
    assert ctx.partition_state(("t", 0)) == PartitionState(
        "t", 0, lai(2, (1, 2), zk_version=5), (2, 1)
    )
    assert ctx.partition_state(("t", 1)) is None


def test_partition_states_skip_partitions_without_state_and_keep_order() -> None:
    ctx = view(topics={"t": {0: (1,), 1: (1,), 2: (1,)}}, states={("t", 2): lai(1, (1,))})
    ctx.states[("t", 0)] = lai(1, (1,))
    keys = [s.key for s in ctx.partition_states([("t", 2), ("t", 1), ("t", 0)])]
    assert keys == [("t", 2), ("t", 0)]


def test_eligible_brokers_exclude_those_shutting_down() -> None:
    ctx = view(brokers=(1, 2, 3), shutting_down=(2,))
    assert ctx.live_ids() == {1, 2, 3}
    assert ctx.eligible_ids() == {1, 3}
