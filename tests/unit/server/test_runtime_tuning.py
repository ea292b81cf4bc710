"""The broker process's interpreter tuning: the objects alive when the broker becomes
ready are frozen out of the garbage collector's scans."""

from __future__ import annotations

import gc

from headwater.server import broker


def test_startup_objects_are_frozen_out_of_collections() -> None:
    survivor = [object() for _ in range(1000)]
    before = gc.get_freeze_count()
    try:
        broker._freeze_startup_objects()
        assert gc.get_freeze_count() >= before + len(survivor)
    finally:
        gc.unfreeze()
