"""The broker's one periodic scheduler: retention and flushes, the log cleaner,
ISR expiry and the group coordinator's timers.

Kafka's ``KafkaScheduler``, on the event loop.  Each job is a name, an
interval and a coroutine function taking ``now_ms`` (wall clock, as the
storage layer's retention expects); a job whose work blocks off-loads it
itself (:func:`headwater.server.runtime.offload.run_blocking`).  A job that raises is
logged and runs again at its next tick; jobs never overlap themselves.

Shutdown: :meth:`PeriodicScheduler.close` stops every job at its next sleep
and waits, bounded, for runs in flight, so that, e.g., a retention pass never
runs while the logs are being closed.

Thread model: event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NamedTuple

from headwater.clock import WallClock, wall_ms

log = logging.getLogger(__name__)


class PeriodicJob(NamedTuple):
    name: str
    interval_ms: float
    run: Callable[[int], Awaitable[None]]
    """Called with the wall-clock time in milliseconds."""


class PeriodicScheduler:
    """Runs :class:`PeriodicJob`s every ``interval_ms`` until :meth:`close`.

    Invariants: at most one run of each job is in flight; after ``close()``
    returns no job starts again.
    """

    def __init__(self, *, clock_ms: WallClock = wall_ms) -> None:
        self._clock_ms = clock_ms
        self._loops: list[asyncio.Task[None]] = []
        self._in_flight: set[asyncio.Future[None]] = set()
        self._closed = False

    def start(self, job: PeriodicJob) -> None:
        if self._closed:
            raise RuntimeError("the scheduler is closed")
        task = asyncio.get_running_loop().create_task(self._loop(job), name=f"periodic-{job.name}")
        self._loops.append(task)

    async def _loop(self, job: PeriodicJob) -> None:
        interval_s = max(job.interval_ms, 1) / 1000.0
        while not self._closed:
            await asyncio.sleep(interval_s)
            if self._closed:
                return
            run = asyncio.ensure_future(self._run_once(job))
            self._in_flight.add(run)
            run.add_done_callback(self._in_flight.discard)
            await asyncio.shield(run)  # cancelling the loop leaves the run to finish

    async def _run_once(self, job: PeriodicJob) -> None:
        try:
            await job.run(self._clock_ms())
        except Exception:  # the next tick retries
            log.exception("periodic job %s failed", job.name)

    async def close(self, timeout_s: float = 10.0) -> None:
        """Stop every job; wait up to ``timeout_s`` for runs in flight."""
        self._closed = True
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        self._loops.clear()
        if self._in_flight:
            _done, pending = await asyncio.wait(set(self._in_flight), timeout=timeout_s)
            if pending:
                log.warning("%d periodic job(s) still running at shutdown", len(pending))
