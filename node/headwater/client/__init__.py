"""The Headwater client: :class:`Producer`, :class:`Consumer` and :class:`Admin`.

It speaks Headwater's gRPC API (``proto/headwater/v1``) with Kafka's client
vocabulary, settings and semantics, and depends only on ``headwater.records``,
``headwater.security``, ``headwater.errors`` and the generated protocol code (an
import-linter contract keeps it so), so the operator and the Spark connector can
use it without pulling in the broker.

Inside, one package per job, in layers (the ``client-insides`` contract of
``.importlinter``): ``admin`` over ``producer`` and ``consumer``, over ``group``
(group membership) and ``reassignment`` (pure planning), over ``transport``
(channels, calls, SASL, TLS, metadata).  The modules at this level are what
several of those packages share, so they sit at the bottom: ``types`` (the
values the client exchanges), ``settings`` (Kafka's client settings, parsed),
``subscription`` (the consumer's assignment and positions, which group
membership also drives) and ``acl_proto`` (ACLs to and from the wire, shared
with the broker).  ``retry`` only re-exports :mod:`headwater.retry`.
"""

from headwater.client.admin.client import Admin
from headwater.client.admin.values import (
    ClusterDescription,
    ConfigEntry,
    NewTopic,
    ScramDeletion,
    ScramUpsertion,
    TopicDescription,
)
from headwater.client.consumer.consumer import Consumer
from headwater.client.consumer.range_reader import MissingOffsets, RangeReader
from headwater.client.producer.futures import RecordFuture
from headwater.client.producer.partitioner import DefaultPartitioner, Partitioner, murmur2
from headwater.client.producer.producer import Producer
from headwater.client.subscription import CommittedOffsets
from headwater.client.types import (
    BrokerMetadata,
    ConsumerGroupMetadata,
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
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "DefaultPartitioner",
    "MissingOffsets",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionMetadata",
    "Partitioner",
    "Producer",
    "RangeReader",
    "RecordFuture",
    "RecordMetadata",
    "RetryPolicy",
    "ScramDeletion",
    "ScramUpsertion",
    "TopicDescription",
    "TopicPartition",
    "murmur2",
]
