"""SCRAM-SHA-256 between brokers over SASL_PLAINTEXT, with a separate control plane listener.

Two brokers; replication runs on INTERNAL and the controller's calls on CONTROL, both
SASL_PLAINTEXT with ``sasl.mechanism.inter.broker.protocol=SCRAM-SHA-256`` and a login
per listener (``listener.name.internal.scram-sha-256.sasl.jaas.config`` as ``broker``,
``listener.name.control.scram-sha-256.sasl.jaas.config`` as ``controller``).  A broker
is ready only once the controller's metadata reached it, and a topic with RF=2 gets a
full ISR and takes acks=all writes, so both listeners carried authenticated calls; the
peers' logs show both users authenticated, and neither password.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.producer.producer import Producer
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.e2e

SHA256 = ScramMechanism.SCRAM_SHA_256
PASSWORDS = {"broker": "internal-Pw-2112", "controller": "control-Pw-1984"}
TOPIC = "sha256-replicated"


def jaas(user: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{PASSWORDS[user]}";'
    )


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer) -> Iterator[Cluster]:
    c = Cluster(
        brokers=2,
        zookeeper=zookeeper.connect_string,
        listeners={
            "CLIENT": "PLAINTEXT",
            "INTERNAL": "SASL_PLAINTEXT",
            "CONTROL": "SASL_PLAINTEXT",
        },
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROL",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.internal.scram-sha-256.sasl.jaas.config": jaas("broker"),
            "listener.name.control.scram-sha-256.sasl.jaas.config": jaas("controller"),
            "min.insync.replicas": "2",
            "offsets.topic.replication.factor": "1",
        },
    )
    client = session.connect(c.zookeeper_connect)
    try:
        store = ScramCredentialStore(client)
        for user, password in PASSWORDS.items():
            store.alter(
                user,
                upsertions={
                    SHA256: ScramCredential.from_password(
                        SHA256, password, salt=f"{user}-salt".encode(), iterations=4096
                    )
                },
            )
    finally:
        session.close(client)
    with c:
        yield c


def test_scram_sha_256_on_the_inter_broker_and_control_plane_listeners(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 2)])
    cluster.wait_for(lambda: len(cluster.isr_for(TOPIC, 0)) == 2, what="a full ISR")
    with Producer(cluster.bootstrap, acks="all") as producer:
        for i in range(20):
            producer.send(TOPIC, b"%d" % i).result(timeout=30)
    logs = "".join(b.log_path.read_text(errors="replace") for b in cluster.brokers.values())
    assert "succeeded: User:broker" in logs  # the follower's fetcher, on INTERNAL
    assert "succeeded: User:controller" in logs  # the controller, on CONTROL
    for password in PASSWORDS.values():
        assert password not in logs
