"""Controller requests to brokers, one per recipient (Kafka's ``ControllerBrokerRequestBatch``).

Pure functions from the controller's view and a list of partition states to
one request value per broker.  Each value is also a
:data:`~headwater.coordination.channel.Request`: calling it with a channel and
the broker's registration sends it, on that broker's sender thread.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from headwater.coordination.channel import ControllerChannel
from headwater.coordination.context import ControllerContext
from headwater.coordination.model import NO_LEADER, BrokerRegistration, PartitionState
from headwater.values import TopicPartition


@dataclasses.dataclass(frozen=True)
class LeaderAndIsrRequest:
    """Roles for the partitions a broker replicates; ``live_leaders``: where to fetch from."""

    controller_epoch: int
    states: tuple[PartitionState, ...]
    live_leaders: tuple[BrokerRegistration, ...]

    def __call__(self, channel: ControllerChannel, broker: BrokerRegistration) -> None:
        channel.send_leader_and_isr(
            broker,
            controller_epoch=self.controller_epoch,
            states=list(self.states),
            live_leaders=list(self.live_leaders),
        )


@dataclasses.dataclass(frozen=True)
class UpdateMetadataRequest:
    """Partition states, live brokers and deleted topics for a broker's metadata cache."""

    controller_epoch: int
    states: tuple[PartitionState, ...]
    live_brokers: tuple[BrokerRegistration, ...]
    deleted_topics: tuple[str, ...] = ()

    def __call__(self, channel: ControllerChannel, broker: BrokerRegistration) -> None:
        channel.send_update_metadata(
            broker,
            controller_epoch=self.controller_epoch,
            states=list(self.states),
            live_brokers=list(self.live_brokers),
            deleted_topics=list(self.deleted_topics),
        )


@dataclasses.dataclass(frozen=True)
class StopReplicaRequest:
    """Stop replicating ``partitions``; ``delete`` also removes their logs."""

    controller_epoch: int
    partitions: tuple[TopicPartition, ...]
    delete: bool

    def __call__(self, channel: ControllerChannel, broker: BrokerRegistration) -> None:
        channel.send_stop_replica(
            broker,
            controller_epoch=self.controller_epoch,
            partitions=list(self.partitions),
            delete=self.delete,
        )


def leader_and_isr(
    ctx: ControllerContext,
    states: Sequence[PartitionState],
    *,
    to: Iterable[int] | None = None,
) -> dict[int, LeaderAndIsrRequest]:
    """One LeaderAndIsr per live replica of ``states`` (only brokers in ``to``, if given).

    Each carries the states of the partitions that broker replicates, in the
    order given, and the registrations of their leaders that are live.
    """
    only = set(to) if to is not None else None
    per_broker: dict[int, list[PartitionState]] = {}
    for s in states:
        for b in s.replicas:
            if b in ctx.live_brokers and (only is None or b in only):
                per_broker.setdefault(b, []).append(s)
    out: dict[int, LeaderAndIsrRequest] = {}
    for b, sts in per_broker.items():
        leaders = sorted(
            {s.leader for s in sts if s.leader != NO_LEADER and s.leader in ctx.live_brokers}
        )
        out[b] = LeaderAndIsrRequest(
            ctx.controller_epoch, tuple(sts), tuple(ctx.live_brokers[x] for x in leaders)
        )
    return out


def update_metadata(
    ctx: ControllerContext,
    states: Sequence[PartitionState],
    *,
    deleted_topics: Sequence[str] = (),
) -> dict[int, UpdateMetadataRequest]:
    """The same UpdateMetadata for every live broker."""
    request = UpdateMetadataRequest(
        ctx.controller_epoch,
        tuple(states),
        tuple(ctx.live_brokers.values()),
        tuple(deleted_topics),
    )
    return {b: request for b in ctx.live_brokers}


def stop_replica(
    ctx: ControllerContext, partitions: Sequence[TopicPartition], *, delete: bool
) -> StopReplicaRequest:
    return StopReplicaRequest(ctx.controller_epoch, tuple(partitions), delete)
