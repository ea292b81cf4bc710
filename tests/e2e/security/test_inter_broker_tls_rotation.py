"""A broker's own client certificate towards other brokers rotates without a restart.

Two brokers reach each other on an SSL listener that requires client certificates
(mTLS).  Everything starts on CA 1.  Then broker A's keystore is replaced by a
certificate from CA 2 (its truststore now holds both CAs), and broker B is given a
CA 2 certificate and a truststore of CA 2 *alone*, and restarted: from then on B
accepts a connection only from a client presenting a CA 2 certificate, so every new
connection A opens to B (the controller's calls, A's fetcher once B leads again)
proves A presents its rotated certificate, which A read from disk without a restart.
B leading again and an acks=all produce with ``min.insync.replicas=2`` succeeding
means A fetched from B with the new certificate.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.producer.producer import Producer
from headwater.client.types import TopicPartition
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.e2e

TOPIC = "rotated-peer"


class Pki:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca1 = CertificateAuthority.create("CA 1")
        self.ca2 = CertificateAuthority.create("CA 2")

    def keystore(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}.pem"

    def truststore(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}-trust.pem"


@pytest.fixture
def pair(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[tuple[Cluster, Pki]]:
    pki = Pki(tmp_path)
    per_broker: dict[int, dict[str, str]] = {}
    for broker_id in (0, 1):
        write_keystore(pki.keystore(broker_id), pki.ca1.issue(f"broker-{broker_id}-v1"))
        pki.truststore(broker_id).write_bytes(pki.ca1.pem)
        per_broker[broker_id] = {
            "listener.name.internal.ssl.keystore.location": str(pki.keystore(broker_id)),
            "listener.name.internal.ssl.truststore.location": str(pki.truststore(broker_id)),
        }
    cluster = Cluster(
        brokers=2,
        data_dir=tmp_path / "cluster",
        zookeeper=zookeeper.connect_string,
        listeners={"CLIENT": "PLAINTEXT", "INTERNAL": "SSL"},
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.internal.ssl.client.auth": "required",
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "1",
            "replica.lag.time.max.ms": "3000",
        },
        broker_overrides=per_broker,
    )
    with cluster:
        yield cluster, pki


def produce(cluster: Cluster, prefix: bytes) -> None:
    with Producer(cluster.bootstrap, acks="all", request_timeout_ms=15000) as producer:
        for i in range(20):
            producer.send(TOPIC, b"%s-%d" % (prefix, i)).result(timeout=30)


def test_new_connections_to_a_restarted_peer_present_the_rotated_certificate(
    pair: tuple[Cluster, Pki],
) -> None:
    cluster, pki = pair
    a = cluster.controller_id()
    assert a is not None
    b = 1 - a
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, replica_assignment={0: [b, a]})])
    cluster.wait_for(lambda: set(cluster.isr_for(TOPIC, 0)) == {a, b}, what="a full ISR")
    assert cluster.leader_for(TOPIC, 0) == b
    produce(cluster, b"v1")

    write_keystore(pki.keystore(a), pki.ca2.issue(f"broker-{a}-v2"))
    pki.truststore(a).write_bytes(pki.ca1.pem + pki.ca2.pem)
    write_keystore(pki.keystore(b), pki.ca2.issue(f"broker-{b}-v2"))
    pki.truststore(b).write_bytes(pki.ca2.pem)  # B accepts CA 2 client certificates only
    cluster.restart(b)

    cluster.wait_for(lambda: set(cluster.isr_for(TOPIC, 0)) == {a, b}, what="B back in the ISR")
    with Admin(cluster.bootstrap) as admin:
        admin.elect_leaders([TopicPartition(TOPIC, 0)])
    cluster.wait_for(lambda: cluster.leader_for(TOPIC, 0) == b, what="B leading again")
    produce(cluster, b"v2")  # acks=all, min.insync.replicas=2: A fetched from B
    assert set(cluster.isr_for(TOPIC, 0)) == {a, b}
    a_log = cluster.brokers[a].log_path.read_text(errors="replace")
    assert "reloaded the client keystore/truststore" in a_log
    cluster.stop(b)  # a process started in a test does not outlive it
