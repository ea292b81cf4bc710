"""The automatic rebalance timer, with time passed in: how long the idle event thread waits,
and when the automatic preferred leader election is due."""

from __future__ import annotations

import pytest
from headwater.coordination.controller_state import ControllerState, idle_wait_s, rebalance_due

ACTIVE, INACTIVE = ControllerState.ACTIVE, ControllerState.INACTIVE


def wait(state: ControllerState, *, auto: bool = True, due: float, now: float) -> float:
    return idle_wait_s(state, auto_rebalance=auto, next_rebalance_s=due, now_s=now, idle_poll_s=1.0)


def test_inactive_waits_the_idle_poll() -> None:
    assert wait(INACTIVE, due=5.0, now=4.9) == 1.0


def test_disabled_rebalance_waits_the_idle_poll() -> None:
    assert wait(ACTIVE, auto=False, due=5.0, now=4.9) == 1.0


def test_active_waits_until_the_rebalance_at_most_the_idle_poll() -> None:
    assert wait(ACTIVE, due=5.0, now=4.75) == pytest.approx(0.25)
    assert wait(ACTIVE, due=50.0, now=4.0) == 1.0


def test_an_overdue_rebalance_does_not_wait() -> None:
    assert wait(ACTIVE, due=5.0, now=6.0) == 0.0


def test_unscheduled_rebalance_waits_the_idle_poll() -> None:
    assert wait(ACTIVE, due=float("inf"), now=1e9) == 1.0


def test_rebalance_due() -> None:
    assert rebalance_due(ACTIVE, next_rebalance_s=5.0, now_s=5.0)
    assert not rebalance_due(ACTIVE, next_rebalance_s=5.0, now_s=4.999)
    assert not rebalance_due(INACTIVE, next_rebalance_s=5.0, now_s=6.0)
    assert not rebalance_due(ACTIVE, next_rebalance_s=float("inf"), now_s=1e12)
