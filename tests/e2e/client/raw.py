"""Raw gRPC access to a partition leader, for tests that look under the client:
counting the batches a producer wrote, and resending a batch byte for byte."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import grpc
from headwater.records import BatchHeader, scan_batches
from headwater.testing import Cluster
from headwater.v1 import broker_pb2, broker_pb2_grpc


def wait_leader(cluster: Cluster, topic: str, partition: int = 0, *, not_: int = -1) -> int:
    """The live leader of the partition, waiting (bounded) for one other than ``not_``."""
    for _ in range(600):
        leader = cluster.leader_for(topic, partition)
        if leader is not None and leader >= 0 and leader != not_:
            return leader
        time.sleep(0.05)
    raise AssertionError(f"{topic}-{partition} has no leader other than {not_}")


@contextmanager
def stub_for(cluster: Cluster, broker_id: int) -> Iterator[broker_pb2_grpc.BrokerStub]:
    channel = grpc.insecure_channel(cluster.brokers[broker_id].address)
    try:
        yield broker_pb2_grpc.BrokerStub(channel)
    finally:
        channel.close()


def batch_headers(cluster: Cluster, topic: str, partition: int = 0) -> list[BatchHeader]:
    """The headers of every batch below the high watermark, read from the leader."""
    leader = wait_leader(cluster, topic, partition)
    headers: list[BatchHeader] = []
    offset = 0
    with stub_for(cluster, leader) as stub:
        for _ in range(1000):
            resp = stub.Fetch(
                broker_pb2.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=8 << 20,
                    partitions=[
                        broker_pb2.FetchPartition(
                            topic=topic,
                            partition=partition,
                            fetch_offset=offset,
                            current_leader_epoch=-1,
                            partition_max_bytes=8 << 20,
                        )
                    ],
                ),
                timeout=10,
            )
            got = [h for _, h in scan_batches(resp.partitions[0].records)]
            got = [h for h in got if h.last_offset >= offset]
            if not got:
                return headers
            headers += got
            offset = got[-1].next_offset
    return headers


def produce(
    stub: broker_pb2_grpc.BrokerStub, topic: str, records: bytes, *, acks: int = -1
) -> broker_pb2.ProducePartitionResponse:
    resp = stub.Produce(
        broker_pb2.ProduceRequest(
            acks=acks,
            timeout_ms=10_000,
            partitions=[broker_pb2.ProducePartitionData(topic=topic, partition=0, records=records)],
        ),
        timeout=15,
    )
    return resp.partitions[0]
