"""The broker process's lifecycle helpers: bounded shutdown steps, the exit watchdog,
the test hooks' stack dump and session expiry, and the post-startup ``gc.freeze``.

The composition root (:mod:`headwater.server.app`) calls these; they hold no
broker state.  Every shutdown step is bounded (:func:`bounded`) and the exit
watchdog halts a process whose shutdown still runs after a deadline, so a
broker told to stop always exits in bounded time.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable
from typing import Any

from headwater import errors
from headwater.coordination import session
from headwater.coordination.broker import BrokerCoordinator
from headwater.server.runtime.offload import run_blocking

log = logging.getLogger(__name__)

SLOW_SHUTDOWN_STEP_S = 0.5
"""A shutdown step taking at least this long is logged with its duration."""


async def bounded(what: str, step: Awaitable[Any], timeout_s: float) -> None:
    """Run one shutdown step; log (and go on) if it fails or outlasts ``timeout_s``."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(step, timeout_s)
        took = time.monotonic() - started
        if took >= SLOW_SHUTDOWN_STEP_S:
            log.info("shutdown: %s took %.1f s", what, took)
    except TimeoutError:
        log.warning("shutdown: %s did not finish within %.0f s; going on", what, timeout_s)
        if log.isEnabledFor(logging.DEBUG):
            dump_stacks()
    except Exception:
        log.exception("shutdown: %s failed; going on", what)


def start_exit_watchdog(broker_id: int, timeout_s: float) -> None:
    """Halt the process if the shutdown has not completed ``timeout_s`` from now.

    Every step is bounded, but the interpreter's exit also joins threads
    (asyncio's executor) that may be blocked in a ZooKeeper or disk call; a
    broker that said it was stopping must exit, so this daemon thread ends it.
    """

    def watch() -> None:
        time.sleep(timeout_s)
        log.error("broker %d: shutdown still running after %.0f s; halting", broker_id, timeout_s)
        faulthandler.dump_traceback(all_threads=True)
        logging.shutdown()
        os._exit(1)

    threading.Thread(target=watch, name="exit-watchdog", daemon=True).start()


def dump_stacks() -> None:
    """SIGUSR2 with test hooks: every thread's and every asyncio task's stack, to stderr."""
    faulthandler.dump_traceback(all_threads=True)
    for task in asyncio.all_tasks():
        try:
            task.print_stack(file=sys.stderr)
        except Exception as exc:  # gRPC's Cython frames have no line numbers
            print(f"{task!r}: {exc!r}", file=sys.stderr)
    sys.stderr.flush()


async def expire_session(coordinator: BrokerCoordinator) -> None:
    """SIGUSR1 with test hooks: expire our own ZooKeeper session (headwater.testing).

    The expiry blocks (kazoo), so it is off-loaded; a failure is only logged.
    """

    def expire() -> None:
        session.expire_session(coordinator.store.client)

    try:
        await run_blocking(expire)
        log.info("ZooKeeper session expired on request and re-established")
    except Exception as exc:
        log.warning("session expiry hook failed: %s", errors.describe(exc))


def freeze_startup_objects() -> None:
    """Collect once, then move everything alive to the garbage collector's permanent
    generation (``gc.freeze``), as long-running CPython servers do.

    Startup leaves tens of thousands of long-lived objects (modules, grpc, kazoo,
    protobuf descriptors, metadata).  Left in the collected generations, the first
    full collection after startup scans them all on the event loop, stalling every
    request in flight for tens of milliseconds (docs/performance.md, "Figures behind
    rules in the code"), and each later collection pays for them again.  Frozen,
    they are never scanned; garbage made later is collected as before.
    """
    gc.collect()
    gc.freeze()
