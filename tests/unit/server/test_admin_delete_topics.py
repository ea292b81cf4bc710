"""DeleteTopics over gRPC: the deletion marker is written, then the answer waits (up to
``timeout_ms``) for the topic to leave this broker's metadata; as in Kafka, a topic still
listed then is answered REQUEST_TIMED_OUT (the marker stays: the controller goes on).

The coordinator is a fake (the controller's side is tested in tests/unit/coordination).
"""

from __future__ import annotations

import asyncio
from typing import cast

from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.errors import ErrorCode
from headwater.server.config import BrokerConfig
from headwater.server.convert import Context
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.admin import AdminService
from headwater.v1 import admin_pb2

NO_CONTEXT = cast("Context", None)  # read only by an authorizer that is on


class FakeCoordinator:
    """The topics in ZooKeeper and the deletion markers written."""

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics
        self.marked: list[str] = []

    def get_topics(self) -> list[str]:
        return list(self.topics)

    def delete_topic(self, name: str) -> None:
        self.marked.append(name)


class Broker:
    def __init__(self, topics: list[str]) -> None:
        self.coordinator = FakeCoordinator(topics)
        self.metadata = MetadataCache()
        self.metadata.update(
            controller_id=1,
            controller_epoch=1,
            states=[PartitionState(t, 0, LeaderAndIsr(1, 0, (1,), 1, 0), (1,)) for t in topics],
            live_brokers=None,
        )
        self.changed = asyncio.Condition()
        self.service = AdminService(
            coordinator=lambda: cast("BrokerCoordinator", self.coordinator),
            metadata=self.metadata,
            metadata_changed=self.changed,
            metrics=BrokerMetrics(),
            config=BrokerConfig(broker_id=1),
        )

    async def update_metadata(self, *, deleted: str) -> None:
        """What the controller's UpdateMetadata naming ``deleted`` does to this broker."""
        self.metadata.update(
            controller_id=1,
            controller_epoch=1,
            states=[],
            live_brokers=None,
            deleted_topics=[deleted],
        )
        async with self.changed:
            self.changed.notify_all()

    async def delete(self, *names: str, timeout_ms: int) -> dict[str, admin_pb2.TopicResult]:
        response = await self.service.DeleteTopics(
            admin_pb2.DeleteTopicsRequest(topics=list(names), timeout_ms=timeout_ms), NO_CONTEXT
        )
        return {r.name: r for r in response.topics}


def test_a_deletion_this_broker_learns_of_in_time_is_answered_none() -> None:
    async def scenario() -> None:
        broker = Broker(["t"])
        asyncio.get_running_loop().call_later(
            0.05, lambda: asyncio.ensure_future(broker.update_metadata(deleted="t"))
        )
        results = await broker.delete("t", timeout_ms=10_000)
        assert ErrorCode(results["t"].error) is ErrorCode.NONE, results["t"]
        assert broker.coordinator.marked == ["t"]
        assert "t" not in broker.metadata.topics

    asyncio.run(scenario())


def test_a_deletion_not_finished_within_the_timeout_is_answered_request_timed_out() -> None:
    async def scenario() -> None:
        broker = Broker(["t", "u"])
        asyncio.get_running_loop().call_later(
            0.02, lambda: asyncio.ensure_future(broker.update_metadata(deleted="u"))
        )
        results = await broker.delete("t", "u", timeout_ms=300)
        assert ErrorCode(results["t"].error) is ErrorCode.REQUEST_TIMED_OUT, results["t"]
        assert "still listed it after 300 ms" in results["t"].error_message
        assert ErrorCode(results["u"].error) is ErrorCode.NONE, results["u"]
        assert broker.coordinator.marked == ["t", "u"]  # the marker stays written

    asyncio.run(scenario())


def test_an_unknown_topic_is_refused_without_waiting() -> None:
    async def scenario() -> None:
        broker = Broker(["t"])
        results = await broker.delete("missing", timeout_ms=60_000)
        assert ErrorCode(results["missing"].error) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert broker.coordinator.marked == []

    asyncio.run(scenario())
