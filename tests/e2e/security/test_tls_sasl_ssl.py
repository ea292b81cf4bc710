"""SASL_SSL end to end through the client library's kafka-python options and the CLI's
--command-config (sasl.jaas.config): TLS to the broker, SCRAM-SHA-512 inside it.

The client listener is SASL_SSL, the inter-broker one SSL; ``alice`` is written to
ZooKeeper before the broker starts (Kafka's bootstrap).  A client with the wrong
password or none is refused, the right one produces and consumes, and the password
appears neither in the broker's log nor in the CLI's output.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.consumer.consumer import Consumer
from headwater.client.producer.producer import Producer
from headwater.client.types import TopicPartition
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore

pytestmark = pytest.mark.e2e

PASSWORD = "sasl-ssl-Pw-90210"
SHA512 = ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    tmp = tmp_path_factory.mktemp("sasl-ssl")
    ca = CertificateAuthority.create()
    truststore = tmp / "ca.pem"
    truststore.write_bytes(ca.pem)
    keystore = write_keystore(tmp / "broker.pem", ca.issue("broker"))
    cluster = Cluster(
        data_dir=tmp / "cluster",
        listeners={"CLIENT": "SASL_SSL", "INTERNAL": "SSL"},
        overrides={
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(truststore),
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "offsets.topic.replication.factor": "1",
        },
        probe_credentials=grpc.ssl_channel_credentials(ca.pem),
    )
    with cluster:
        client = session.connect(cluster.zookeeper_connect)
        try:
            ScramCredentialStore(client).alter(
                "alice",
                upsertions={
                    SHA512: ScramCredential.from_password(
                        SHA512, PASSWORD, salt=b"sasl-ssl-salt", iterations=4096
                    )
                },
            )
        finally:
            session.close(client)
        # The brokers learn the credential through their ZooKeeper watch, a moment later.
        cluster.wait_for(
            lambda: all(knows_alice(b.address, truststore) for b in cluster.brokers.values()),
            what="every broker to know alice's credential",
        )
        yield cluster, truststore


def knows_alice(address: str, truststore: Path) -> bool:
    try:
        with Admin(address, **options(truststore)) as admin:
            admin.describe_cluster()
    except errors.SaslAuthenticationFailedError:
        return False
    return True


def options(truststore: Path, password: str | None = PASSWORD) -> dict[str, str]:
    out = {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(truststore),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
    }
    if password is not None:
        out["sasl_plain_password"] = password
    return out


def test_sasl_ssl_client_produces_and_consumes(sasl_ssl: tuple[Cluster, Path]) -> None:
    cluster, truststore = sasl_ssl
    with Admin(cluster.bootstrap, **options(truststore)) as admin:
        admin.create_topics([NewTopic("scram-tls", 1, 1)])
    with Producer(cluster.bootstrap, acks="all", **options(truststore)) as producer:
        offsets = [
            producer.send("scram-tls", b"v%d" % i).result(timeout=60).offset for i in range(50)
        ]
    assert offsets == list(range(50))
    consumer = Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
        **options(truststore),
    )
    try:
        consumer.assign([TopicPartition("scram-tls", 0)])
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == 50:
                break
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(50)]


def test_wrong_or_missing_credentials_are_refused(sasl_ssl: tuple[Cluster, Path]) -> None:
    cluster, truststore = sasl_ssl
    wrong = Admin(
        cluster.bootstrap,
        request_timeout_ms=5000,
        default_api_timeout_ms=5000,
        **options(truststore, "not-the-password"),
    )
    with wrong, pytest.raises(errors.HeadwaterError) as refused:
        wrong.list_topics()
    assert "not-the-password" not in str(refused.value)
    tls_only = Admin(
        cluster.bootstrap,
        request_timeout_ms=3000,
        default_api_timeout_ms=3000,
        security_protocol="SSL",
        ssl_cafile=str(truststore),
    )
    with tls_only, pytest.raises(errors.HeadwaterError):
        tls_only.list_topics()
    log = cluster.brokers[0].log_path.read_text(errors="replace")
    assert PASSWORD not in log and "not-the-password" not in log


def test_cli_with_a_jaas_config(sasl_ssl: tuple[Cluster, Path], tmp_path: Path) -> None:
    cluster, truststore = sasl_ssl
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={truststore}\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{PASSWORD}";\n'
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "headwater.cli.main",
            "topics",
            "list",
            "--bootstrap",
            cluster.bootstrap,
            "--command-config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert PASSWORD not in run.stdout + run.stderr
