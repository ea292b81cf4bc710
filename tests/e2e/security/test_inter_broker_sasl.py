"""Brokers authenticate each other with SCRAM-SHA-512 over a SASL_SSL inter-broker listener.

Three brokers, both listeners SASL_SSL, the ACL authorizer on with ``super.users`` the
brokers' own user and the admin (as Kafka requires: the broker's user needs CLUSTER
rights).  Each broker's login is ``listener.name.internal.scram-sha-512.sasl.jaas.config``;
``broker`` and ``admin`` are written to ZooKeeper before the brokers start.

- replication with acks=all and RF=3 survives a leader SIGKILL with nothing acknowledged
  lost (the followers' fetchers and the controller's calls run the SCRAM exchange, and
  re-authenticate when a peer restarts and, with ``connections.max.reauth.ms=4000``,
  before their sessions end);
- a broker restarted with the wrong inter-broker password cannot join replication: it
  stays out of the ISR and logs SASL_AUTHENTICATION_FAILED, without the password; with
  the right one it joins again;
- another SASL user, with no ClusterAction, is refused the brokers' own requests
  (CLUSTER_AUTHORIZATION_FAILED), the brokers' user is not;
- no password appears in any broker's log;
- a broker with no login, or one that does not parse, stops at once with a one-line
  error naming the key (and not the password).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic, ScramUpsertion
from headwater.client.transport import sasl
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.errors import ErrorCode
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing import Cluster
from headwater.testing.cluster import broker_command
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer, free_port
from headwater.v1 import control_pb2, control_pb2_grpc

from tests.e2e.security.failover import produce_across_leader_kill, read_from_survivors
from tests.e2e.security.scram_helpers import logs_in

pytestmark = pytest.mark.e2e

SHA512 = ScramMechanism.SCRAM_SHA_512
BROKER_PASSWORD = "inter-Broker-Pw-5150"
WRONG_PASSWORD = "not-The-Broker-Pw-8086"
ADMIN_PASSWORD = "admin-Pw-7734"
INTRUDER_PASSWORD = "intruder-Pw-1812"
JAAS_KEY = "listener.name.internal.scram-sha-512.sasl.jaas.config"
TOPIC = "sasl-replicated"


def jaas(password: str) -> str:
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="broker" password="{password}";'
    )


class Setup:
    def __init__(self, cluster: Cluster, truststore: Path) -> None:
        self.cluster = cluster
        self.ca_pem = truststore.read_bytes()
        self.client = {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(truststore),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "admin",
            "sasl_plain_password": ADMIN_PASSWORD,
        }


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer) -> Iterator[Setup]:
    tmp = tmp_path_factory.mktemp("inter-broker-sasl")
    ca = CertificateAuthority.create()
    truststore = tmp / "ca.pem"
    truststore.write_bytes(ca.pem)
    keystore = write_keystore(tmp / "broker.pem", ca.issue("broker"))
    cluster = Cluster(
        brokers=3,
        data_dir=tmp / "cluster",
        zookeeper=zookeeper.connect_string,
        listeners={"CLIENT": "SASL_SSL", "INTERNAL": "SASL_SSL"},
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(truststore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            JAAS_KEY: jaas(BROKER_PASSWORD),
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:broker;User:admin",
            "min.insync.replicas": "2",
            "default.replication.factor": "3",
            "offsets.topic.replication.factor": "3",
            "replica.lag.time.max.ms": "3000",
            # sessions end every few seconds: the brokers' channels renew them throughout
            "connections.max.reauth.ms": "4000",
        },
        probe_credentials=grpc.ssl_channel_credentials(ca.pem),
    )
    client = session.connect(cluster.zookeeper_connect)
    try:
        store = ScramCredentialStore(client)
        for user, password in (("broker", BROKER_PASSWORD), ("admin", ADMIN_PASSWORD)):
            store.alter(
                user,
                upsertions={
                    SHA512: ScramCredential.from_password(
                        SHA512, password, salt=f"{user}-salt".encode(), iterations=4096
                    )
                },
            )
    finally:
        session.close(client)
    with cluster:
        yield Setup(cluster, truststore)


@pytest.mark.parametrize(
    ("login", "message"),
    [
        (None, f"{JAAS_KEY} is missing"),
        (jaas(BROKER_PASSWORD).rstrip(";"), f"{JAAS_KEY}: the login module's options must end"),
    ],
)
def test_a_broker_without_a_usable_login_stops_with_one_line(
    tmp_path: Path, login: str | None, message: str
) -> None:
    overrides = {"inter.broker.listener.name": "INTERNAL"}
    if login is not None:
        overrides[JAAS_KEY] = login
    command = broker_command(
        0,
        port=free_port(),
        log_dir=tmp_path,
        zookeeper_connect="127.0.0.1:1",  # never reached: the config is refused first
        overrides=overrides,
        listeners={"CLIENT": free_port(), "INTERNAL": free_port()},
        protocols={"CLIENT": "PLAINTEXT", "INTERNAL": "SASL_PLAINTEXT"},
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert BROKER_PASSWORD not in done.stderr + done.stdout


def leader_and_isr_as(setup: Setup, username: str, password: str) -> ErrorCode:
    """A harmless LeaderAndIsr (broker epoch 0: stale) to broker 0's INTERNAL listener."""
    address = setup.cluster.brokers[0].address_of("INTERNAL")
    raw = grpc.secure_channel(address, grpc.ssl_channel_credentials(setup.ca_pem))
    channel = sasl.intercept(
        raw, credentials=sasl.SaslCredentials("SCRAM-SHA-512", username, password)
    )
    try:
        response = control_pb2_grpc.ControlStub(channel).LeaderAndIsr(
            control_pb2.LeaderAndIsrRequest(controller_id=0, controller_epoch=0, broker_epoch=0),
            timeout=10,
        )
    finally:
        channel.close()
    return ErrorCode(response.error)


def can_log_in(setup: Setup, username: str, password: str) -> bool:
    """True once broker 0's INTERNAL listener accepts this SCRAM login."""
    address = setup.cluster.brokers[0].address_of("INTERNAL")
    with grpc.secure_channel(address, grpc.ssl_channel_credentials(setup.ca_pem)) as channel:
        return logs_in(channel, username, password)


def test_inter_broker_requests_need_the_brokers_rights(setup: Setup) -> None:
    """Kafka's rule: the inter-broker principal (here the SASL user) must be a super user
    or hold ClusterAction; another authenticated user is refused."""
    with Admin(setup.cluster.bootstrap, **setup.client) as admin:
        admin.alter_user_scram_credentials(
            [ScramUpsertion("intruder", "SCRAM-SHA-512", 4096, INTRUDER_PASSWORD)]
        )
    # Broker 0 learns the new user through its ZooKeeper watch, a moment after the write.
    setup.cluster.wait_for(
        lambda: can_log_in(setup, "intruder", INTRUDER_PASSWORD),
        what="broker 0 to know intruder's credential",
    )
    assert (
        leader_and_isr_as(setup, "intruder", INTRUDER_PASSWORD)
        is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    assert leader_and_isr_as(setup, "broker", BROKER_PASSWORD) is ErrorCode.STALE_BROKER_EPOCH


def test_replication_over_sasl_ssl_survives_a_leader_kill(setup: Setup) -> None:
    cluster = setup.cluster
    with Admin(cluster.bootstrap, **setup.client) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    cluster.wait_for(lambda: len(cluster.isr_for(TOPIC, 0)) == 3, what="a full ISR")
    acked, leader = produce_across_leader_kill(cluster, TOPIC, setup.client, per_side=150)
    new_leader = cluster.leader_for(TOPIC, 0)
    assert new_leader is not None and new_leader != leader
    seen = read_from_survivors(cluster, TOPIC, setup.client, killed=leader, count=len(acked))
    assert seen == acked


def test_a_broker_with_the_wrong_password_cannot_join_replication(setup: Setup) -> None:
    """Runs after the kill above: the killed broker comes back with a wrong password."""
    cluster = setup.cluster
    down = [i for i, b in cluster.brokers.items() if not b.running]
    assert len(down) == 1, "runs after test_replication_over_sasl_ssl_survives_a_leader_kill"
    broker_id = down[0]
    log_path = cluster.brokers[broker_id].log_path
    cluster.broker_overrides[broker_id] = {JAAS_KEY: jaas(WRONG_PASSWORD)}
    cluster.start_broker(broker_id)

    deadline = time.monotonic() + 60
    while "SASL_AUTHENTICATION_FAILED" not in log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, "no SASL_AUTHENTICATION_FAILED in the broker log"
        time.sleep(0.5)
    assert broker_id not in cluster.isr_for(TOPIC, 0)
    assert WRONG_PASSWORD not in log_path.read_text(errors="replace")

    cluster.stop(broker_id)
    del cluster.broker_overrides[broker_id]
    cluster.start_broker(broker_id)
    cluster.wait_for(
        lambda: broker_id in cluster.isr_for(TOPIC, 0), what=f"broker {broker_id} in the ISR"
    )
    for broker in cluster.brokers.values():
        text = broker.log_path.read_text(errors="replace")
        for secret in (BROKER_PASSWORD, WRONG_PASSWORD, ADMIN_PASSWORD, INTRUDER_PASSWORD):
            assert secret not in text
    cluster.stop(broker_id)  # a process started in a test does not outlive it
