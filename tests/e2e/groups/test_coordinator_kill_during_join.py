"""The coordinator broker SIGKILLed while consumers of one thread are joining: the
JoinGroup in flight fails, the consumers find the new coordinator and the group settles
and consumes everything.  (Its own module, so its own cluster: the test kills a broker.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import headwater
import pytest

from tests.e2e.groups.conftest import produce
from tests.e2e.groups.one_thread import OneThreadGroup

pytestmark = pytest.mark.e2e


def test_group_settles_after_coordinator_kill_during_join(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str]
) -> None:
    name, group = topic(6), f"grp-{uuid.uuid4().hex[:8]}"
    old = admin.describe_groups([group])[group].coordinator
    g = OneThreadGroup(cluster.bootstrap, group, name, 3)
    try:
        g.round()  # every consumer has sent its JoinGroup to ``old``
        victim = next(b for b, p in cluster.brokers.items() if p.address == old)
        cluster.kill(victim)
        g.poll_until(lambda: g.settled(6), rounds=600, what="settled on a new coordinator")
        assert admin.describe_groups([group])[group].coordinator != old
        produce(cluster.bootstrap, name, 60, partitions=6)
        g.poll_until(lambda: len(g.consumed()) >= 60, rounds=300, what="all 60 consumed")
        assert sorted(g.consumed()) == [(p, o) for p in range(6) for o in range(10)]
    finally:
        g.close()
