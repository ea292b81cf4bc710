"""Process tuning: the objects alive when the broker becomes ready are frozen out of
the garbage collector's scans; the GIL switch interval is lowered from CPython's
default only, never over a value the application chose, and not with the opt-out."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest
from headwater import runtime
from headwater.server import broker


def test_startup_objects_are_frozen_out_of_collections() -> None:
    survivor = [object() for _ in range(1000)]
    before = gc.get_freeze_count()
    try:
        broker._freeze_startup_objects()
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


def test_switch_interval_lowered_from_the_default(
    interval: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(runtime.KEEP_ENV, raising=False)
    sys.setswitchinterval(0.005)
    assert runtime.tune_switch_interval() is True
    assert sys.getswitchinterval() == pytest.approx(runtime.GIL_SWITCH_INTERVAL_S)


def test_switch_interval_the_application_chose_is_kept(
    interval: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(runtime.KEEP_ENV, raising=False)
    sys.setswitchinterval(0.002)
    assert runtime.tune_switch_interval() is False
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_switch_interval_opt_out(interval: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(runtime.KEEP_ENV, "1")
    sys.setswitchinterval(0.005)
    assert runtime.tune_switch_interval() is False
    assert sys.getswitchinterval() == pytest.approx(0.005)
