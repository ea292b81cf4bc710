"""The RoleChanges applier (fetchers stopped, then started with the latest live leaders,
then leaderships reported in request order) and the offsets-topic leadership follower."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from headwater.coordination.model import BrokerRegistration
from headwater.groups.placement import OFFSETS_TOPIC
from headwater.server.runtime.groups import OffsetsLeadership
from headwater.server.runtime.hosted import RoleChanges
from headwater.server.runtime.role_changes import RoleChangeApplier
from headwater.values import TopicPartition

TP = TopicPartition("orders", 0)
OFFSETS = TopicPartition(OFFSETS_TOPIC, 3)
BROKER_1 = BrokerRegistration(broker_id=1, host="b1", port=9092)


class FakeFetchers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def add_partitions(
        self,
        changes: Mapping[TopicPartition, tuple[int, int]],
        leaders: Mapping[int, BrokerRegistration],
    ) -> None:
        self.calls.append(("add", (dict(changes), dict(leaders))))

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        self.calls.append(("remove", list(tps)))


def test_fetchers_stop_then_start_with_the_live_leaders_then_leaderships() -> None:
    fetchers = FakeFetchers()
    seen: list[tuple[str, object]] = []
    applier = RoleChangeApplier(
        fetchers=fetchers, on_leadership=lambda tp, epoch: seen.append(("leader", (tp, epoch)))
    )
    applier.update_leaders({1: BROKER_1})
    applier.apply(RoleChanges([OFFSETS], [(OFFSETS, 4), (TP, None)], {TP: (1, 7)}))
    assert fetchers.calls == [
        ("remove", [OFFSETS]),
        ("add", ({TP: (1, 7)}, {1: BROKER_1})),
    ]
    assert seen == [("leader", (OFFSETS, 4)), ("leader", (TP, None))]


def test_empty_changes_touch_no_fetcher() -> None:
    fetchers = FakeFetchers()
    applier = RoleChangeApplier(fetchers=fetchers, on_leadership=lambda tp, epoch: None)
    applier.apply(RoleChanges([], [], {}))
    assert fetchers.calls == []


class FakeGroups:
    def __init__(self) -> None:
        self.events: list[tuple[str, int, int | None]] = []

    async def on_become_leader(self, partition: int, leader_epoch: int) -> None:
        self.events.append(("load", partition, leader_epoch))

    def on_resign(self, partition: int) -> None:
        self.events.append(("unload", partition, None))


def test_offsets_leaderships_load_and_unload_coordinator_partitions() -> None:
    async def scenario() -> list[tuple[str, int, int | None]]:
        groups = FakeGroups()
        leadership = OffsetsLeadership(groups)  # type: ignore[arg-type]
        leadership.on_leadership(OFFSETS, 5)
        leadership.on_leadership(TP, 5)  # not __consumer_offsets: ignored
        await asyncio.sleep(0)  # the load runs as a task
        leadership.on_leadership(OFFSETS, None)
        return groups.events

    assert asyncio.run(scenario()) == [("load", 3, 5), ("unload", 3, None)]
