"""Helpers for groups whose consumers are all polled from the test's own thread."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import headwater

from tests.e2e.groups.conftest import CONSUMER_SETTINGS

Key = tuple[int, int]
"""(partition, offset) of a consumed record."""


class OneThreadGroup:
    """``n`` consumers of one group, polled in turn from the caller's thread."""

    def __init__(self, bootstrap: str, group: str, topic: str, n: int, **settings: Any) -> None:
        self.consumers = [
            headwater.Consumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                **{**CONSUMER_SETTINGS, **settings},
            )
            for _ in range(n)
        ]
        self.seen: list[list[Key]] = [[] for _ in range(n)]
        self.slowest_poll_s = 0.0

    def round(self, timeout_ms: int = 200) -> None:
        """Poll every consumer once, recording what each returned and the slowest poll."""
        for i, c in enumerate(self.consumers):
            start = time.monotonic()
            recs = c.poll(timeout_ms)
            self.slowest_poll_s = max(self.slowest_poll_s, time.monotonic() - start)
            self.seen[i] += [(r.partition, r.offset) for r in recs]

    def assignments(self) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]

    def settled(self, partitions: int) -> bool:
        """Every partition owned by exactly one consumer, and every consumer owns some."""
        owned = [p for a in self.assignments() for p in a]
        return sorted(owned) == list(range(partitions)) and all(self.assignments())

    def poll_until(self, done: Callable[[], bool], *, rounds: int, what: str) -> None:
        """Poll rounds until ``done()``, failing naming ``what`` after ``rounds``."""
        for _ in range(rounds):
            self.round()
            if done():
                return
        raise AssertionError(f"not {what} after {rounds} rounds: {self.assignments()}")

    def consumed(self) -> list[Key]:
        return [k for seen in self.seen for k in seen]

    def close(self) -> None:
        for c in self.consumers:
            c.close()
