"""What the /controller znode means for this broker, for an election attempt (Startup,
Reelect, a new session) and for a ControllerChange watch, in every controller state."""

from __future__ import annotations

import pytest
from headwater.coordination.controller_state import (
    ControllerState,
    ElectionStep,
    after_controller_read,
)

ME = 1
OTHER = 2
ACTIVE, INACTIVE = ControllerState.ACTIVE, ControllerState.INACTIVE


@pytest.mark.parametrize(
    ("state", "current", "step"),
    [
        (INACTIVE, None, ElectionStep(campaign=True)),
        (INACTIVE, ME, ElectionStep()),
        (INACTIVE, OTHER, ElectionStep()),
        (ACTIVE, None, ElectionStep(campaign=True)),
        (ACTIVE, ME, ElectionStep()),
        (ACTIVE, OTHER, ElectionStep(resign=True)),
    ],
)
def test_election_attempt(state: ControllerState, current: int | None, step: ElectionStep) -> None:
    assert after_controller_read(state, ME, current, on_change=False) == step


@pytest.mark.parametrize(
    ("state", "current", "step"),
    [
        (INACTIVE, None, ElectionStep(campaign=True)),
        (INACTIVE, ME, ElectionStep()),
        (INACTIVE, OTHER, ElectionStep()),
        (ACTIVE, None, ElectionStep(resign=True, campaign=True)),
        (ACTIVE, ME, ElectionStep()),
        (ACTIVE, OTHER, ElectionStep(resign=True)),
    ],
)
def test_controller_change(state: ControllerState, current: int | None, step: ElectionStep) -> None:
    assert after_controller_read(state, ME, current, on_change=True) == step


def test_a_stopped_controller_never_resigns_again() -> None:
    step = after_controller_read(ControllerState.STOPPED, ME, OTHER, on_change=True)
    assert not step.resign
