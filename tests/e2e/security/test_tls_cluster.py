"""Real brokers with TLS everywhere: a 3-broker cluster whose CLIENT and INTERNAL listeners
are both SSL with client certificates required (mTLS between brokers too).

Covers: clients without a certificate, with an untrusted or an expired one are refused;
the registration carries every endpoint and the protocol map; Metadata answers the
endpoints of the listener asked; replication over mTLS survives a leader SIGKILL with
nothing acknowledged (acks=all) lost; the CLI's --command-config; no key material in
the logs or in DescribeConfigs (the INTERNAL listener's key is given inline).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, IssuedCertificate, write_keystore

from tests.e2e.security.failover import produce_across_leader_kill, read_from_survivors

pytestmark = pytest.mark.e2e


class Pki:
    """A CA, the brokers' keystore, client keystores (good, untrusted, expired)."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.ca = CertificateAuthority.create()
        rogue = CertificateAuthority.create("Rogue CA")
        self.truststore = root / "ca.pem"
        self.truststore.write_bytes(self.ca.pem)
        self.broker = self.ca.issue("broker", unit="Brokers")
        self.broker_keystore = write_keystore(root / "broker.pem", self.broker)
        self.alice = write_keystore(root / "alice.pem", self.ca.issue("alice", unit="Eng"))
        self.untrusted = write_keystore(root / "rogue.pem", rogue.issue("alice", unit="Eng"))
        self.expired = write_keystore(root / "expired.pem", self.ca.issue_expired("alice"))

    def client(self, keystore: Path | None) -> dict[str, str]:
        """kafka-python options of an SSL client with ``keystore`` as its certificate."""
        options = {"security_protocol": "SSL", "ssl_cafile": str(self.truststore)}
        if keystore is not None:
            options |= {"ssl_certfile": str(keystore), "ssl_keyfile": str(keystore)}
        return options


def probe(pki: Pki, keystore: Path) -> grpc.ChannelCredentials:
    data = keystore.read_bytes()
    return grpc.ssl_channel_credentials(pki.ca.pem, data, data)


def key_body(issued: IssuedCertificate) -> str:
    """A line of the base64 body of the private key (what a leak would show)."""
    return issued.key_pem.decode().splitlines()[2]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_trio(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    overrides = {
        "inter.broker.listener.name": "INTERNAL",
        "ssl.client.auth": "required",
        "ssl.truststore.location": str(pki.truststore),
        "listener.name.client.ssl.keystore.location": str(pki.broker_keystore),
        "listener.name.client.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/",
        # the INTERNAL listener's keystore inline: a secret DescribeConfigs must hide
        "listener.name.internal.ssl.keystore.certificate.chain": pki.broker.chain_pem.decode(),
        "listener.name.internal.ssl.keystore.key": pki.broker.key_pem.decode(),
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
    }
    with Cluster(
        brokers=3,
        data_dir=tmp_path_factory.mktemp("tls-trio"),
        listeners={"CLIENT": "SSL", "INTERNAL": "SSL"},
        overrides=overrides,
        probe_credentials=probe(pki, pki.alice),
    ) as cluster:
        yield cluster


def test_clients_without_a_good_certificate_are_refused(tls_trio: Cluster, pki: Pki) -> None:
    for keystore in (None, pki.untrusted, pki.expired):
        with (
            Admin(
                tls_trio.bootstrap,
                request_timeout_ms=3000,
                default_api_timeout_ms=3000,
                **pki.client(keystore),
            ) as admin,
            pytest.raises(errors.HeadwaterError) as refused,
        ):
            admin.list_topics()
        assert isinstance(refused.value, (errors.NetworkError, errors.RequestTimedOutError))
    plain = Admin(tls_trio.bootstrap, request_timeout_ms=3000, default_api_timeout_ms=3000)
    with plain, pytest.raises(errors.HeadwaterError):  # plaintext to a TLS port
        plain.list_topics()


def test_registration_and_metadata_carry_the_listener_endpoints(
    tls_trio: Cluster, pki: Pki
) -> None:
    for broker_id, broker in tls_trio.brokers.items():
        raw = json.loads(tls_trio.zk.client.get(f"/brokers/ids/{broker_id}")[0])
        assert raw["endpoints"] == [
            f"CLIENT://127.0.0.1:{broker.ports['CLIENT']}",
            f"INTERNAL://127.0.0.1:{broker.ports['INTERNAL']}",
        ]
        assert raw["listener_security_protocol_map"] == {"CLIENT": "SSL", "INTERNAL": "SSL"}
        assert raw["port"] == broker.ports["INTERNAL"]  # where the other brokers connect
    for listener in ("CLIENT", "INTERNAL"):
        with Admin(tls_trio.bootstrap_for(listener), **pki.client(pki.alice)) as admin:
            ports = {b.broker_id: b.port for b in admin.describe_cluster().brokers}
        assert ports == {i: b.ports[listener] for i, b in tls_trio.brokers.items()}


def test_cli_command_config_and_no_secret_in_describe_or_logs(
    tls_trio: Cluster, pki: Pki, tmp_path: Path
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={pki.truststore}\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.keystore.location={pki.alice}\n"
        "ssl.keystore.type=PEM\n"
    )
    cli = [sys.executable, "-m", "headwater.cli.main"]
    common = ["--bootstrap", tls_trio.bootstrap, "--command-config", str(config)]
    listed = subprocess.run(
        [*cli, "topics", "list", *common], capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    refused = subprocess.run(
        [*cli, "topics", "list", "--bootstrap", tls_trio.bootstrap, "--request-timeout-ms", "2000"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    with Admin(tls_trio.bootstrap, **pki.client(pki.alice)) as admin:
        entries = admin.describe_configs(brokers=[0])["broker:0"]
    secret = entries["listener.name.internal.ssl.keystore.key"]
    assert secret.is_sensitive and secret.value in ("", None)
    assert entries["listener.name.internal.ssl.keystore.certificate.chain"].value  # not secret
    body = key_body(pki.broker)
    for broker in tls_trio.brokers.values():
        assert body not in broker.log_path.read_text(errors="replace")


def test_replication_over_mtls_survives_a_leader_kill(tls_trio: Cluster, pki: Pki) -> None:
    """Last in the module: the killed broker stays down (a restart would outlive the test)."""
    topic = "tls-replicated"
    client = pki.client(pki.alice)
    with Admin(tls_trio.bootstrap, **client) as admin:
        admin.create_topics([NewTopic(topic, 1, 3)])
    tls_trio.wait_for(lambda: len(tls_trio.isr_for(topic, 0)) == 3, what="a full ISR")
    acked, leader = produce_across_leader_kill(tls_trio, topic, client, per_side=200)
    new_leader = tls_trio.leader_for(topic, 0)
    assert new_leader is not None and new_leader != leader
    seen = read_from_survivors(tls_trio, topic, client, killed=leader, count=len(acked))
    assert seen == acked
