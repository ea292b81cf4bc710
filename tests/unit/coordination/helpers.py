"""Builders for controller views, broker registrations and partition states in a known shape."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from headwater.coordination.context import ControllerContext
from headwater.coordination.model import BrokerRegistration, ControllerEpochZk, LeaderAndIsr

TopicPartition = tuple[str, int]

EPOCH = ControllerEpochZk(epoch=3, zk_version=2)
"""The controller epoch of every view built here (and its znode version)."""


def reg(broker_id: int, *, epoch: int | None = None) -> BrokerRegistration:
    """A registration; its broker epoch defaults to 100 + id."""
    return BrokerRegistration(
        broker_id, "127.0.0.1", 9000 + broker_id, epoch=100 + broker_id if epoch is None else epoch
    )


def lai(
    leader: int,
    isr: Iterable[int],
    *,
    leader_epoch: int = 0,
    controller_epoch: int = 1,
    zk_version: int = 0,
) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=leader,
        leader_epoch=leader_epoch,
        isr=tuple(isr),
        controller_epoch=controller_epoch,
        zk_version=zk_version,
    )


def settled(
    topics: Mapping[str, Mapping[int, tuple[int, ...]]],
) -> dict[TopicPartition, LeaderAndIsr]:
    """States where each partition is led by its first replica with every replica in sync."""
    return {
        (t, p): lai(replicas[0], replicas)
        for t, parts in topics.items()
        for p, replicas in parts.items()
    }


def view(
    *,
    brokers: Iterable[int] = (1, 2, 3),
    topics: Mapping[str, Mapping[int, tuple[int, ...]]] | None = None,
    states: Mapping[TopicPartition, LeaderAndIsr] | None = None,
    shutting_down: Iterable[int] = (),
    deleting: Iterable[str] = (),
    epoch: ControllerEpochZk | None = EPOCH,
) -> ControllerContext:
    """An active controller's view; ``states`` default to :func:`settled` ones."""
    topics = topics or {}
    return ControllerContext(
        epoch=epoch,
        live_brokers={b: reg(b) for b in brokers},
        shutting_down=set(shutting_down),
        assignments={t: dict(parts) for t, parts in topics.items()},
        states=dict(settled(topics) if states is None else states),
        topics_to_delete=set(deleting),
    )


ORDERS = {"orders": {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}}
"""Three partitions, three replicas each, leaderships spread over brokers 1-3."""
