"""Raw-gRPC helpers for the broker e2e tests (the client library is tested elsewhere)."""

from __future__ import annotations

import time
import uuid

import grpc
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch, read_batches
from headwater.testing import Cluster
from headwater.v1 import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc

OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]


def broker_stub(address: str) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(grpc.insecure_channel(address, options=OPTIONS))


def admin_stub(address: str) -> admin_pb2_grpc.AdminStub:
    return admin_pb2_grpc.AdminStub(grpc.insecure_channel(address, options=OPTIONS))


def new_topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def create_topic(
    cluster: Cluster,
    *,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: dict[str, str] | None = None,
) -> str:
    name = new_topic_name()
    address = next(b.address for b in cluster.brokers.values() if b.running)
    response = admin_stub(address).CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    configs=configs or {},
                )
            ],
            timeout_ms=15000,
        ),
        timeout=30,
    )
    assert response.topics[0].error == ErrorCode.NONE, response
    for p in range(partitions):
        cluster.wait_for(lambda p=p: cluster.leader_for(name, p) is not None, what="a leader")
    return name


def batch(values: list[bytes]) -> bytes:
    return build_batch([Record(None, v) for v in values])


def produce(
    address: str,
    topic: str,
    records: bytes,
    *,
    acks: int = -1,
    partition: int = 0,
    timeout_ms: int = 5000,
) -> broker_pb2.ProducePartitionResponse:
    response = broker_stub(address).Produce(
        broker_pb2.ProduceRequest(
            acks=acks,
            timeout_ms=timeout_ms,
            partitions=[
                broker_pb2.ProducePartitionData(topic=topic, partition=partition, records=records)
            ],
        ),
        timeout=timeout_ms / 1000 + 10,
    )
    return response.partitions[0]


def fetch(
    address: str,
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
) -> broker_pb2.FetchedPartition:
    response = broker_stub(address).Fetch(
        broker_pb2.FetchRequest(
            replica_id=-1,
            max_wait_ms=max_wait_ms,
            min_bytes=min_bytes,
            max_bytes=32 << 20,
            partitions=[
                broker_pb2.FetchPartition(
                    topic=topic,
                    partition=partition,
                    fetch_offset=offset,
                    current_leader_epoch=-1,
                    partition_max_bytes=32 << 20,
                )
            ],
        ),
        timeout=max_wait_ms / 1000 + 15,
    )
    return response.partitions[0]


def read_all(address: str, topic: str, *, partition: int = 0) -> list[tuple[int, bytes]]:
    """Every (offset, value) below the high watermark, from offset 0."""
    out: list[tuple[int, bytes]] = []
    offset = 0
    retriable = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    for _ in range(10000):
        part = fetch(address, topic, offset, partition=partition)
        # ZooKeeper may name a new leader a moment before its LeaderAndIsr arrives.
        for _retry in range(200):
            if part.error not in retriable:
                break
            time.sleep(0.05)
            part = fetch(address, topic, offset, partition=partition)
        assert part.error == ErrorCode.NONE, part
        if not part.records:
            break
        for b in read_batches(part.records):
            for r in b.records():
                if r.offset >= offset:
                    out.append((r.offset, r.value or b""))
            offset = b.next_offset
    return out


def produce_to_leader(
    cluster: Cluster, topic: str, records: bytes, *, acks: int = -1, timeout_s: float = 30.0
) -> int:
    """Produce, following leadership changes and retrying retriable errors; the base offset.

    These batches are not idempotent, so a retry after the leader appended (a timed-out
    acks=all wait) would write the records twice: the broker's wait is the whole
    ``timeout_s``, so that a follower slow to follow a new leader under load still
    acknowledges within the first request, and retries are left for refusals."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        leader = cluster.leader_for(topic, 0)
        if leader is not None and cluster.brokers[leader].running:
            try:
                result = produce(
                    cluster.brokers[leader].address,
                    topic,
                    records,
                    acks=acks,
                    timeout_ms=int(timeout_s * 1000),
                )
                if result.error == ErrorCode.NONE:
                    return result.base_offset
                last = ErrorCode(result.error).name
            except grpc.RpcError as exc:
                last = str(exc.code())
        time.sleep(0.05)
    raise AssertionError(f"could not produce within {timeout_s}s (last error {last})")
