"""Consumers of one group polled alternately from one thread (issue 15).

``poll(timeout_ms)`` never waits for the rest of a rebalance: an unanswered JoinGroup or
SyncGroup is carried over to the next ``poll``, so every member gets its JoinGroup in and
the group settles.  Covers: several consumers in one thread settle into one stable
assignment and consume every record exactly once between them; ``poll(200)`` stays far
below the session timeout while members join and leave (the only timed assertion, with a
wide margin, as the issue asks); the eager and cooperative assignors both settle.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.groups.conftest import produce
from tests.e2e.groups.one_thread import OneThreadGroup

pytestmark = pytest.mark.e2e

POLL_BOUND_S = 3.0
"""A wide margin over poll(200): the bug took ~6.5 s per poll (the session timeout)."""


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_consumers_in_one_thread_settle_and_consume_each_record_once(
    cluster: Any, topic: Callable[..., str], assignor: str
) -> None:
    name, group = topic(6), f"grp-{uuid.uuid4().hex[:8]}"
    g = OneThreadGroup(cluster.bootstrap, group, name, 3, partition_assignment_strategy=assignor)
    try:
        g.poll_until(lambda: g.settled(6), rounds=300, what="settled")
        before = g.assignments()
        for _ in range(10):
            g.round()
        assert g.assignments() == before, "the assignment changed after settling"
        produce(cluster.bootstrap, name, 120, partitions=6)
        g.poll_until(lambda: len(g.consumed()) >= 120, rounds=300, what="all 120 consumed")
        for _ in range(5):
            g.round()
        consumed = g.consumed()
        assert sorted(consumed) == [(p, o) for p in range(6) for o in range(20)]
        for owned, seen in zip(g.assignments(), g.seen, strict=True):
            assert {p for p, _ in seen} == owned
    finally:
        g.close()


def test_poll_returns_in_time_while_members_join_and_leave(
    cluster: Any, topic: Callable[..., str]
) -> None:
    name, group = topic(6), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 60, partitions=6)
    g = OneThreadGroup(cluster.bootstrap, group, name, 2)
    try:
        g.poll_until(lambda: g.settled(6), rounds=300, what="two members settled")
        late = OneThreadGroup(cluster.bootstrap, group, name, 2)
        g.consumers += late.consumers
        g.seen += late.seen
        g.poll_until(lambda: g.settled(6), rounds=300, what="four members settled")
        leaving = g.consumers.pop()
        g.seen.pop()
        leaving.close()
        g.poll_until(lambda: g.settled(6), rounds=300, what="three members settled")
        assert g.slowest_poll_s < POLL_BOUND_S, f"a poll(200) took {g.slowest_poll_s:.1f}s"
    finally:
        g.close()
