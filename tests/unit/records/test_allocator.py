"""headwater.records.allocator: the glibc mallopt settings apply (or are skipped cleanly)."""

from __future__ import annotations

import platform

from headwater.records.allocator import tune_allocator


def test_tune_allocator_applies_on_glibc() -> None:
    applied = tune_allocator()
    assert applied is (platform.libc_ver()[0] == "glibc")
