"""The scenario each secured listener type repeats: acks=all writes across a SIGKILL of
the partition's leader, then everything acknowledged read back from the survivors."""

from __future__ import annotations

from typing import Any

from headwater.client.consumer.consumer import Consumer
from headwater.client.producer.producer import Producer
from headwater.client.types import TopicPartition
from headwater.testing import Cluster


def produce_across_leader_kill(
    cluster: Cluster, topic: str, client: dict[str, Any], *, per_side: int
) -> tuple[list[bytes], int]:
    """``per_side`` records before and after killing partition 0's leader, each waited
    for with acks=all; the values acknowledged, in order, and the killed broker's id."""
    acked: list[bytes] = []
    with Producer(cluster.bootstrap, acks="all", **client) as producer:
        for i in range(per_side):
            producer.send(topic, b"before-%d" % i).result(timeout=60)
            acked.append(b"before-%d" % i)
        leader = cluster.leader_for(topic, 0)
        assert leader is not None
        cluster.kill(leader)
        for i in range(per_side):
            producer.send(topic, b"after-%d" % i).result(timeout=60)
            acked.append(b"after-%d" % i)
    return acked, leader


def read_from_survivors(
    cluster: Cluster, topic: str, client: dict[str, Any], *, killed: int, count: int
) -> list[bytes | None]:
    """Partition 0 from the earliest offset through the brokers other than ``killed``,
    until ``count`` records or 10 s without one."""
    survivors = ",".join(b.address for i, b in cluster.brokers.items() if i != killed)
    consumer = Consumer(
        bootstrap_servers=survivors,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
        **client,
    )
    seen: list[bytes | None] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        for record in consumer:
            seen.append(record.value)
            if len(seen) >= count:
                break
    finally:
        consumer.close()
    return seen
