"""Cluster metadata snapshots built from Metadata answers: leaders, errors, merging."""

from __future__ import annotations

from headwater.client.transport.metadata import ClusterMetadata
from headwater.client.types import TopicPartition
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
