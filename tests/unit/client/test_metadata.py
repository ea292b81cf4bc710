"""Cluster metadata snapshots built from Metadata answers: leaders, errors, merging; and
one Metadata call for two threads wanting the same refresh at once."""

from __future__ import annotations

import threading
import time
from typing import Any, cast

from headwater.client.transport.metadata import ClusterMetadata, MetadataManager
from headwater.client.types import TopicPartition
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2, common_pb2


def response() -> broker_pb2.MetadataResponse:
    return broker_pb2.MetadataResponse(
        brokers=[
            common_pb2.BrokerInfo(id=1, host="h1", port=1),
            common_pb2.BrokerInfo(id=2, host="h2", port=2, rack="r"),
        ],
        controller_id=2,
        cluster_id="c",
        topics=[
            broker_pb2.TopicMetadata(
                name="t",
                partitions=[
                    broker_pb2.PartitionMetadata(partition=1, leader=-1, replicas=[1, 2], isr=[]),
                    broker_pb2.PartitionMetadata(partition=0, leader=2, replicas=[1, 2], isr=[2]),
                ],
            ),
            broker_pb2.TopicMetadata(name="gone", error=3),
        ],
    )


def test_from_response() -> None:
    m = ClusterMetadata.from_response(response())
    assert m.controller_id == 2 and m.brokers[2].rack == "r"
    assert m.partition_count("t") == 2
    assert m.leader(TopicPartition("t", 0)).address == "h2:2"  # type: ignore[union-attr]
    assert m.leader(TopicPartition("t", 1)) is None
    p0 = m.partition(TopicPartition("t", 0))
    assert p0 is not None and p0.under_replicated and not p0.offline
    assert m.topic_errors == {"gone": 3}
    assert m.partition(TopicPartition("t", 5)) is None


def test_merge_replaces_only_answered_topics() -> None:
    old = ClusterMetadata.from_response(response())
    new = ClusterMetadata.from_response(
        broker_pb2.MetadataResponse(
            topics=[
                broker_pb2.TopicMetadata(
                    name="u", partitions=[broker_pb2.PartitionMetadata(partition=0, leader=1)]
                )
            ]
        )
    )
    merged = old.merge(new, topics=["u"])
    assert set(merged.partitions) == {"t", "u"}
    assert old.merge(new, topics=None).partitions.keys() == {"u"}


class _SlowBroker:
    """A broker's Metadata method that blocks until released and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def Metadata(self, request: Any, timeout: float) -> Any:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(5)
        return response()


class _Channels:
    def __init__(self, broker: _SlowBroker) -> None:
        self._broker = broker

    def broker(self, address: str) -> _SlowBroker:
        return self._broker


def test_a_refresh_waiting_for_another_threads_refresh_does_not_repeat_it() -> None:
    """Two threads wanting the same refresh (a consumer's poll and its fetcher, both
    seeing a new topic) make one Metadata call: the second finds it done."""
    broker = _SlowBroker()
    manager = MetadataManager(
        bootstrap=("h1:1",),
        channels=cast(Any, _Channels(broker)),
        retry=RetryPolicy(retry_backoff_ms=1, retry_backoff_max_ms=1),
        request_timeout_ms=1000,
    )
    manager.add_topics(["t"])
    first = threading.Thread(target=manager.maybe_refresh)
    first.start()
    assert broker.entered.wait(5)
    second = threading.Thread(target=manager.maybe_refresh)
    second.start()
    time.sleep(0.05)  # the second thread waits for the lock
    broker.release.set()
    first.join(5)
    second.join(5)
    assert broker.calls == 1
    assert manager.current.partition_count("t") == 2
    manager.request_update()
    manager.maybe_refresh()
    assert broker.calls == 2
