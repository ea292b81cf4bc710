"""Helpers of the ACL e2e tests: a cluster with Kafka's authorizer on, ACLs written into its
ZooKeeper before it starts (the inter-broker identity needs CLUSTER_ACTION), raw stubs, and
bounded waits for ACL changes to reach every broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc
from headwater.coordination import session
from headwater.coordination.acls import AclZkStore
from headwater.records import Record, build_batch
from headwater.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding,
)
from headwater.testing import Cluster
from headwater.v1 import (
    acls_pb2_grpc,
    admin_pb2,
    admin_pb2_grpc,
    broker_pb2,
    broker_pb2_grpc,
    control_pb2_grpc,
    group_pb2_grpc,
)

T = TypeVar("T")
ANON = "User:ANONYMOUS"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
WAIT_S = 60.0


def acl(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    *,
    principal: str = ANON,
    host: str = "*",
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return binding(
        resource_type=rtype,
        name=name,
        principal=principal,
        operation=op,
        permission_type=perm,
        host=host,
        pattern_type=pattern,
    )


INTER_BROKER = acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION)


class AclWriter:
    """Writes ACLs straight into the cluster's ZooKeeper (as kafka-acls --authorizer-properties
    zookeeper.connect=... does); the brokers learn of them through their watch."""

    def __init__(self, connect: str) -> None:
        self.client = session.connect(connect)
        self.store = AclZkStore(self.client)
        self.store.ensure_paths()

    def add(self, *bindings: AclBinding) -> None:
        for b in bindings:
            self.store.update(b.pattern, lambda es, e=b.entry: es | {e})

    def remove(self, *bindings: AclBinding) -> None:
        for b in bindings:
            self.store.update(b.pattern, lambda es, e=b.entry: es - {e})

    def all(self) -> list[AclBinding]:
        return sorted(AclBinding(p, e) for p, es in self.store.load_all().items() for e in es)

    def close(self) -> None:
        session.close(self.client)


@contextmanager
def secured_cluster(
    zookeeper_hosts: str,
    data_dir: Path,
    *,
    brokers: int = 1,
    initial: Iterable[AclBinding] = (INTER_BROKER,),
    overrides: dict[str, str] | None = None,
    broker_overrides: dict[int, dict[str, str]] | None = None,
) -> Iterator[tuple[Cluster, AclWriter]]:
    cluster = Cluster(
        brokers=brokers,
        data_dir=data_dir,
        zookeeper=zookeeper_hosts,
        overrides={**AUTHORIZER, **(overrides or {})},
        broker_overrides=broker_overrides,
    )
    writer = AclWriter(zookeeper_hosts + cluster.chroot)
    try:
        writer.add(*initial)
        with cluster:
            yield cluster, writer
    finally:
        writer.close()


def channel(address: str) -> grpc.Channel:
    return grpc.insecure_channel(address)


def broker(address: str) -> broker_pb2_grpc.BrokerStub:
    return broker_pb2_grpc.BrokerStub(channel(address))


def admin(address: str) -> admin_pb2_grpc.AdminStub:
    return admin_pb2_grpc.AdminStub(channel(address))


def group(address: str) -> group_pb2_grpc.GroupStub:
    return group_pb2_grpc.GroupStub(channel(address))


def control(address: str) -> control_pb2_grpc.ControlStub:
    return control_pb2_grpc.ControlStub(channel(address))


def acls(address: str) -> acls_pb2_grpc.AclServiceStub:
    return acls_pb2_grpc.AclServiceStub(channel(address))


def eventually(probe: Callable[[], T], done: Callable[[T], bool], *, what: str) -> T:
    """Call ``probe`` until ``done(result)`` (bounded: WAIT_S and 1200 tries)."""
    deadline = time.monotonic() + WAIT_S
    result = probe()
    for _ in range(1200):
        if done(result) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
        result = probe()
    assert done(result), f"{what}: still {result!r} after {WAIT_S} s"
    return result


def name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def create_topic(address: str, topic: str, *, partitions: int = 1, rf: int = 1) -> Any:
    return admin(address).CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=topic, num_partitions=partitions, replication_factor=rf
                )
            ],
            timeout_ms=15000,
        ),
        timeout=30,
    )


def produce_request(topic: str, value: bytes = b"v") -> broker_pb2.ProduceRequest:
    batch = build_batch([Record(key=None, value=value)])
    return broker_pb2.ProduceRequest(
        acks=-1,
        timeout_ms=10000,
        partitions=[broker_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)],
    )


def fetch_request(topic: str) -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=1 << 20,
        partitions=[
            broker_pb2.FetchPartition(
                topic=topic,
                partition=0,
                fetch_offset=0,
                current_leader_epoch=-1,
                partition_max_bytes=1 << 20,
            )
        ],
    )


def produce(address: str, topic: str, value: bytes = b"v") -> broker_pb2.ProduceResponse:
    return broker(address).Produce(produce_request(topic, value), timeout=30)


def fetch(address: str, topic: str) -> broker_pb2.FetchResponse:
    return broker(address).Fetch(fetch_request(topic), timeout=30)


def metadata(address: str, *topics: str) -> broker_pb2.MetadataResponse:
    return broker(address).Metadata(
        broker_pb2.MetadataRequest(topics=list(topics), all_topics=not topics), timeout=30
    )
