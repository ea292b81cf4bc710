"""Topic ids on the Kafka listener: the id drawn when the topic was created.

Kafka gives each topic a random UUID at creation and keeps it with the topic; Metadata
v10+, Fetch v13+ (and its fetch sessions), CreateTopics v7+, DeleteTopics v6 and
the KIP-848 consumer protocol (ConsumerGroupHeartbeat) name topics by it, so a client
notices a topic deleted and created again under the same name (its old id answers
UNKNOWN_TOPIC_ID).  Headwater does the same: the broker that creates a topic draws a
random id (:func:`headwater.coordination.model.new_topic_id`) and writes it into the
topic's znode (``/brokers/topics/<topic>``, field ``topic_id``, Kafka's TopicZNode v3);
the controller gives one to a topic created before ids existed, once, and sends each
topic's id to every broker with its partition states; :class:`TopicIds` answers from the
broker's metadata cache.

Invariants: one id per topic creation (a re-created topic gets a new id); every broker
answers the same id for a topic (the one in its znode); an id is never Kafka's reserved
``AAAAAAAAAAAAAAAAAAAAAA`` (zero, "no id") or ``AAAAAAAAAAAAAAAAAAAAAQ`` (the metadata
topic's).  A topic the cache holds without an id (a controller older than ids sent its
states) answers the id older brokers derived, ``uuid5(namespace, cluster id + "/" +
topic)``; a topic the cache does not hold answers the zero id, as Kafka's metadata cache.
"""

from __future__ import annotations

import uuid

from headwater.coordination.model import decode_topic_id
from headwater.server.runtime.metadata_cache import MetadataCache

ZERO_ID = uuid.UUID(int=0)
_NAMESPACE = uuid.UUID("5b0c7f0e-2f55-4d8c-9a43-6b1f1c0e7a11")


def derived_topic_id(cluster_id: str, topic: str) -> uuid.UUID:
    """The id of a topic whose states came without one (the rule before ids were stored)."""
    return uuid.uuid5(_NAMESPACE, f"{cluster_id}/{topic}")


class TopicIds:
    """Id <-> name of the topics of one metadata cache, rebuilt when the cache changes."""

    def __init__(self, metadata: MetadataCache) -> None:
        self._metadata = metadata
        self._version = -1
        self._names: dict[uuid.UUID, str] = {}
        self._ids: dict[str, uuid.UUID] = {}

    def id_of(self, topic: str) -> uuid.UUID:
        """``topic``'s id; the zero id when the cache does not hold the topic."""
        self._refresh()
        return self._ids.get(topic, ZERO_ID)

    def name_of(self, tid: uuid.UUID | None) -> str | None:
        """The topic with id ``tid``, or None when the cluster has no such topic."""
        self._refresh()
        return self._names.get(tid) if tid is not None else None

    def _refresh(self) -> None:
        cache = self._metadata
        if self._version != cache.version:
            self._ids = {}
            for t in cache.topics:
                stored = decode_topic_id(cache.topic_ids.get(t, ""))
                self._ids[t] = (
                    stored if stored is not None else derived_topic_id(cache.cluster_id, t)
                )
            self._names = {tid: t for t, tid in self._ids.items()}
            self._version = cache.version
