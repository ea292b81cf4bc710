"""The Headwater client: :class:`Producer`, :class:`Consumer` and :class:`Admin`.

It speaks Headwater's gRPC API (``proto/headwater/v1``) with Kafka's client
vocabulary, settings and semantics, and depends only on ``headwater.records``,
``headwater.errors`` and the generated protocol code (an import-linter
contract keeps it so), so the operator and the Spark connector can use it
without pulling in the broker.
"""

from headwater.client.admin import (
    Admin,
    ClusterDescription,
    ConfigEntry,
    NewTopic,
    TopicDescription,
)
from headwater.client.consumer import Consumer
from headwater.client.futures import RecordFuture
from headwater.client.partitioner import DefaultPartitioner, Partitioner, murmur2
from headwater.client.producer import Producer
from headwater.client.subscription import CommittedOffsets
from headwater.client.types import (
    BrokerMetadata,
    ConsumerRecord,
    OffsetAndTimestamp,
    PartitionMetadata,
    RecordMetadata,
    TopicPartition,
)
from headwater.retry import RetryPolicy

__all__ = [
    "Admin",
    "BrokerMetadata",
    "ClusterDescription",
    "CommittedOffsets",
    "ConfigEntry",
    "Consumer",
    "ConsumerRecord",
    "DefaultPartitioner",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "Partitioner",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "RetryPolicy",
    "TopicDescription",
    "TopicPartition",
    "murmur2",
]
