"""The automatic rebalance timer, with monotonic milliseconds passed in: how long the idle
event thread waits, and when the automatic preferred leader election is due."""

from __future__ import annotations

import pytest
from headwater.coordination.controller_state import ControllerState, idle_wait_ms, rebalance_due

ACTIVE, INACTIVE = ControllerState.ACTIVE, ControllerState.INACTIVE


def wait(state: ControllerState, *, auto: bool = True, due: float, now: float) -> float:
    return idle_wait_ms(
        state, auto_rebalance=auto, next_rebalance_ms=due, now_ms=now, idle_poll_ms=1000.0
    )


def test_inactive_waits_the_idle_poll() -> None:
    assert wait(INACTIVE, due=5000.0, now=4900.0) == 1000.0


def test_disabled_rebalance_waits_the_idle_poll() -> None:
    assert wait(ACTIVE, auto=False, due=5000.0, now=4900.0) == 1000.0


def test_active_waits_until_the_rebalance_at_most_the_idle_poll() -> None:
    assert wait(ACTIVE, due=5000.0, now=4750.0) == pytest.approx(250.0)
    assert wait(ACTIVE, due=50_000.0, now=4000.0) == 1000.0


def test_an_overdue_rebalance_does_not_wait() -> None:
    assert wait(ACTIVE, due=5000.0, now=6000.0) == 0.0


def test_unscheduled_rebalance_waits_the_idle_poll() -> None:
    assert wait(ACTIVE, due=float("inf"), now=1e12) == 1000.0


def test_a_stopped_controller_waits_the_idle_poll() -> None:
    assert wait(ControllerState.STOPPED, due=0.0, now=1.0) == 1000.0


def test_rebalance_due() -> None:
    assert rebalance_due(ACTIVE, next_rebalance_ms=5000.0, now_ms=5000.0)
    assert not rebalance_due(ACTIVE, next_rebalance_ms=5000.0, now_ms=4999.0)
    assert not rebalance_due(INACTIVE, next_rebalance_ms=5000.0, now_ms=6000.0)
    assert not rebalance_due(ACTIVE, next_rebalance_ms=float("inf"), now_ms=1e15)
