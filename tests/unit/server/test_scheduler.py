"""The periodic scheduler (jobs get the injected clock, survive their own failures, and
stop at close() after runs in flight finish) and run_blocking, the off-load seam."""

from __future__ import annotations

import asyncio
import threading

import pytest
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.scheduler import PeriodicJob, PeriodicScheduler


async def wait_until(predicate: object, *, timeout_s: float = 5.0) -> None:
    assert callable(predicate)
    for _ in range(int(timeout_s / 0.005)):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


def test_a_job_runs_repeatedly_with_the_clock() -> None:
    async def scenario() -> list[int]:
        seen: list[int] = []

        async def job(now_ms: int) -> None:
            seen.append(now_ms)

        scheduler = PeriodicScheduler(clock_ms=lambda: 42)
        scheduler.start(PeriodicJob("tick", 1, job))
        await wait_until(lambda: len(seen) >= 3)
        await scheduler.close()
        return seen

    assert set(asyncio.run(scenario())) == {42}


def test_a_failing_job_runs_again() -> None:
    async def scenario() -> int:
        calls = 0

        async def job(_now_ms: int) -> None:
            nonlocal calls
            calls += 1
            raise RuntimeError("boom")

        scheduler = PeriodicScheduler()
        scheduler.start(PeriodicJob("fails", 1, job))
        await wait_until(lambda: calls >= 2)
        await scheduler.close()
        return calls

    assert asyncio.run(scenario()) >= 2


def test_close_waits_for_the_run_in_flight_and_nothing_starts_after() -> None:
    async def scenario() -> None:
        started = asyncio.Event()
        release = asyncio.Event()
        finished: list[int] = []
        runs = 0

        async def job(now_ms: int) -> None:
            nonlocal runs
            runs += 1
            started.set()
            await release.wait()
            finished.append(now_ms)

        scheduler = PeriodicScheduler(clock_ms=lambda: 7)
        scheduler.start(PeriodicJob("slow", 1, job))
        await asyncio.wait_for(started.wait(), 5)
        closing = asyncio.ensure_future(scheduler.close())
        await asyncio.sleep(0.02)
        assert not closing.done()  # the run in flight is not abandoned
        release.set()
        await asyncio.wait_for(closing, 5)
        assert finished == [7] and runs == 1
        await asyncio.sleep(0.02)
        assert runs == 1
        with pytest.raises(RuntimeError):
            scheduler.start(PeriodicJob("late", 1, job))

    asyncio.run(scenario())


def test_run_blocking_runs_in_a_daemon_thread_and_returns_its_result() -> None:
    def where(suffix: str, *, prefix: str) -> tuple[str, bool]:
        thread = threading.current_thread()
        return prefix + suffix, thread.daemon and thread is not threading.main_thread()

    assert asyncio.run(run_blocking(where, "b", prefix="a")) == ("ab", True)


def test_run_blocking_raises_the_calls_exception() -> None:
    def fail() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        asyncio.run(run_blocking(fail))
