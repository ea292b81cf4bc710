"""Builders for partitions in a known state."""

from __future__ import annotations

from headwater.replication import Partition
from headwater.values import TopicPartition

TP = TopicPartition("orders", 0)


def new_partition(*, min_isr: int = 2, lag_ms: int = 1000, broker: int = 1) -> Partition:
    return Partition(
        TP, local_broker_id=broker, min_insync_replicas=min_isr, replica_lag_time_max_ms=lag_ms
    )


def leader(
    *,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    leo: int = 0,
    epoch: int = 5,
    now_ms: int = 0,
    min_isr: int = 2,
    lag_ms: int = 1000,
) -> Partition:
    p = new_partition(min_isr=min_isr, lag_ms=lag_ms)
    assert p.make_leader(
        leader_epoch=epoch,
        isr=isr,
        replicas=replicas,
        zk_version=7,
        log_end_offset=leo,
        high_watermark=0,
        now_ms=now_ms,
    )
    return p
