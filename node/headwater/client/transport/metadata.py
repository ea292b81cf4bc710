"""What the client knows of the cluster: brokers, partitions and their leaders.

:class:`ClusterMetadata` is an immutable snapshot built from one Metadata
answer; readers on any thread take the current snapshot and never see it
change under them.  :class:`MetadataManager` replaces the snapshot when asked:
after ``NOT_LEADER_OR_FOLLOWER``, ``UNKNOWN_TOPIC_OR_PARTITION``,
``LEADER_NOT_AVAILABLE`` or a lost connection (callers call
:meth:`MetadataManager.request_update`), and at least every
``metadata_max_age_ms``.  It asks any live broker it knows, falling back to the
bootstrap list, so losing the bootstrap broker after start-up is harmless.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from headwater import errors
from headwater.client.transport import connection
from headwater.client.types import BrokerMetadata, PartitionMetadata, TopicPartition
from headwater.clock import Clock, monotonic_ms
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2


class ClusterMetadata(NamedTuple):
    """One snapshot of the cluster as a broker described it."""

    cluster_id: str
    controller_id: int
    brokers: Mapping[int, BrokerMetadata]
    partitions: Mapping[str, tuple[PartitionMetadata, ...]]
    """Partitions by topic, sorted by partition number (topics without errors only)."""
    topic_errors: Mapping[str, errors.ErrorCode]
    """Error codes of the topics the answer refused (UNKNOWN_TOPIC_OR_PARTITION, ...)."""
    internal_topics: frozenset[str] = frozenset()

    @classmethod
    def empty(cls) -> ClusterMetadata:
        return cls("", -1, {}, {}, {})

    @classmethod
    def from_response(cls, resp: Any) -> ClusterMetadata:
        """Build a snapshot from a ``MetadataResponse``."""
        brokers = {b.id: BrokerMetadata(b.id, b.host, b.port, b.rack or None) for b in resp.brokers}
        partitions: dict[str, tuple[PartitionMetadata, ...]] = {}
        topic_errors: dict[str, errors.ErrorCode] = {}
        internal: set[str] = set()
        for t in resp.topics:
            if t.error:
                topic_errors[t.name] = errors.ErrorCode.from_wire(t.error)
                continue
            if t.internal:
                internal.add(t.name)
            partitions[t.name] = tuple(
                sorted(
                    (
                        PartitionMetadata(
                            topic=t.name,
                            partition=p.partition,
                            leader=p.leader,
                            leader_epoch=p.leader_epoch,
                            replicas=tuple(p.replicas),
                            isr=tuple(p.isr),
                            offline_replicas=tuple(p.offline_replicas),
                            error_code=errors.ErrorCode.from_wire(p.error),
                        )
                        for p in t.partitions
                    ),
                    key=lambda pm: pm.partition,
                )
            )
        return cls(
            resp.cluster_id,
            resp.controller_id,
            brokers,
            partitions,
            topic_errors,
            frozenset(internal),
        )

    def partition_count(self, topic: str) -> int | None:
        parts = self.partitions.get(topic)
        return len(parts) if parts is not None else None

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        parts = self.partitions.get(tp.topic)
        if parts is None or not 0 <= tp.partition < len(parts):
            return None
        pm = parts[tp.partition]
        return pm if pm.partition == tp.partition else None

    def leader(self, tp: TopicPartition) -> BrokerMetadata | None:
        """The leader's broker, or None when unknown or offline."""
        pm = self.partition(tp)
        if pm is None or pm.leader < 0:
            return None
        return self.brokers.get(pm.leader)

    def merge(self, other: ClusterMetadata, *, topics: Iterable[str] | None) -> ClusterMetadata:
        """``other`` for the brokers and the ``topics`` it answered; ``self`` for the rest."""
        if topics is None:
            return other
        partitions = dict(self.partitions)
        topic_errors = dict(self.topic_errors)
        for name in topics:
            partitions.pop(name, None)
            topic_errors.pop(name, None)
        partitions.update(other.partitions)
        topic_errors.update(other.topic_errors)
        return other._replace(partitions=partitions, topic_errors=topic_errors)


class MetadataManager:
    """Owns the current :class:`ClusterMetadata`; thread-safe.

    Any thread may call :meth:`fetch` (one refresh at a time, under a lock) or
    read :attr:`current`.  The producer's sender and the consumer's fetcher
    call :meth:`maybe_refresh` each loop, which refreshes only when an update
    was requested or the snapshot is older than ``max_age_ms``.
    """

    def __init__(
        self,
        *,
        bootstrap: tuple[str, ...],
        channels: connection.Channels,
        retry: RetryPolicy,
        request_timeout_ms: int,
        max_age_ms: int = 300000,
        clock: Clock = monotonic_ms,
    ) -> None:
        self._bootstrap = bootstrap
        self._channels = channels
        self._retry = retry
        self._request_timeout_ms = request_timeout_ms
        self._max_age_ms = max_age_ms
        self._clock = clock
        self._lock = threading.Lock()
        self.current = ClusterMetadata.empty()
        """The latest snapshot: replaced whole by a refresh, never mutated; read without a
        lock (one attribute read; the producer's C send path reads it per record)."""
        self._updated_ms = float("-inf")
        self._update_requested = False
        self._topics: set[str] = set()

    def add_topics(self, topics: Iterable[str]) -> None:
        """Topics refreshes should cover (the producer's and consumer's topics)."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._update_requested = True

    def request_update(self) -> None:
        self._update_requested = True

    def needs_update(self) -> bool:
        return self._update_requested or self._clock() - self._updated_ms >= self._max_age_ms

    def maybe_refresh(self) -> None:
        """Refresh when requested or stale; errors leave the old snapshot (retried next loop)."""
        if not self.needs_update():
            return
        with self._lock:
            # Another thread may have refreshed while this one waited for the lock
            # (a consumer's first poll and its fetcher both see a new topic).
            if not self.needs_update():
                return
            try:
                self._fetch_locked(sorted(self._topics))
            except errors.HeadwaterError:
                return

    def fetch(self, topics: Iterable[str] | None) -> ClusterMetadata:
        """Ask a broker about ``topics`` (None: every topic) and install the answer."""
        with self._lock:
            return self._fetch_locked(topics)

    def _fetch_locked(self, topics: Iterable[str] | None) -> ClusterMetadata:
        names = None if topics is None else list(topics)
        request = broker_pb2.MetadataRequest(topics=names or [], all_topics=names is None)
        self._update_requested = False
        resp = self._ask_any(request)
        snap = ClusterMetadata.from_response(resp)
        self.current = self.current.merge(snap, topics=names)
        self._updated_ms = self._clock()
        return snap

    def wait_for_topic(self, topic: str, *, timeout_ms: float) -> tuple[PartitionMetadata, ...]:
        """The partitions of ``topic``, refreshing while it is unknown, within ``timeout_ms``."""
        self.add_topics([topic])

        def attempt() -> tuple[PartitionMetadata, ...]:
            parts = self.current.partitions.get(topic)
            if parts:
                return parts
            snap = self.fetch(sorted(self._topics | {topic}))
            code = snap.topic_errors.get(topic)
            if code is not None:
                raise errors.for_code(code, f"topic {topic!r}")
            parts = snap.partitions.get(topic)
            if not parts:
                raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} has no partitions")
            return parts

        return self._retry.call(attempt, timeout_ms=timeout_ms, clock=self._clock)

    def _ask_any(self, request: Any) -> Any:
        known = [b.address for b in self.current.brokers.values()]
        random.shuffle(known)
        candidates = [*known, *(a for a in self._bootstrap if a not in known)]
        last: errors.HeadwaterError | None = None
        for address in candidates:
            try:
                return connection.call(
                    self._channels.broker(address).Metadata,
                    request,
                    address=address,
                    timeout_ms=self._request_timeout_ms,
                )
            except errors.HeadwaterError as exc:
                if not exc.retriable:
                    raise
                last = exc
        raise errors.NetworkError(
            f"cannot reach any broker (tried {', '.join(candidates)})"
            + (f"; last error: {last.message}" if last is not None else "")
        )
