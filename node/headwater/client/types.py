"""The small values users hold: partitions, delivery reports and consumed records.

They are named and shaped as in Kafka's Java client (``TopicPartition``,
``RecordMetadata``, ``ConsumerRecord``) so code and habits carry over.
``TopicPartition`` is the one the whole package shares (:mod:`headwater.values`),
named here too because this is where the client's users look for it.  All are
immutable ``NamedTuple``s: cheap to build by the hundred thousand on the hot
path, hashable (``TopicPartition`` keys every per-partition map in the client)
and printable.
"""

from __future__ import annotations

from typing import NamedTuple

from headwater.errors import ErrorCode
from headwater.values import TopicPartition as TopicPartition

Headers = tuple[tuple[str, bytes | None], ...]
"""Record headers as ``(key, value)`` pairs, in order; keys may repeat (as in Kafka)."""


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed (what ``Producer.send``'s future resolves to).

    ``offset`` is -1 for ``acks=0`` (the broker said nothing back).
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class ConsumerRecord(NamedTuple):
    """One record returned by ``Consumer.poll``."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()


class OffsetAndTimestamp(NamedTuple):
    """An answer of ``Consumer.offsets_for_times``: the first offset at or after a time."""

    offset: int
    timestamp_ms: int


class BrokerMetadata(NamedTuple):
    """A live broker as the cluster describes it."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class PartitionMetadata(NamedTuple):
    """Leader, replicas and in-sync replicas of one partition (leader -1: offline)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: ErrorCode = ErrorCode.NONE

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def offline(self) -> bool:
        return self.leader < 0


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's group identity, for a transactional producer's
    ``send_offsets_to_transaction`` (Kafka's ``ConsumerGroupMetadata``): the group
    coordinator refuses offsets from a member that is no longer in the generation."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
