"""Shared test fixtures: leak checks for child processes and asyncio tasks.

Every test runs under :func:`no_leaked_processes`, which fails a test that
leaves a child process of the test runner behind (a broker or ZooKeeper the
test forgot to stop).  Session-scoped clusters are started before and stopped
after, so they are not counted against a single test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def _children() -> set[int]:
    me = str(os.getpid())
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state, fields[1] the parent pid; zombies are reaped later.
        if fields[1] == me and fields[0] != "Z":
            found.add(int(entry))
    return found


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    before = _children()
    yield
    leaked = _children() - before
    if leaked:
        pytest.fail(f"test left child processes running: {sorted(leaked)}")
