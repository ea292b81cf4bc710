"""The group lag metric's remote end offsets, asked of real leaders: every partition of a
topic, whichever broker leads it, reports the offset the next record will get."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import headwater
import pytest
from headwater.server.group_lag import RemoteEndOffsets, list_latest
from headwater.values import TopicPartition

from tests.e2e.groups.conftest import produce

pytestmark = pytest.mark.e2e


def test_end_offsets_come_from_each_partitions_leader(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str]
) -> None:
    name = topic(6)
    produce(cluster.bootstrap, name, 60, partitions=6)
    desc = admin.describe_topics([name])[name]
    address = {b: p.address for b, p in cluster.brokers.items()}
    leaders = {TopicPartition(name, p.partition): address[p.leader] for p in desc.partitions}
    assert len(set(leaders.values())) > 1, "the test wants partitions on several leaders"
    remote = RemoteEndOffsets(
        wanted=lambda: list(leaders), leader_address=leaders.get, ask=list_latest(10.0)
    )
    asyncio.run(remote.refresh())
    assert {tp: remote.get(tp) for tp in leaders} == dict.fromkeys(leaders, 10)
