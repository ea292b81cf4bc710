"""Interpreter settings for a process that runs Headwater's threads.

A producer, a consumer and a broker each keep several threads busy in one
interpreter: the caller's (``send``, ``poll``) or the event loop, plus
background threads (the sender, the fetcher, call workers, grpc's and kazoo's).
CPython hands the GIL from a running thread to a waiting one only every
``sys.getswitchinterval()`` seconds, 5 ms by default, so a background thread
with a 1 MiB request ready can wait 5 ms behind a caller in a tight ``send``
loop, and the broker's event loop behind grpc's threads.  At 0.5 ms a producer
sends more per second at less CPU per record, and a broker answers a paced
produce sooner, at no cost in throughput (the figures are in
docs/performance.md, "Figures behind rules in the code").

Like :func:`headwater.records.allocator.tune_allocator`, this is process-wide,
so it is applied only when the process still runs with CPython's default (an
interval the application chose is kept) and not at all with
``HEADWATER_KEEP_SWITCH_INTERVAL=1``.
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)

GIL_SWITCH_INTERVAL_S = 0.0005
"""The interval Headwater's processes run with (CPython's default is 5 ms)."""

KEEP_ENV = "HEADWATER_KEEP_SWITCH_INTERVAL"
"""Set to 1 (or true/yes) to leave the process's switch interval alone."""

_CPYTHON_DEFAULT_S = 0.005


def tune_switch_interval(interval_s: float = GIL_SWITCH_INTERVAL_S) -> bool:
    """Lower the GIL switch interval to ``interval_s`` if the process runs with
    CPython's default and :data:`KEEP_ENV` is not set; returns whether it did."""
    if os.environ.get(KEEP_ENV, "").strip().lower() in ("1", "true", "yes"):
        return False
    current = sys.getswitchinterval()
    if current == interval_s:
        return False
    if abs(current - _CPYTHON_DEFAULT_S) > 1e-9:
        log.debug("keeping the switch interval this process chose (%s s)", current)
        return False
    sys.setswitchinterval(interval_s)
    return True


__all__ = ["GIL_SWITCH_INTERVAL_S", "KEEP_ENV", "tune_switch_interval"]
