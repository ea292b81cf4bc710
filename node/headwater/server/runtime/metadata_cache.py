"""The broker's view of the cluster, as last told by the controller (UpdateMetadata).

Kafka's ``MetadataCache``: every broker answers Metadata requests from this
copy rather than from ZooKeeper, so clients see one consistent snapshot per
controller update.  ``version`` increases on each update; the runtime pairs it
with an :class:`asyncio.Condition` so admin calls can wait for a topic's leaders.

Topic ids come with the partition states (``PartitionState.topic_id``, drawn once when
the topic was created and kept in its znode), so every broker holds the same id for a
topic.  A state carrying a different id than the one held means the topic was deleted
and created again (this broker may have missed the deletion): its old partitions go.
"""

from __future__ import annotations

from collections.abc import Iterable

from headwater.coordination.model import BrokerRegistration, PartitionState
from headwater.values import TopicPartition


class MetadataCache:
    """Live brokers, partition states, controller id; mutated only from the event loop."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, dict[int, PartitionState]] = {}
        self.topic_ids: dict[str, str] = {}
        """Topic -> id (Kafka's base64 form); a topic of ``topics`` from a controller
        that sent no id has none here."""
        self.controller_id = -1
        self.controller_epoch = -1
        self.cluster_id = ""
        self.version = 0

    def partition_counts(self) -> dict[str, int]:
        """``topic -> number of partitions`` of every topic known here."""
        return {topic: len(parts) for topic, parts in self.topics.items()}

    def update(
        self,
        *,
        controller_id: int,
        controller_epoch: int,
        states: Iterable[PartitionState],
        live_brokers: Iterable[BrokerRegistration] | None,
        deleted_topics: Iterable[str] = (),
        cluster_id: str = "",
    ) -> bool:
        """Apply an UpdateMetadata; False (nothing changed) if the controller epoch is stale."""
        if controller_epoch < self.controller_epoch:
            return False
        self.controller_epoch = controller_epoch
        if controller_id >= 0:
            self.controller_id = controller_id
        if cluster_id:
            self.cluster_id = cluster_id
        if live_brokers is not None:
            self.brokers = {b.broker_id: b for b in live_brokers}
        for topic in deleted_topics:
            self.topics.pop(topic, None)
            self.topic_ids.pop(topic, None)
        for ps in states:
            if ps.topic_id and self.topic_ids.get(ps.topic) != ps.topic_id:
                if ps.topic in self.topic_ids:  # re-created: the old topic's partitions go
                    self.topics.pop(ps.topic, None)
                self.topic_ids[ps.topic] = ps.topic_id
            self.topics.setdefault(ps.topic, {})[ps.partition] = ps
        self.version += 1
        return True

    def contains(self, tp: TopicPartition) -> bool:
        return tp.partition in self.topics.get(tp.topic, {})

    def leader_of(self, tp: TopicPartition) -> int:
        ps = self.topics.get(tp.topic, {}).get(tp.partition)
        return ps.leader if ps is not None else -1

    def topic_has_leaders(self, topic: str, num_partitions: int) -> bool:
        parts = self.topics.get(topic, {})
        if len(parts) < num_partitions:
            return False
        return all(ps.leader >= 0 for ps in parts.values())

    def offline_replicas(self, ps: PartitionState) -> list[int]:
        return [r for r in ps.replicas if r not in self.brokers]
