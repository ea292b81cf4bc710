"""Two authenticated principals on a SASL_PLAINTEXT listener (SCRAM users alice, bob and
admin bootstrapped into ZooKeeper), Kafka's authorizer on: each is allowed exactly what its
ACLs give, ``User:*`` ACLs apply to both and a DENY for one beats them, Metadata shows each
the topics it may describe, super.users need no ACL, and the Admin ACL calls are refused
to a principal without ALTER on the cluster.  The brokers talk over a PLAINTEXT listener
as User:ANONYMOUS with CLUSTER_ACTION."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.transport import sasl
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import AclPermissionType, ResourceType
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing.cluster import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import broker_pb2, broker_pb2_grpc

from tests.e2e.security.acl_helpers import AUTHORIZER, INTER_BROKER, AclWriter, acl, eventually

SHA512 = ScramMechanism.SCRAM_SHA_512
PASSWORDS = {"alice": "alice-Secret-1", "bob": "bob-Secret-2", "admin": "admin-Secret-3"}
TOPIC = ResourceType.TOPIC


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[tuple[Cluster, AclWriter]]:
    data_dir: Path = tmp_path_factory.mktemp("acl-principals")
    c = Cluster(
        brokers=1,
        data_dir=data_dir,
        zookeeper=zookeeper.connect_string,
        listeners={"CLIENT": "SASL_PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        overrides={
            **AUTHORIZER,
            "inter.broker.listener.name": "INTERNAL",
            "super.users": "User:admin",
        },
    )
    client = session.connect(c.zookeeper_connect)
    try:
        store = ScramCredentialStore(client)
        for user, password in PASSWORDS.items():
            store.alter(
                user,
                upsertions={
                    SHA512: ScramCredential.from_password(
                        SHA512, password, salt=f"salt-{user}".encode(), iterations=4096
                    )
                },
            )
    finally:
        session.close(client)
    writer = AclWriter(c.zookeeper_connect)
    try:
        writer.add(INTER_BROKER)
        with c:
            yield c, writer
    finally:
        writer.close()


def channel_as(cluster: Cluster, user: str) -> grpc.Channel:
    address = cluster.brokers[0].address_of("CLIENT")
    raw = grpc.insecure_channel(address)
    interceptor = sasl.SaslClientInterceptor(
        raw,
        credentials=sasl.SaslCredentials("SCRAM-SHA-512", user, PASSWORDS[user]),
        address=address,
    )
    return grpc.intercept_channel(raw, interceptor)


def admin_as(cluster: Cluster, user: str) -> Admin:
    return Admin(
        cluster.bootstrap_for("CLIENT"),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username=user,
        sasl_plain_password=PASSWORDS[user],
        request_timeout_ms=10000,
        default_api_timeout_ms=20000,
    )


def produce(channel: grpc.Channel, topic: str) -> int:
    response = broker_pb2_grpc.BrokerStub(channel).Produce(
        broker_pb2.ProduceRequest(
            acks=1,
            timeout_ms=10000,
            partitions=[
                broker_pb2.ProducePartitionData(
                    topic=topic, partition=0, records=build_batch([Record(None, b"v")])
                )
            ],
        ),
        timeout=30,
    )
    return int(response.partitions[0].error)


def visible(channel: grpc.Channel) -> set[str]:
    response = broker_pb2_grpc.BrokerStub(channel).Metadata(
        broker_pb2.MetadataRequest(all_topics=True), timeout=30
    )
    return {t.name for t in response.topics}


def test_each_principal_gets_what_its_acls_give(cluster: tuple[Cluster, AclWriter]) -> None:
    c, writer = cluster
    with admin_as(c, "admin") as admin:  # a super user: no ACL needed
        admin.create_topics([NewTopic("payroll", 1, 1), NewTopic("public", 1, 1)])
        admin.create_acls(
            [
                acl(TOPIC, "payroll", Op.WRITE, principal="User:alice"),
                acl(TOPIC, "public", Op.DESCRIBE, principal="User:*"),
            ]
        )
    alice, bob = channel_as(c, "alice"), channel_as(c, "bob")
    assert produce(alice, "payroll") == ErrorCode.NONE
    assert produce(bob, "payroll") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert visible(alice) == {"payroll", "public"}  # WRITE implies DESCRIBE
    assert visible(bob) == {"public"}
    # A DENY for bob beats the User:* ALLOW; alice keeps it.
    writer.add(acl(TOPIC, "public", Op.DESCRIBE, AclPermissionType.DENY, principal="User:bob"))
    eventually(lambda: visible(bob), lambda names: names == set(), what="bob denied")
    assert visible(alice) == {"payroll", "public"}


def test_acl_calls_need_alter_on_the_cluster(cluster: tuple[Cluster, AclWriter]) -> None:
    c, writer = cluster
    before = writer.all()
    with admin_as(c, "bob") as bob, pytest.raises(errors.ClusterAuthorizationFailedError):
        bob.create_acls([acl(TOPIC, "payroll", Op.ALL, principal="User:bob")])
    assert writer.all() == before
    with admin_as(c, "admin") as admin:
        admin.create_acls(
            [acl(ResourceType.CLUSTER, "kafka-cluster", Op.ALTER, principal="User:bob")]
        )
    with admin_as(c, "bob") as bob:
        assert bob.create_acls([acl(TOPIC, "payroll", Op.READ, principal="User:bob")]) == [None]
