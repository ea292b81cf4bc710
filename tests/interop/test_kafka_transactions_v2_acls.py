"""Transaction version 2 through the Kafka listener with Kafka's authorizer on.

Two brokers; their gRPC listener is PLAINTEXT and its identity (``User:ANONYMOUS``, the
brokers' own and the test's administration) has CLUSTER_ACTION and the topics but no ACL
on any transactional id; the Kafka listener ``KTLS`` is mutual TLS, the certificate's CN
the user.  ``carol`` may WRITE and DESCRIBE the transactional ids starting ``tv2-``;
``dave`` only the topics.

* carol's raw transaction version 2 client writes Produce v12 to a partition on each
  broker, so one partition leader is not the transaction coordinator and adds the
  partition over gRPC with the brokers' identity (CLUSTER_ACTION, Kafka's broker form of
  AddPartitionsToTxn), not carol's; EndTxn v5 commits and bumps the epoch, and a
  ``read_committed`` consumer reads both records;
* dave's Produce v12 with a ``tv2-`` id is TRANSACTIONAL_ID_AUTHORIZATION_FAILED and adds
  nothing.
"""

from __future__ import annotations

import datetime
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from headwater.client import Admin, NewTopic
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation, PatternType, ResourceType
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer, free_port
from kio.schema.end_txn.v5.request import EndTxnRequest
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v5.request import InitProducerIdRequest
from kio.schema.produce.v12.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.e2e.security.acl_helpers import INTER_BROKER, acl, secured_cluster

from . import test_kafka_transactions_v2 as v2
from .test_kafka_listener import _exchange
from .test_kafka_transactions import grpc_read

pytestmark = pytest.mark.e2e

TIMEOUT_S = 30


@dataclass
class Door:
    cluster: Cluster
    ports: dict[int, int]
    truststore: Path
    ca: CertificateAuthority
    tmp: Path

    def connect(self, port: int, user: str) -> ssl.SSLSocket:
        keystore = self.tmp / f"{user}.pem"
        if not keystore.exists():
            write_keystore(keystore, self.ca.issue(user))
        context = ssl.create_default_context(cafile=str(self.truststore))
        context.load_cert_chain(str(keystore))
        raw = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        sock.settimeout(TIMEOUT_S)
        return sock


def _acls() -> list[Any]:
    anon_topics = acl(ResourceType.TOPIC, "*", AclOperation.ALL)
    out = [INTER_BROKER, anon_topics]
    for user in ("carol", "dave"):
        out.append(acl(ResourceType.TOPIC, "*", AclOperation.ALL, principal=f"User:{user}"))
    for op in (AclOperation.WRITE, AclOperation.DESCRIBE):
        out.append(
            acl(
                ResourceType.TRANSACTIONAL_ID,
                "tv2-",
                op,
                principal="User:carol",
                pattern=PatternType.PREFIXED,
            )
        )
    return out


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Door]:
    tmp = tmp_path_factory.mktemp("kafka-txn-v2-acls")
    ca = CertificateAuthority.create()
    truststore = tmp / "ca.pem"
    truststore.write_bytes(ca.pem)
    keystore = write_keystore(tmp / "broker.pem", ca.issue("broker"))
    ports = {b: free_port() for b in range(2)}
    with (
        ZooKeeperServer(tmp / "zookeeper") as zookeeper,
        secured_cluster(
            zookeeper.connect_string,
            tmp / "cluster",
            brokers=2,
            initial=_acls(),
            broker_overrides={
                b: {"kafka.listeners": f"KTLS://127.0.0.1:{port}"} for b, port in ports.items()
            },
            overrides={
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,KTLS:SSL",
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.location": str(truststore),
                "listener.name.ktls.ssl.client.auth": "required",
                "listener.name.ktls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/",
                "transaction.state.log.num.partitions": "3",
                "transaction.state.log.replication.factor": "2",
                "transaction.state.log.min.isr": "1",
                "offsets.topic.replication.factor": "1",
            },
        ) as (cluster, _writer),
    ):
        yield Door(cluster, ports, truststore, ca, tmp)


def _topic_on_both_brokers(cluster: Cluster) -> str:
    name = f"tv2acl-{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 2, 1)], timeout_ms=15000)
    for p in range(2):
        cluster.wait_for(lambda p=p: cluster.leader_for(name, p) is not None, what="a leader")
    assert {cluster.leader_for(name, p) for p in range(2)} == {0, 1}
    return name


def _call(door: Door, port: int, user: str, request: Any) -> Any:
    with door.connect(port, user) as sock:
        return _exchange(sock, 1, request)


def _produce(door: Door, user: str, tid: str, topic: str, partition: int, batch: bytes) -> int:
    leader = door.cluster.leader_for(topic, partition)
    assert leader is not None
    request = ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(index=partition, records=batch),),
            ),
        ),
    )
    r = _call(door, door.ports[leader], user, request)
    return int(r.responses[0].partition_responses[0].error_code)


def test_the_leaders_add_uses_the_brokers_identity(door: Door) -> None:
    topic, tid = _topic_on_both_brokers(door.cluster), f"tv2-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + TIMEOUT_S
    while (
        found := _call(door, door.ports[0], "carol", FindCoordinatorRequest(key=tid, key_type=1))
    ).error_code != 0:
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
    coordinator = int(found.port)
    init = InitProducerIdRequest(
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )
    while (r := _call(door, coordinator, "carol", init)).error_code != 0:
        assert time.monotonic() < deadline, r
        time.sleep(0.2)
    pid, epoch = int(r.producer_id), int(r.producer_epoch)
    for partition in range(2):
        batch = v2._txn_batch(f"p{partition}".encode(), pid, epoch, 0)
        assert _produce(door, "carol", tid, topic, partition, batch) == 0, partition
    ended = _call(
        door,
        coordinator,
        "carol",
        EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True),
    )
    assert (ended.error_code, ended.producer_epoch) == (0, epoch + 1)
    assert sorted(grpc_read(door.cluster, topic, 2, expect=2)) == [b"p0", b"p1"]

    # dave may write the topic but not the transactional id.
    dave = f"tv2-{uuid.uuid4().hex[:8]}"
    code = _produce(door, "dave", dave, topic, 0, v2._txn_batch(b"d", pid + 1, 0, 0))
    assert code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert sorted(grpc_read(door.cluster, topic, 2, expect=3)) == [b"p0", b"p1"]
