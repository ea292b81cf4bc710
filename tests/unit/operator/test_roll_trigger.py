"""What starts a roll in the operator: trigger keys and the one-roll-at-a-time runner.

The runner starts a roll in a thread, never two at once, and does not retry a
roll that was refused or aborted for the same trigger until its cooldown has
passed (a new trigger — a new revision, a new annotation — retries at once).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from headwater.roll.engine import RollResult, RollState
from headwater_operator.handlers import RollRunner, trigger_key


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def runner_with(states: list[RollState], clock: Clock) -> tuple[RollRunner, list[str]]:
    calls: list[str] = []

    def start(sts: Mapping[str, Any]) -> RollResult:
        calls.append(str(sts["name"]))
        return RollResult(states.pop(0), (), "")

    return RollRunner(start, cooldown_s=300, clock=clock), calls


def test_failed_roll_is_not_retried_for_the_same_trigger_until_the_cooldown() -> None:
    clock = Clock()
    runner, calls = runner_with([RollState.ABORTED, RollState.FINISHED, RollState.FINISHED], clock)
    assert runner.poke("rev-2|", {"name": "a"})
    runner.join(10)
    assert runner.last is not None and runner.last.state == RollState.ABORTED
    assert not runner.poke("rev-2|", {"name": "b"})  # same trigger, cooling down
    assert runner.poke("rev-3|", {"name": "c"})  # a new revision retries at once
    runner.join(10)
    clock.now = 301
    assert runner.poke("rev-3|", {"name": "d"})  # finished rolls have no cooldown
    runner.join(10)
    assert calls == ["a", "c", "d"]


def test_only_one_roll_runs_at_a_time() -> None:
    gate = threading.Event()
    calls: list[int] = []

    def start(sts: Mapping[str, Any]) -> RollResult:
        calls.append(1)
        gate.wait(10)
        return RollResult(RollState.FINISHED, (), "")

    runner = RollRunner(start, cooldown_s=0)
    assert runner.poke("x", {})
    assert not runner.poke("y", {})
    gate.set()
    runner.join(10)
    assert calls == [1]


def test_trigger_key_follows_revision_and_manual_annotation() -> None:
    sts = {"metadata": {"annotations": {}}, "status": {"updateRevision": "r1"}}
    manual = {
        "metadata": {"annotations": {"headwater.io/manual-rolling-update": "true"}},
        "status": {"updateRevision": "r1"},
    }
    assert trigger_key(sts) != trigger_key(manual)
    assert trigger_key(sts) == "r1|"
