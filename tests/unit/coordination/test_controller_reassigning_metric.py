"""The controller's count of partitions being reassigned (Kafka's ReassigningPartitions gauge,
``headwater_controller_reassigning_partitions``): set after each event on the event thread,
up while moves are in progress, down when they are cancelled, 0 on a broker that is not
(or no longer) the controller; and the gauge the broker's scrape shows."""

from __future__ import annotations

from concurrent.futures import Future

from headwater import errors
from headwater.coordination import events as ev
from headwater.coordination.controller import Controller
from headwater.server.metrics import BrokerMetrics
from headwater.values import TopicPartition
from prometheus_client import generate_latest

from .controller_harness import controller
from .fakes import FakeZk
from .helpers import ORDERS, reg

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def cluster() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {b: reg(b) for b in (1, 2, 3, 4)}
    zk.topics = {t: dict(p) for t, p in ORDERS.items()}
    return zk


def alter(
    c: Controller, moves: dict[TopicPartition, tuple[int, ...] | None]
) -> dict[TopicPartition, errors.HeadwaterError | None]:
    result: Future[dict[TopicPartition, errors.HeadwaterError | None]] = Future()
    c.handle(ev.AlterPartitionReassignments(tuple(moves.items()), result))
    return result.result(timeout=0)


def test_the_count_follows_moves_started_and_cancelled() -> None:
    c = controller(cluster())
    assert c.reassigning_partitions == 0
    c.handle(ev.Startup())
    try:
        assert c.is_active and c.reassigning_partitions == 0
        # Broker 4 is not in the ISR yet, so neither move can complete.
        assert alter(c, {T0: (4, 2, 3), T1: (4, 3, 1)}) == {T0: None, T1: None}
        assert c.reassigning_partitions == 2
        assert alter(c, {T0: None}) == {T0: None}
        assert c.reassigning_partitions == 1
        refused = alter(c, {T0: None})[T0]  # nothing to cancel: the count is unchanged
        assert isinstance(refused, errors.NoReassignmentInProgressError)
        assert c.reassigning_partitions == 1
    finally:
        c.handle(ev.Shutdown())
    assert c.reassigning_partitions == 0


def test_a_controller_that_resigns_reports_zero() -> None:
    c = controller(cluster())
    c.handle(ev.Startup())
    alter(c, {T0: (4, 2, 3)})
    assert c.reassigning_partitions == 1
    c.handle(ev.Expire())
    assert not c.is_active and c.reassigning_partitions == 0


def test_a_broker_that_is_not_the_controller_reports_zero() -> None:
    zk = cluster()
    zk.controller = 2
    c = controller(zk)
    c.handle(ev.Startup())
    assert not c.is_active and c.reassigning_partitions == 0


def test_the_gauge_in_the_scrape() -> None:
    count = [3]
    metrics = BrokerMetrics()
    metrics.register_state(
        partitions=lambda: [], is_controller=lambda: True, reassigning_partitions=lambda: count[0]
    )
    assert "headwater_controller_reassigning_partitions 3.0" in (
        generate_latest(metrics.registry).decode()
    )
    count[0] = 0
    assert "headwater_controller_reassigning_partitions 0.0" in (
        generate_latest(metrics.registry).decode()
    )
