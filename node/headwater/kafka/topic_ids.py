"""Topic ids on the Kafka listener: a topic's name and cluster make its id.

Kafka gives each topic a random UUID at creation; the KIP-848 consumer protocol
(ConsumerGroupHeartbeat) names assigned partitions by that id and clients learn ids from
Metadata.  Headwater's topics are named only, so the Kafka listener derives an id:
``uuid5(namespace, cluster id + "/" + topic)``.  Every broker of the cluster computes the
same id for a topic without storing anything.  The rule's limit: a topic deleted and
created again under the same name keeps its id (Kafka's would change).

Invariants: an id is never Kafka's reserved ``AAAAAAAAAAAAAAAAAAAAAA`` (zero) or
``AAAAAAAAAAAAAAAAAAAAAQ`` (the metadata topic's), since a version-5 UUID has version
bits set; :class:`TopicIds` maps back only the topics the metadata cache holds.
"""

from __future__ import annotations

import uuid

from headwater.server.runtime.metadata_cache import MetadataCache

_NAMESPACE = uuid.UUID("5b0c7f0e-2f55-4d8c-9a43-6b1f1c0e7a11")


def topic_id(cluster_id: str, topic: str) -> uuid.UUID:
    """The id Metadata and ConsumerGroupHeartbeat give ``topic`` in cluster ``cluster_id``."""
    return uuid.uuid5(_NAMESPACE, f"{cluster_id}/{topic}")


class TopicIds:
    """Id -> name of the topics of one metadata cache, rebuilt when the cache changes."""

    def __init__(self, metadata: MetadataCache) -> None:
        self._metadata = metadata
        self._version = -1
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}

    def id_of(self, topic: str) -> uuid.UUID:
        self._refresh()
        found = self._ids.get(topic)
        return found if found is not None else topic_id(self._metadata.cluster_id, topic)

    def name_of(self, tid: uuid.UUID | None) -> str | None:
        """The topic with id ``tid``, or None when the cluster has no such topic."""
        self._refresh()
        return self._names.get(tid) if tid is not None else None

    def _refresh(self) -> None:
        cache = self._metadata
        if self._version != cache.version:
            self._ids = {t: topic_id(cache.cluster_id, t) for t in cache.topics}
            self._names = {tid: t for t, tid in self._ids.items()}
            self._version = cache.version
