"""The coordinator broker SIGKILLed: the leader of the group's ``__consumer_offsets``
partition moves, the new coordinator loads the partition, every committed offset is
still there and the group keeps consuming and committing.  (Its own module, so its own
cluster: the test kills a broker.)"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import headwater
import pytest

from tests.e2e.groups.conftest import produce, wait_until

pytestmark = pytest.mark.e2e


def test_group_survives_coordinator_kill(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(4), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 40, partitions=4)
    ms = [members(cluster.bootstrap, group, name, auto_commit_interval_ms=200) for _ in range(2)]
    wait_until(
        lambda: sum(len(m.records) for m in ms) >= 40, timeout_s=60, what="40 records consumed"
    )
    tps = [headwater.TopicPartition(name, p) for p in range(4)]
    wait_until(
        lambda: (
            {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
            == dict.fromkeys(tps, 10)
        ),
        timeout_s=30,
        what="offsets 10 committed on every partition",
    )
    old = admin.describe_groups([group])[group].coordinator
    victim = next(b for b, p in cluster.brokers.items() if p.address == old)
    cluster.kill(victim)

    def moved() -> bool:
        d = admin.describe_groups([group])[group]
        return d.coordinator != old and d.state == "Stable"

    wait_until(moved, timeout_s=60, what="a new coordinator serving the group")
    offsets = admin.list_consumer_group_offsets(group)
    assert {tp: o.offset for tp, o in offsets.items()} == dict.fromkeys(tps, 10)

    produce(cluster.bootstrap, name, 40, partitions=4)
    wait_until(
        lambda: (
            {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
            == dict.fromkeys(tps, 20)
        ),
        timeout_s=60,
        what="the group to consume and commit on the new coordinator",
    )
    assert all(m.error is None for m in ms)
