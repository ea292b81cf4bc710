"""The controlled-shutdown retry loop: done when no partition remains; a failed, timed-out
or incomplete attempt is retried after the fixed backoff, at most max_retries times."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from headwater import errors
from headwater.server.runtime.controlled_shutdown import controlled_shutdown


def run(
    outcomes: list[int | BaseException | None], *, max_retries: int = 3
) -> tuple[bool, int, list[float]]:
    """Attempts answer ``outcomes`` in order (None: hangs past the attempt timeout)."""
    attempts = 0
    sleeps: list[float] = []

    async def attempt() -> int:
        nonlocal attempts
        outcome = outcomes[attempts]
        attempts += 1
        if outcome is None:
            await asyncio.sleep(10)
        if isinstance(outcome, BaseException):
            raise outcome
        assert isinstance(outcome, int)
        return outcome

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    def go(sleep_fn: Callable[[float], Awaitable[None]]) -> bool:
        return asyncio.run(
            controlled_shutdown(
                attempt,
                max_retries=max_retries,
                attempt_timeout_s=0.05,
                backoff_ms=500,
                sleep=sleep_fn,
            )
        )

    return go(sleep), attempts, sleeps


def test_done_at_the_first_attempt_that_leaves_no_partition() -> None:
    assert run([0]) == (True, 1, [])
    assert run([2, 0]) == (True, 2, [0.5])


def test_errors_and_timeouts_are_retried() -> None:
    done, attempts, sleeps = run([errors.NotControllerError("no controller"), None, 0])
    assert (done, attempts, sleeps) == (True, 3, [0.5, 0.5])


def test_gives_up_after_max_retries() -> None:
    assert run([1, 1, 1, 0], max_retries=3) == (False, 3, [0.5, 0.5, 0.5])
