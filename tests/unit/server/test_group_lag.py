"""End offsets of partitions the coordinator does not host, for the group lag metric.

Covers :mod:`headwater.server.group_lag`: partitions are asked of their leaders (those
without a known leader are skipped), answers replace the cache, a leader that does not
answer keeps its partitions' last values, partitions no longer wanted are dropped, and
the broker metrics then export a lag sample for a partition with no replica here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import grpc
from headwater.server.group_lag import RemoteEndOffsets, by_leader
from headwater.server.metrics import BrokerMetrics, GroupOffset, RebalanceFigures
from headwater.values import TopicPartition

TP = TopicPartition
LEADERS = {TP("t", 0): "b1:9092", TP("t", 1): "b2:9092", TP("t", 2): "b1:9092"}


class Leaders:
    """Answers ListOffsets as each leader would; a leader in ``down`` fails in transport."""

    def __init__(self, ends: dict[TopicPartition, int]) -> None:
        self.ends = ends
        self.down: set[str] = set()
        self.asked: list[tuple[str, list[TopicPartition]]] = []

    async def ask(self, address: str, tps: list[TopicPartition]) -> Mapping[TopicPartition, int]:
        self.asked.append((address, tps))
        if address in self.down:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata()
            )
        return {tp: self.ends[tp] for tp in tps if tp in self.ends}


def test_by_leader_groups_partitions_and_skips_unknown_leaders() -> None:
    wanted = [TP("t", 2), TP("t", 0), TP("t", 1), TP("t", 9), TP("t", 0)]
    assert by_leader(wanted, LEADERS.get) == {
        "b1:9092": [TP("t", 0), TP("t", 2)],
        "b2:9092": [TP("t", 1)],
    }


def test_refresh_asks_each_leader_and_keeps_last_values_of_a_silent_one() -> None:
    wanted = [TP("t", 0), TP("t", 1), TP("t", 2)]
    leaders = Leaders({TP("t", 0): 10, TP("t", 1): 20, TP("t", 2): 30})
    remote = RemoteEndOffsets(wanted=lambda: wanted, leader_address=LEADERS.get, ask=leaders.ask)
    assert remote.get(TP("t", 0)) is None
    asyncio.run(remote.refresh())
    assert [remote.get(tp) for tp in wanted] == [10, 20, 30]
    assert sorted(a for a, _ in leaders.asked) == ["b1:9092", "b2:9092"]

    leaders.ends = {TP("t", 0): 11, TP("t", 1): 25, TP("t", 2): 31}
    leaders.down = {"b2:9092"}
    asyncio.run(remote.refresh())
    assert [remote.get(tp) for tp in wanted] == [11, 20, 31]

    wanted.remove(TP("t", 2))
    asyncio.run(remote.refresh())
    assert remote.get(TP("t", 2)) is None


def test_lag_is_exported_for_a_partition_with_no_replica_here() -> None:
    leaders = Leaders({TP("u", 1): 19})
    remote = RemoteEndOffsets(
        wanted=lambda: [TP("u", 1)], leader_address=lambda tp: "b2:9092", ask=leaders.ask
    )
    asyncio.run(remote.refresh())
    hosted = {TP("t", 0): 50}
    metrics = BrokerMetrics()
    metrics.register_groups(
        committed=lambda: [GroupOffset("g", "t", 0, 42), GroupOffset("g", "u", 1, 7)],
        end_offset=lambda t, p: hosted.get(TP(t, p), remote.get(TP(t, p))),
        rebalances=lambda: {"g": RebalanceFigures(1, 10, 10)},
    )
    value = metrics.registry.get_sample_value
    assert value("headwater_group_lag", {"group": "g", "topic": "t", "partition": "0"}) == 8
    assert value("headwater_group_lag", {"group": "g", "topic": "u", "partition": "1"}) == 12
