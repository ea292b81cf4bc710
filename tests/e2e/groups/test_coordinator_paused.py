"""The coordinator broker paused (SIGSTOP: connections open, no answers) under a settled
group polled from one thread: ``poll(200)`` keeps returning within a wide bound,
``commit`` returns or gives up within its own timeout, and once the broker is
back (or replaced as coordinator) the group settles and consumes what was produced.
(Its own module, so its own cluster: the test pauses a broker.)"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any

import headwater
import pytest
from headwater import errors

from tests.e2e.groups.conftest import produce
from tests.e2e.groups.one_thread import OneThreadGroup

pytestmark = pytest.mark.e2e

BOUND_S = 3.0
"""A wide margin over each call's own timeout (the issue's explicit ask)."""


def test_poll_commit_position_stay_bounded_while_the_coordinator_is_paused(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str]
) -> None:
    name, group = topic(6), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 60, partitions=6)
    g = OneThreadGroup(cluster.bootstrap, group, name, 2, auto_commit_interval_ms=200)
    try:
        g.poll_until(lambda: len(g.consumed()) >= 60, rounds=300, what="all 60 consumed")
        coordinator = admin.describe_groups([group])[group].coordinator
        victim = next(b for b, p in cluster.brokers.items() if p.address == coordinator)
        cluster.pause(victim)
        try:
            g.slowest_poll_s = 0.0
            for _ in range(10):
                g.round()
            assert g.slowest_poll_s < BOUND_S, f"a poll(200) took {g.slowest_poll_s:.1f}s"
            # Refused or, if the coordinator has moved already, done: in time either way.
            start = time.monotonic()
            with contextlib.suppress(errors.HeadwaterError):
                g.consumers[0].commit({headwater.TopicPartition(name, 0): 10}, timeout_ms=1000)
            assert time.monotonic() - start < 1 + BOUND_S
        finally:
            cluster.resume(victim)
        produce(cluster.bootstrap, name, 60, partitions=6)
        everything = [(p, o) for p in range(6) for o in range(20)]
        g.poll_until(
            lambda: sorted(set(g.consumed())) == everything and g.settled(6),
            rounds=600,
            what="all 120 consumed by a settled group",
        )
    finally:
        g.close()


def test_position_gives_up_within_its_timeout_without_a_coordinator(
    cluster: Any, topic: Callable[..., str]
) -> None:
    name = topic(1)
    # A consumer whose bootstrap answers nothing: no coordinator can be found.
    with headwater.Consumer(
        bootstrap_servers="127.0.0.1:9", group_id=f"grp-{uuid.uuid4().hex[:8]}"
    ) as c:
        c.subscribe([name])
        start = time.monotonic()
        assert c.poll(200) == []
        assert time.monotonic() - start < BOUND_S
        c.unsubscribe()
        tp = headwater.TopicPartition(name, 0)
        c.assign([tp])
        start = time.monotonic()
        with pytest.raises(errors.HeadwaterError):
            c.position(tp, timeout_ms=500)
        assert time.monotonic() - start < 0.5 + BOUND_S
