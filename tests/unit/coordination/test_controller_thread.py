"""The Controller with its event thread started: the public API enqueues and waits with a
bound, start and stop are idempotent, and stop resigns (deleting /controller)."""

from __future__ import annotations

import time

import pytest
from headwater import errors

from .controller_harness import controller
from .fakes import FakeZk
from .helpers import ORDERS, reg


def cluster() -> FakeZk:
    zk = FakeZk()
    zk.brokers = {b: reg(b) for b in (1, 2, 3)}
    zk.topics = {t: dict(p) for t, p in ORDERS.items()}
    return zk


def wait_active(c: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if c.is_active:  # type: ignore[attr-defined]
            return
        time.sleep(0.01)
    raise AssertionError("controller did not become active")


def test_start_elects_and_stop_resigns() -> None:
    zk = cluster()
    c = controller(zk)
    c.start()
    c.start()  # a second start is a no-op
    try:
        wait_active(c)
        assert zk.controller == 1
        assert c.elect_preferred_leaders([("orders", 0)], timeout_s=5.0) == {
            ("orders", 0): errors.ErrorCode.ELECTION_NOT_NEEDED
        }
        assert c.controlled_shutdown(1, 101, timeout_s=5.0) == []
        # Broker 1 is shutting down now: it may not take its leadership back.
        assert c.elect_preferred_leaders([("orders", 0)], timeout_s=5.0) == {
            ("orders", 0): errors.ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        }
    finally:
        c.stop(timeout_s=5.0)
    assert zk.controller is None and not c.is_active
    c.stop()  # a second stop is a no-op


def test_an_rpc_nobody_answers_times_out() -> None:
    c = controller(cluster())  # never started: nothing takes events off the queue
    with pytest.raises(errors.RequestTimedOutError):
        c.elect_preferred_leaders(None, timeout_s=0.01)
    with pytest.raises(errors.RequestTimedOutError):
        c.controlled_shutdown(1, 101, timeout_s=0.01)


def test_an_inactive_controller_refuses_rpcs_through_the_thread() -> None:
    zk = cluster()
    zk.controller = 2
    c = controller(zk)
    c.start()
    try:
        with pytest.raises(errors.NotControllerError):
            c.controlled_shutdown(1, 101, timeout_s=5.0)
    finally:
        c.stop(timeout_s=5.0)
    assert zk.controller == 2
