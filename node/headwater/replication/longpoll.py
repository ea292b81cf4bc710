"""The decision behind Fetch's long poll, without the waiting.

A fetch is answered when it has ``min_bytes`` of data, when it hit an error, or
when ``max_wait_ms`` passed since it arrived (Kafka's ``DelayedFetch``).  The
runtime re-evaluates this after every wake-up (an append, a high-watermark
advance, a role change) and otherwise waits on an event: no polling loop.
"""

from __future__ import annotations

from typing import NamedTuple


class FetchWait(NamedTuple):
    """When to answer one long-poll fetch; times are on the caller's monotonic clock."""

    min_bytes: int
    deadline_ms: float

    @classmethod
    def start(cls, *, now_ms: float, max_wait_ms: int, min_bytes: int) -> FetchWait:
        return cls(min_bytes=max(min_bytes, 0), deadline_ms=now_ms + max(max_wait_ms, 0))

    def is_satisfied(self, *, available_bytes: int, has_error: bool, now_ms: float) -> bool:
        """True when the response should be sent now."""
        if has_error or now_ms >= self.deadline_ms:
            return True
        return available_bytes >= max(self.min_bytes, 1)

    def remaining_ms(self, now_ms: float) -> float:
        return max(self.deadline_ms - now_ms, 0.0)
