"""The Controller driven event by event (its thread not started) over in-memory ZooKeeper:
winning and losing the election, resigning on a controller change, a session expiry or a
fenced write, re-registering after a new session, refused RPCs and dropped late watches,
failures answered on the RPC's future, the rebalance timer, and shutdown."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from headwater import errors
from headwater.coordination import events as ev
from headwater.coordination.controller import Controller
from headwater.coordination.controller_state import ControllerState
from kazoo.exceptions import ConnectionLoss

from .controller_harness import ManualClock, controller
from .fakes import FakeZk
from .helpers import ORDERS, reg


def cluster() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {b: reg(b) for b in (1, 2, 3)}
    zk.topics = {t: dict(p) for t, p in ORDERS.items()}
    return zk


def started(zk: FakeZk, **kw: object) -> Controller:
    c = controller(zk, **kw)  # type: ignore[arg-type]
    c.handle(ev.Startup())
    return c


def stop(c: Controller) -> None:
    c.handle(ev.Shutdown())


def test_the_first_broker_wins_and_loads_the_cluster() -> None:
    zk = cluster()
    c = started(zk)
    try:
        assert c.state is ControllerState.ACTIVE and c.is_active
        assert c.controller_epoch == 1 and c.active_controller_id == 1
        assert zk.controller == 1 and ("become", 1, 42) in zk.writes
        assert len(zk.states) == 3  # failover created the missing states
    finally:
        stop(c)


def test_a_broker_that_finds_a_controller_stays_inactive() -> None:
    zk = cluster()
    zk.controller = 2
    c = started(zk)
    assert c.state is ControllerState.INACTIVE and not c.is_active
    assert c.active_controller_id == 2 and c.controller_epoch == -1


def test_controller_change_to_another_broker_resigns_without_deleting() -> None:
    zk = cluster()
    c = started(zk)
    zk.controller = 2
    c.handle(ev.ControllerChange())
    assert c.state is ControllerState.INACTIVE
    assert c.active_controller_id == 2
    assert ("resign", 1) not in zk.writes


def test_controller_gone_an_inactive_broker_campaigns() -> None:
    zk = cluster()
    zk.controller = 2
    c = started(zk)
    zk.controller = None
    c.handle(ev.ControllerChange())
    try:
        assert c.is_active and zk.controller == 1
    finally:
        stop(c)


def test_active_controller_finding_its_znode_gone_wins_a_new_epoch() -> None:
    zk = cluster()
    c = started(zk)
    zk.controller = None
    c.handle(ev.Reelect())
    try:
        assert c.is_active and c.controller_epoch == 2
    finally:
        stop(c)


def test_session_expiry_resigns_and_forgets_the_controller() -> None:
    zk = cluster()
    c = started(zk)
    c.session_expired()
    assert c.run_pending() == 1
    assert c.state is ControllerState.INACTIVE and c.active_controller_id is None
    assert ("resign", 1) not in zk.writes


def test_new_session_registers_again_then_reelects() -> None:
    zk = cluster()
    calls: list[str] = []
    c = controller(zk, on_reconnect=lambda: calls.append("register"))
    c.session_reestablished()
    c.run_pending()
    try:
        assert calls == ["register"] and c.is_active
    finally:
        stop(c)


def test_a_fenced_write_deposes_the_controller_and_reelects() -> None:
    zk = cluster()
    c = started(zk)
    zk.elect_other_controller()
    zk.controller = 2
    del zk.brokers[1]
    future: Future[list[tuple[str, int]]] = Future()
    c.handle(ev.ControlledShutdown(2, 102, future))
    with pytest.raises(errors.NotControllerError):
        future.result(timeout=0)
    assert c.state is ControllerState.INACTIVE
    assert c.run_pending() == 1  # the Reelect it queued
    assert c.active_controller_id == 2 and not c.is_active


def test_rpcs_to_an_inactive_controller_are_refused() -> None:
    c = controller(cluster())
    shutdown: Future[list[tuple[str, int]]] = Future()
    c.handle(ev.ControlledShutdown(2, 102, shutdown))
    election: Future[dict[tuple[str, int], object]] = Future()
    c.handle(ev.PreferredReplicaElection(result=election))  # type: ignore[arg-type]
    for f in (shutdown, election):
        with pytest.raises(errors.NotControllerError):
            f.result(timeout=0)


def test_late_watches_are_dropped_when_inactive() -> None:
    zk = cluster()
    c = controller(zk)
    for event in (ev.BrokerChange(), ev.TopicChange(), ev.IsrChangeNotification()):
        c.handle(event)
    assert zk.watched == [] and zk.writes == []


def test_an_rpc_error_is_answered_on_its_future() -> None:
    c = started(cluster())
    try:
        future: Future[list[tuple[str, int]]] = Future()
        c.handle(ev.ControlledShutdown(9, 109, future))
        with pytest.raises(errors.BrokerNotAvailableError):
            future.result(timeout=0)
        assert c.is_active
    finally:
        stop(c)


def test_controlled_shutdown_answer() -> None:
    c = started(cluster())
    try:
        future: Future[list[tuple[str, int]]] = Future()
        c.handle(ev.ControlledShutdown(1, 101, future))
        assert future.result(timeout=0) == []
    finally:
        stop(c)


class Broken(FakeZk):
    """ZooKeeper whose partition state writes fail with ``error`` once ``broken`` is set."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error
        self.broken = False

    def update_partition_state(self, *args: Any, **kw: Any) -> Any:
        if self.broken:
            raise self.error
        return super().update_partition_state(*args, **kw)


@pytest.mark.parametrize(
    ("error", "answer"),
    [(ConnectionLoss(), errors.NotControllerError), (KeyError("x"), errors.UnknownServerError)],
)
def test_zookeeper_and_unexpected_errors_answer_the_rpc(
    error: Exception, answer: type[Exception]
) -> None:
    zk = Broken(error)
    zk.brokers = {b: reg(b) for b in (1, 2, 3)}
    zk.topics = {t: dict(p) for t, p in ORDERS.items()}
    c = started(zk)
    try:
        zk.broken = True
        future: Future[list[tuple[str, int]]] = Future()
        c.handle(ev.ControlledShutdown(1, 101, future))
        with pytest.raises(answer):
            future.result(timeout=0)
        assert c.is_active  # only a fenced write deposes
    finally:
        stop(c)


def test_auto_rebalance_is_scheduled_from_the_clock() -> None:
    zk = cluster()
    clock = ManualClock(1_000_000.0)
    c = started(zk, clock=clock, leader_imbalance_check_interval_s=30.0)
    try:
        assert c._next_rebalance_ms == pytest.approx(1_030_000.0)
        zk.put_state(("orders", 0), zk.states[("orders", 0)].new_leader(2, (1, 2, 3)))
        clock.now_ms = 1_010_000.0
        c.handle(ev.AutoPreferredReplicaLeaderElection())
        # The cached view did not see the leader's move, so nothing moves...
        assert zk.states[("orders", 0)].leader == 2
        # ...and the next run is 30 s after this one.
        assert c._next_rebalance_ms == pytest.approx(1_040_000.0)
    finally:
        stop(c)


def test_resigning_unschedules_the_rebalance() -> None:
    zk = cluster()
    c = started(zk)
    c.handle(ev.Expire())
    assert c._next_rebalance_ms == float("inf")


def test_shutdown_deletes_the_znode_and_fails_what_is_queued() -> None:
    zk = cluster()
    c = started(zk)
    future: Future[list[tuple[str, int]]] = Future()
    c.enqueue(ev.ControlledShutdown(2, 102, future))
    c.handle(ev.Shutdown())
    assert c.state is ControllerState.STOPPED
    assert ("resign", 1) in zk.writes and zk.controller is None
    with pytest.raises(errors.NotControllerError, match="shutting down"):
        future.result(timeout=0)


def test_shutdown_of_an_inactive_controller() -> None:
    zk = cluster()
    zk.controller = 2
    c = started(zk)
    c.handle(ev.Shutdown())
    assert c.state is ControllerState.STOPPED and zk.controller == 2


def test_a_stopped_controller_ignores_late_events_and_a_second_shutdown() -> None:
    zk = cluster()
    c = started(zk)
    c.handle(ev.Shutdown())
    c.handle(ev.Startup())
    c.handle(ev.ControllerChange())
    c.handle(ev.Shutdown())
    assert c.state is ControllerState.STOPPED and zk.controller is None
    future: Future[list[tuple[str, int]]] = Future()
    c.handle(ev.ControlledShutdown(2, 102, future))
    with pytest.raises(errors.NotControllerError):
        future.result(timeout=0)


def test_run_pending_is_bounded() -> None:
    c = controller(cluster())
    for _ in range(5):
        c.enqueue(ev.TopicChange())
    assert c.run_pending(limit=3) == 3
    assert c.run_pending() == 2
