"""The chart's TLS configuration is real: rendered brokers over mTLS, the operator as a
super user, and Users it creates that really authenticate and are really authorized.

`helm template` renders the chart with ``tls.enabled`` (each ``tls.clientAuthentication``)
and ``zookeeper.external`` pointing at a real local ZooKeeper.  The brokers' container
and server.properties are taken as rendered; tests/e2e/deploy/localize.py changes host
names, ports and paths only, and here the keystore and truststore files: the pods'
certificates name Kubernetes DNS names, so the test issues its own with the same
subjects (CN=hw-headwater-broker for the brokers, CN=hw-headwater-operator for the
operator, from one test CA) and 127.0.0.1 as their address.  Three brokers replicate over
the INTERNAL listener (SSL, client certificates required), elect a controller and serve:

* the operator's Admin, built as the operator builds it from the environment the chart
  gives it (HEADWATER_SECURITY_PROTOCOL=SSL and its certificate on INTERNAL), is a super
  user: it creates topics with no ACL;
* the operator's User reconciler, with the real Admin and the test CA as clients CA,
  creates a User (tls: a certificate signed by the clients CA; scram-sha-512: a SCRAM
  credential whose password is in the Secret) with ACLs; a client using exactly what the
  Secret holds produces and consumes on the CLIENT listener, and Kafka's own client
  (kafka-python) with the same Secret on the KAFKA listener (SSL with client
  certificates, or SASL_SSL with SCRAM-SHA-512, as rendered); a client with a certificate
  of the same CA but no ACLs, or with a wrong password, is refused on both;
* deleting the User removes its ACLs and credential: the same client is refused again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import headwater
import pytest
from cryptography.hazmat.primitives import serialization
from headwater import errors
from headwater.testing.cluster import is_healthy
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer, free_port, free_ports
from headwater_operator.config import OperatorConfig
from headwater_operator.user_reconciler import UserReconciler, UserResource
from headwater_operator.users_kube import AdminUsers, PemClientsCa, new_password

from tests.e2e.deploy import localize
from tests.e2e.deploy.pods import LocalPod, image_environment, wait_for
from tests.unit.deploy import chart
from tests.unit.operator.user_fakes import FakeSecrets

pytestmark = pytest.mark.e2e

BROKERS = 3
LISTENERS = ("INTERNAL", "CLIENT")


class Running(NamedTuple):
    pods: list[LocalPod]
    internal: str
    client: str
    kafka: str
    tls: Path
    ca: CertificateAuthority
    operator_env: dict[str, str]
    scram: bool


def write_tls(tmp: Path) -> tuple[Path, CertificateAuthority]:
    ca = CertificateAuthority.create("hw-headwater-ca")
    tls = tmp / "tls"
    tls.mkdir()
    (tls / "ca.crt").write_bytes(ca.pem)
    write_keystore(tls / "tls-combined.pem", ca.issue("hw-headwater-broker"))
    operator = ca.issue("hw-headwater-operator")
    (tls / "operator.crt").write_bytes(operator.chain_pem)
    (tls / "operator.key").write_bytes(operator.key_pem)
    clients_ca = tls / "clients-ca"
    clients_ca.mkdir()
    (clients_ca / "tls.crt").write_bytes(ca.pem)
    (clients_ca / "tls.key").write_bytes(
        ca.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return tls, ca


def operator_environment(objs: list[chart.Obj], tls: Path, internal: str) -> dict[str, str]:
    """The operator container's env as rendered, its mounted paths pointed at ``tls``."""
    (deployment,) = chart.component(objs, "Deployment", "operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    paths = {
        "/etc/headwater/tls/ca.crt": tls / "ca.crt",
        "/etc/headwater/tls/tls.crt": tls / "operator.crt",
        "/etc/headwater/tls/tls.key": tls / "operator.key",
        "/etc/headwater/clients-ca": tls / "clients-ca",
    }
    out = {k: str(paths.get(v, v)) for k, v in env.items()}
    out["HEADWATER_BOOTSTRAP"] = internal
    return out


@pytest.fixture(params=["tls", "scram-sha-512"])
def brokers(
    request: pytest.FixtureRequest, zookeeper: ZooKeeperServer, tmp_path: Path
) -> Iterator[Running]:
    chart.require_helm()
    chroot = f"/hw-chart-tls-{uuid.uuid4().hex[:10]}"
    values = {
        "zookeeper": {"external": zookeeper.chroot_connect_string(chroot)},
        "brokers": {"replicas": BROKERS},
        "tls": {"enabled": True, "clientAuthentication": request.param},
    }
    objs = chart.render(values)
    container = chart.broker_container(objs)
    properties = chart.broker_properties(objs)
    sts = chart.broker_statefulset(objs)["metadata"]["name"]
    tls, ca = write_tls(tmp_path)
    tls_files = {
        "ssl.keystore.location": tls / "tls-combined.pem",
        "ssl.truststore.location": tls / "ca.crt",
    }
    distinct = iter(free_ports((len(LISTENERS) + 1) * BROKERS))
    ports = [{name: next(distinct) for name in LISTENERS} for _ in range(BROKERS)]
    kafka_ports = [next(distinct) for _ in range(BROKERS)]
    pods: list[LocalPod] = []
    for i in range(BROKERS):
        hostname = f"{sts}-{i}"
        home = tmp_path / hostname
        (home / "data").mkdir(parents=True)
        config = home / "server.properties"
        config.write_text(
            localize.localize_properties(
                properties,
                listener_ports=ports[i],
                metrics_port=free_port(),
                log_dir=home / "data",
                tls_files=tls_files,
                kafka_port=kafka_ports[i],
            ),
            encoding="utf-8",
        )
        env = chart.broker_env(objs, hostname=hostname, pod_ip=localize.LOCALHOST)
        argv = localize.local_command(container["command"]) + localize.localize_args(
            container["args"], config_path=config
        )
        pods.append(
            LocalPod(hostname, argv=argv, env=image_environment(env), log_path=home / "log")
        )
    internal = ",".join(f"127.0.0.1:{p['INTERNAL']}" for p in ports)
    client = ",".join(f"127.0.0.1:{p['CLIENT']}" for p in ports)
    kafka = ",".join(f"127.0.0.1:{p}" for p in kafka_ports)
    try:
        for pod in pods:
            pod.start(tmp_path)
        yield Running(
            pods,
            internal,
            client,
            kafka,
            tls,
            ca,
            operator_environment(objs, tls, internal),
            request.param == "scram-sha-512",
        )
    finally:
        for pod in pods:
            pod.stop(grace_s=5.0)


def test_rendered_tls_config_is_what_the_tests_start(zookeeper: ZooKeeperServer) -> None:
    """Only addresses and paths (and the two TLS files) differ from what the pods get."""
    chart.require_helm()
    values = {"zookeeper": {"external": zookeeper.connect_string}, "tls": {"enabled": True}}
    text = chart.broker_properties(chart.render(values))
    before = chart.parse_properties(text)
    after = chart.parse_properties(
        localize.localize_properties(
            text,
            listener_ports={"INTERNAL": 1111, "CLIENT": 2222},
            metrics_port=3333,
            log_dir=Path("/tmp/x"),
            tls_files={k: Path("/tmp/tls") / k for k in localize.TLS_PATH_KEYS},
            kafka_port=4444,
        )
    )
    assert localize.changed_keys(before, after) == (
        localize.ADDRESS_KEYS
        | localize.KAFKA_ADDRESS_KEYS
        | localize.PATH_KEYS
        | localize.TLS_PATH_KEYS
    )
    assert after["listeners"] == "INTERNAL://127.0.0.1:1111,CLIENT://127.0.0.1:2222"
    assert after["kafka.listeners"] == "KAFKA://127.0.0.1:4444"
    assert after["listener.security.protocol.map"] == before["listener.security.protocol.map"]


def wait_healthy(running: Running) -> None:
    ca = (running.tls / "ca.crt").read_bytes()
    key = (running.tls / "operator.key").read_bytes()
    chain = (running.tls / "operator.crt").read_bytes()
    credentials = grpc.ssl_channel_credentials(ca, key, chain)
    addresses = running.internal.split(",")
    wait_for(
        lambda: all(is_healthy(a, timeout_s=1.0, credentials=credentials) for a in addresses),
        what="every broker's health over mTLS on INTERNAL",
        pods=running.pods,
        timeout_s=90,
    )


def client_options(secret: dict[str, str], user: str, tmp: Path, scram: bool) -> dict[str, Any]:
    """What an application does with the User's Secret, and nothing else."""
    (tmp / "ca.crt").write_text(secret.get("ca.crt", ""))
    if scram:
        return {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(tmp / "ca.crt"),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": secret["password"],
        }
    (tmp / "user.crt").write_text(secret["user.crt"])
    (tmp / "user.key").write_text(secret["user.key"])
    return {
        "security_protocol": "SSL",
        "ssl_cafile": str(tmp / "ca.crt"),
        "ssl_certfile": str(tmp / "user.crt"),
        "ssl_keyfile": str(tmp / "user.key"),
    }


def produce_one(bootstrap: str, topic: str, options: dict[str, Any]) -> None:
    with headwater.Producer(
        bootstrap, acks="all", delivery_timeout_ms=20000, request_timeout_ms=5000, **options
    ) as producer:
        producer.send(topic, b"hello", key=b"k").result(30)


def kafka_produce_error(bootstrap: str, topic: str, options: dict[str, Any]) -> Exception | None:
    """A produce with Kafka's own client (kafka-python) on the KAFKA listener; its error."""
    kafka = pytest.importorskip("kafka")
    try:
        producer = kafka.KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", request_timeout_ms=5000, **options
        )
    except kafka.errors.KafkaError as exc:  # authentication fails while bootstrapping
        return exc
    try:
        producer.send(topic, b"over-kafka", key=b"k").get(timeout=30)
    except kafka.errors.KafkaError as exc:
        return exc
    finally:
        producer.close(5)
    return None


def produce_error(bootstrap: str, topic: str, options: dict[str, Any]) -> Exception | None:
    try:
        produce_one(bootstrap, topic, options)
    except errors.HeadwaterError as exc:
        return exc
    return None


def eventually(
    check: Callable[[], Exception | None], *, allowed: bool, what: str, pods: list[LocalPod]
) -> Exception | None:
    """ACLs and credentials reach every broker through ZooKeeper watches, so a change is
    seen after a moment (as in Kafka): wait, bounded, for the produce to be ``allowed``
    (no error) or refused (an error, returned)."""
    seen: list[Exception | None] = []

    def done() -> bool:
        seen.append(check())
        return (seen[-1] is None) == allowed

    wait_for(done, what=what, pods=pods, timeout_s=60)
    return seen[-1]


def once_authenticated(
    check: Callable[[], Exception | None], *, what: str, pods: list[LocalPod]
) -> Exception | None:
    """A new User's SCRAM credential reaches every broker through a ZooKeeper watch, so
    for a moment a broker refuses it (as Kafka's do): retry, bounded, while the refusal is
    SASL_AUTHENTICATION_FAILED, and return the first other outcome (None: no error)."""
    seen: list[Exception | None] = []

    def done() -> bool:
        seen.append(check())
        return type(seen[-1]).__name__ != "SaslAuthenticationFailedError"

    wait_for(done, what=what, pods=pods, timeout_s=60)
    return seen[-1]


def test_operator_and_users_over_the_rendered_tls_config(brokers: Running, tmp_path: Path) -> None:
    wait_healthy(brokers)
    scram = brokers.scram
    config = OperatorConfig.from_env(brokers.operator_env)
    assert config.security.security_protocol == "SSL"
    topic = f"chart-tls-{uuid.uuid4().hex[:8]}"
    with headwater.Admin(config.bootstrap, **config.admin_options()) as admin:
        cluster = admin.describe_cluster()
        assert [b.broker_id for b in cluster.brokers] == [0, 1, 2]
        admin.create_topic(topic, 1, 3)  # a super user needs no ACL

        def leader() -> bool:
            parts = admin.describe_topics([topic])[topic].partitions
            return len(parts) == 1 and parts[0].leader >= 0 and len(parts[0].isr) == 3

        wait_for(leader, what=f"a leader and a full ISR for {topic}", pods=brokers.pods)

        secrets = FakeSecrets()
        ca = PemClientsCa(
            config.security.clients_ca_dir,
            trust_pem=(brokers.tls / "ca.crt").read_text(),
            validity_days=config.security.user_cert_validity_days,
        )
        reconciler = UserReconciler(
            AdminUsers(admin),
            secrets,
            clients_ca=ca,
            reserved=config.security.super_users,
            new_password=new_password,
            ca_pem=(brokers.tls / "ca.crt").read_text(),
        )
        auth = "scram-sha-512" if scram else "tls"
        spec = {
            "authentication": {"type": auth},
            "authorization": {
                "type": "simple",
                "acls": [{"resource": {"type": "topic", "name": topic},
                          "operations": ["Write", "Describe"]}],
            },
        }  # fmt: skip
        app = UserResource("headwater", "app", "uid-app", 1, spec, {})
        outcome = reconciler.reconcile(app, now="2026-01-01T00:00:00Z")
        assert outcome.refusal is None, outcome
        options = client_options(secrets.secrets["app"][1], "app", tmp_path, scram)
        # The brokers' certificates chain to what the Secret's ca.crt holds.
        assert secrets.secrets["app"][1]["ca.crt"] == (brokers.tls / "ca.crt").read_text()
        eventually(
            lambda: produce_error(brokers.client, topic, options),
            allowed=True,
            what="User:app to produce with its Secret",
            pods=brokers.pods,
        )

        # The same Secret on the KAFKA listener, with Kafka's own client.
        eventually(
            lambda: kafka_produce_error(brokers.kafka, topic, options),
            allowed=True,
            what="User:app to produce over the Kafka listener",
            pods=brokers.pods,
        )

        # Same CA, no ACLs (tls) / a wrong password (scram): refused.
        stranger = UserResource("headwater", "stranger", "uid-s", 1, {"authentication": {
            "type": auth}}, {})  # fmt: skip
        assert reconciler.reconcile(stranger, now="2026-01-01T00:00:00Z").refusal is None
        bad_dir = tmp_path / "stranger"
        bad_dir.mkdir()
        bad = client_options(secrets.secrets["stranger"][1], "stranger", bad_dir, scram)
        # No ACL was ever created for it: refused at once once it authenticates (at once
        # with a certificate; with SCRAM, once its new credential has reached the brokers).
        refused = once_authenticated(
            lambda: produce_error(brokers.client, topic, bad),
            what="User:stranger to authenticate",
            pods=brokers.pods,
        )
        assert isinstance(refused, errors.TopicAuthorizationFailedError), refused
        refused = once_authenticated(
            lambda: kafka_produce_error(brokers.kafka, topic, bad),
            what="User:stranger to authenticate over the Kafka listener",
            pods=brokers.pods,
        )
        assert type(refused).__name__ == "TopicAuthorizationFailedError", refused
        if scram:
            wrong = {**options, "sasl_plain_password": "not-the-password"}
            with pytest.raises(errors.SaslAuthenticationFailedError):
                produce_one(brokers.client, topic, wrong)

        # Deleting the User removes its ACLs and credential.
        reconciler.finalize(app)
        assert AdminUsers(admin).acls_of("User:app") == frozenset()
        assert "app" not in secrets.secrets
        refusal = eventually(
            lambda: produce_error(brokers.client, topic, options),
            allowed=False,
            what="User:app to be refused once deleted",
            pods=brokers.pods,
        )
        expected = (
            errors.SaslAuthenticationFailedError if scram else errors.TopicAuthorizationFailedError
        )
        assert isinstance(refusal, expected), refusal
