"""Kafka's authorizer with principals from client certificates: a 2-broker cluster whose
CLIENT and INTERNAL listeners are SSL with certificates required, subjects mapped to
``User:<CN>`` by ``ssl.principal.mapping.rules``; the brokers' own certificate is
``User:broker``, a super user, so replication and the controller need no ACL (Kafka's
usual setup).  Alice's and Bob's certificates get what their ACLs give, no more."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import broker_pb2, broker_pb2_grpc

from tests.e2e.security.acl_helpers import AUTHORIZER, AclWriter, acl, eventually

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER


class Pki:
    def __init__(self, root: Path) -> None:
        self.ca = CertificateAuthority.create()
        self.truststore = root / "ca.pem"
        self.truststore.write_bytes(self.ca.pem)
        self.broker = write_keystore(root / "broker.pem", self.ca.issue("broker"))
        self.users = {
            u: write_keystore(root / f"{u}.pem", self.ca.issue(u)) for u in ("alice", "bob")
        }

    def options(self, user: str) -> dict[str, str]:
        keystore = str(self.users[user])
        return {
            "security_protocol": "SSL",
            "ssl_cafile": str(self.truststore),
            "ssl_certfile": keystore,
            "ssl_keyfile": keystore,
        }

    def credentials(self, keystore: Path) -> grpc.ChannelCredentials:
        data = keystore.read_bytes()
        return grpc.ssl_channel_credentials(self.ca.pem, data, data)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("acl-pki"))


@pytest.fixture(scope="module")
def cluster(
    pki: Pki, zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, AclWriter]]:
    c = Cluster(
        brokers=2,
        data_dir=tmp_path_factory.mktemp("acl-mtls"),
        zookeeper=zookeeper.connect_string,
        listeners={"CLIENT": "SSL", "INTERNAL": "SSL"},
        overrides={
            **AUTHORIZER,
            "super.users": "User:broker",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.client.auth": "required",
            "ssl.truststore.location": str(pki.truststore),
            "ssl.keystore.location": str(pki.broker),
            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/",
            "default.replication.factor": "2",
        },
        probe_credentials=pki.credentials(pki.broker),
    )
    writer = AclWriter(zookeeper.connect_string + c.chroot)
    try:
        writer.add(acl(CLUSTER, "kafka-cluster", Op.CREATE, principal="User:alice"))
        with c:
            yield c, writer
    finally:
        writer.close()


def produce(pki: Pki, address: str, user: str, topic: str) -> int:
    with grpc.secure_channel(address, pki.credentials(pki.users[user])) as channel:
        response = broker_pb2_grpc.BrokerStub(channel).Produce(
            broker_pb2.ProduceRequest(
                acks=-1,
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


def test_certificate_principals_get_what_their_acls_give(
    cluster: tuple[Cluster, AclWriter], pki: Pki
) -> None:
    c, writer = cluster
    with Admin(c.bootstrap, **pki.options("alice")) as alice:
        eventually(
            lambda: alice.create_topics([NewTopic("ledger", 1, 2)], raise_on_error=False)["ledger"],
            lambda e: e is None or isinstance(e, errors.TopicAlreadyExistsError),
            what="alice may create topics",
        )
    c.wait_for(lambda: c.leader_for("ledger", 0) is not None, what="a leader")
    leader = c.brokers[c.leader_for("ledger", 0) or 0].address
    assert produce(pki, leader, "bob", "ledger") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert produce(pki, leader, "alice", "ledger") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    writer.add(acl(TOPIC, "ledger", Op.WRITE, principal="User:alice"))
    # acks=all: the follower (User:broker, a super user) replicates over mTLS.
    eventually(
        lambda: produce(pki, leader, "alice", "ledger"),
        lambda e: e == ErrorCode.NONE,
        what="alice may write",
    )
    assert produce(pki, leader, "bob", "ledger") == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # The leader has the ACL (the produce above); the Metadata call goes to the first
    # bootstrap broker, which may be the other one and learn of it a moment later.
    with Admin(c.bootstrap, **pki.options("alice")) as alice:
        eventually(alice.list_topics, lambda topics: "ledger" in topics, what="alice sees ledger")
    with Admin(c.bootstrap, **pki.options("bob")) as bob:
        assert "ledger" not in bob.list_topics()
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            bob.create_acls([acl(TOPIC, "ledger", Op.ALL, principal="User:bob")])
