"""The package's one clock: monotonic and wall time, in milliseconds.

Code that decides by time takes it as an argument (docs/style.md, "Time is passed in").

Two kinds of time, never mixed:

* :func:`monotonic_ms` measures durations: deadlines, timeouts, backoffs, ISR
  lag, long-poll waits.  It never jumps, and its zero means nothing, so its
  values never leave the process.  A float, so sub-millisecond waits are not
  rounded away.
* :func:`wall_ms` stamps instants that leave the process or outlive it: record
  timestamps, retention and segment rolls, the group coordinator's times
  (commit and expiry times are written to the offsets log), producer-id seeds.
  Integer milliseconds since the epoch, as in Kafka.

Decisions take ``now_ms`` as an argument; the code that runs them takes a clock
(``clock: Clock = monotonic_ms``, ``clock_ms: WallClock = wall_ms``) so that
tests drive a fake one and never sleep.  This module imports nothing from
Headwater, so every layer, the client included, may use it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "WallClock", "monotonic_ms", "wall_ms"]

Clock = Callable[[], float]
"""Returns monotonic time in milliseconds (:func:`monotonic_ms`, or a fake in tests)."""

WallClock = Callable[[], int]
"""Returns wall-clock milliseconds since the epoch (:func:`wall_ms`, or a fake in tests)."""


def monotonic_ms() -> float:
    """:func:`time.monotonic` in milliseconds: for durations and deadlines."""
    return time.monotonic() * 1000.0


def wall_ms() -> int:
    """Milliseconds since the epoch, as an ``int``: for timestamps that leave the process."""
    return time.time_ns() // 1_000_000
