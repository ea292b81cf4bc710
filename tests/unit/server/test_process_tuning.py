"""Process tuning: the objects alive when the broker becomes ready are frozen out of
the garbage collector's scans; the GIL switch interval is lowered from CPython's
default only, never over a value the application chose, and not with the opt-out."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest
from headwater import interpreter
from headwater.server.runtime import process


def test_startup_objects_are_frozen_out_of_collections() -> None:
    survivor = [object() for _ in range(1000)]
    before = gc.get_freeze_count()
    try:
        process.freeze_startup_objects()
        assert gc.get_freeze_count() >= before + len(survivor)
    finally:
        gc.unfreeze()


@pytest.fixture
def interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.parametrize(
    ("keep_env", "start_s", "changed", "after_s"),
    [
        (None, 0.005, True, interpreter.GIL_SWITCH_INTERVAL_S),  # CPython's default: lowered
        (None, 0.002, False, 0.002),  # the application chose one: kept
        ("1", 0.005, False, 0.005),  # opted out
    ],
    ids=["default-lowered", "chosen-kept", "opt-out"],
)
def test_switch_interval(
    interval: None,
    monkeypatch: pytest.MonkeyPatch,
    keep_env: str | None,
    start_s: float,
    changed: bool,
    after_s: float,
) -> None:
    if keep_env is None:
        monkeypatch.delenv(interpreter.KEEP_ENV, raising=False)
    else:
        monkeypatch.setenv(interpreter.KEEP_ENV, keep_env)
    sys.setswitchinterval(start_s)
    assert interpreter.tune_switch_interval() is changed
    assert sys.getswitchinterval() == pytest.approx(after_s)
