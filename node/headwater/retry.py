"""One retry/backoff policy for the whole package (kazoo's ``KazooRetry``).

The client's producer sender, metadata refreshes, offset look-ups, group calls
and admin client, and the roll engine's waits all back off the same way:
retriable Kafka errors (``HeadwaterError.retriable``) and lost connections are
retried with exponential backoff (``retry_backoff_ms`` doubling up to
``retry_backoff_max_ms``, Kafka's KIP-580, with +/- ``jitter``) as long as
attempts remain and the deadline has not passed.  Anything else fails at once.
Callers that schedule retries themselves (the sender, the fetcher) ask
:meth:`RetryPolicy.backoff_ms` for the wait; blocking callers use
:meth:`RetryPolicy.call`.

It lives at the package root, beside :mod:`headwater.errors` and
:mod:`headwater.clock`, because the client may not import the broker's layers
and the broker's layers should not import the client: it imports nothing else
from Headwater.

Time is passed in: ``clock`` returns monotonic milliseconds and ``sleep``
takes seconds, so unit tests drive a fake clock and never sleep.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from typing import TypeVar

from headwater import errors
from headwater.clock import Clock, monotonic_ms

__all__ = ["RetryPolicy", "is_retriable"]

T = TypeVar("T")


def is_retriable(error: BaseException) -> bool:
    """Whether a client may retry after ``error`` (Kafka's ``RetriableException``)."""
    return isinstance(error, errors.HeadwaterError) and error.retriable


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry; immutable and shared freely between threads."""

    retries: int = 2**31 - 1
    """Retries after the first attempt (Kafka's ``retries``; 0 = never retry)."""
    retry_backoff_ms: int = 100
    """Wait before the first retry (Kafka's ``retry.backoff.ms``)."""
    retry_backoff_max_ms: int = 1000
    """Upper bound of the exponentially growing wait (``retry.backoff.max.ms``)."""
    jitter: float = 0.2
    """Each wait is scaled by a random factor in ``[1 - jitter, 1 + jitter]``."""

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError("retries must be >= 0")
        if self.retry_backoff_ms < 0 or self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ValueError("need 0 <= retry_backoff_ms <= retry_backoff_max_ms")
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError("jitter must be in [0, 1)")

    def backoff_ms(self, attempt: int, *, rand: Callable[[], float] = random.random) -> float:
        """The wait before retry number ``attempt`` (1 = the first retry)."""
        base = min(
            float(self.retry_backoff_max_ms),
            self.retry_backoff_ms * (2.0 ** min(max(0, attempt - 1), 62)),
        )
        if self.jitter:
            base *= 1.0 - self.jitter + 2.0 * self.jitter * rand()
        return base

    def should_retry(
        self, error: BaseException, *, attempt: int, now_ms: float, deadline_ms: float
    ) -> bool:
        """Whether to retry after ``attempt`` attempts failed, the last with ``error``."""
        return (
            is_retriable(error)
            and attempt <= self.retries
            and now_ms + self.backoff_ms(attempt, rand=_no_jitter) < deadline_ms
        )

    def call(
        self,
        fn: Callable[[], T],
        *,
        timeout_ms: float,
        clock: Clock = monotonic_ms,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[BaseException], None] | None = None,
        rand: Callable[[], float] = random.random,
    ) -> T:
        """Call ``fn`` until it succeeds, retrying retriable errors within ``timeout_ms``.

        ``on_retry`` runs after each retriable failure, before the wait (a
        metadata refresh, typically).  The last error is raised when the
        attempts or the time run out.
        """
        deadline_ms = clock() + timeout_ms
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except errors.HeadwaterError as exc:
                if not self.should_retry(
                    exc, attempt=attempt, now_ms=clock(), deadline_ms=deadline_ms
                ):
                    raise
                if on_retry is not None:
                    on_retry(exc)
                wait_ms = min(self.backoff_ms(attempt, rand=rand), deadline_ms - clock())
                sleep(max(0.0, wait_ms) / 1000.0)


def _no_jitter() -> float:
    return 0.5
