"""Carrying out the ReplicaManager's role changes: replica fetchers, then group leaderships.

:meth:`~headwater.server.runtime.replica_manager.ReplicaManager.become_leader_or_follower`
and :meth:`~headwater.server.runtime.replica_manager.ReplicaManager.stop_replicas`
decide, and return, a :class:`~headwater.server.runtime.hosted.RoleChanges`; the
Control servicer hands it to :meth:`RoleChangeApplier.apply` in the same event-loop
step.  The applier is built after the fetcher manager and the group coordinator
(both need the ReplicaManager), which is why the manager returns its decision
rather than calling out to them: nothing here is bound after construction.

Thread model: event loop only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Protocol

from headwater.coordination.model import BrokerRegistration
from headwater.server.runtime.hosted import RoleChanges
from headwater.values import TopicPartition


class Fetchers(Protocol):
    """The replica fetchers' side of the seam
    (:class:`~headwater.server.runtime.fetcher.ReplicaFetcherManager`)."""

    def add_partitions(
        self,
        changes: Mapping[TopicPartition, tuple[int, int]],
        leaders: Mapping[int, BrokerRegistration],
    ) -> None: ...

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None: ...


OnLeadership = Callable[[TopicPartition, int | None], None]
"""Told ``(partition, leader epoch)`` when this broker leads it, ``(partition, None)`` when not."""


class PartitionedCoordinator(Protocol):
    """A coordinator sharded by the partitions of an internal topic (groups, transactions)."""

    def on_become_leader(
        self, partition: int, leader_epoch: int
    ) -> Coroutine[None, None, None]: ...

    def on_resign(self, partition: int) -> None: ...


class CoordinatorLeadership:
    """Follows this broker's leaderships of one internal topic for its coordinator.

    Becoming leader starts loading the partition (a task, kept referenced until
    it ends); losing it unloads at once.  Other topics are ignored.
    """

    def __init__(self, topic: str, runtime: PartitionedCoordinator) -> None:
        self._topic = topic
        self._runtime = runtime
        self._loads: set[asyncio.Future[None]] = set()

    def on_leadership(self, tp: TopicPartition, leader_epoch: int | None) -> None:
        if tp.topic != self._topic:
            return
        if leader_epoch is None:
            self._runtime.on_resign(tp.partition)
            return
        future = asyncio.ensure_future(self._runtime.on_become_leader(tp.partition, leader_epoch))
        self._loads.add(future)
        future.add_done_callback(self._loads.discard)


class RoleChangeApplier:
    """Applies :class:`RoleChanges` in field order and remembers the live leaders.

    Invariant: a partition is handed to a replica fetcher only with the address
    of its leader as given by the latest LeaderAndIsr (``live_leaders``); one
    whose leader is unknown waits for the next LeaderAndIsr.
    """

    def __init__(self, *, fetchers: Fetchers, on_leadership: OnLeadership) -> None:
        self._fetchers = fetchers
        self._on_leadership = on_leadership
        self._leaders: dict[int, BrokerRegistration] = {}

    def update_leaders(self, leaders: Mapping[int, BrokerRegistration]) -> None:
        """A LeaderAndIsr's live leaders (before its partition states are applied)."""
        self._leaders.update(leaders)

    def apply(self, changes: RoleChanges) -> None:
        """Stop and start replica fetchers, then report each leadership."""
        if changes.unfollow:
            self._fetchers.remove_partitions(changes.unfollow)
        if changes.follow:
            self._fetchers.add_partitions(changes.follow, self._leaders)
        for tp, leader_epoch in changes.leadership:
            self._on_leadership(tp, leader_epoch)
