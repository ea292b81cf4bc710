"""The Kafka-protocol listener secured: SASL_SSL with SCRAM, principals and ACLs, against
kafka-python and confluent-kafka (librdkafka).

One broker with Kafka's authorizer on: its gRPC listener is PLAINTEXT (the test's own
administration, ``User:ANONYMOUS`` a super user); its Kafka listeners are ``KAFKA``
(SASL_SSL, SCRAM-SHA-512 and SCRAM-SHA-256), ``KSP`` (SASL_PLAINTEXT) and ``KTLS`` (SSL
with ``ssl.client.auth=required``, the certificate's CN the user name), with
``connections.max.reauth.ms`` of 5 s.  ``alice`` may do anything on every topic and
group; ``bob`` may describe and write topics but not read them; ``carol`` (a
certificate) may do anything on topics and groups and describe the cluster.  The
credentials and the ACLs are in ZooKeeper before the broker starts.

* alice produces and consumes over TLS with SCRAM-SHA-512 (kafka-python) and
  SCRAM-SHA-256 (librdkafka, in a consumer group);
* a wrong password is answered SASL_AUTHENTICATION_FAILED and the connection closed;
* bob's fetch is refused with TOPIC_AUTHORIZATION_FAILED (his produce is not), and
  his DescribeCluster with CLUSTER_AUTHORIZATION_FAILED;
* before authentication only ApiVersions and SaslHandshake are served: a Metadata
  request closes the connection unanswered; an unsupported mechanism is answered with
  the enabled ones and the connection closed;
* SASL_PLAINTEXT serves kafka-python; on mTLS carol's certificate writes and dave's
  (no ACL) is refused TOPIC_AUTHORIZATION_FAILED, and a client without one is refused;
* kafka-python re-authenticates on its connection before its session ends;
* kafka-configs (SCRAM admin APIs, over SASL_SSL as alice, who may ALTER, DESCRIBE and
  DESCRIBE_CONFIGS the cluster) adds a SCRAM-SHA-512 credential for a new user, who then
  logs in with it, describes it (iterations, no secret) and deletes it, after which the
  login fails; bad alterations (too few iterations, an unknown mechanism, deleting what is
  not there) get Kafka's errors, and bob (no ALTER on the cluster) CLUSTER_AUTHORIZATION_FAILED;
  DescribeClientQuotas matches nothing (no quota is set on this cluster) and refuses a
  malformed filter INVALID_REQUEST;
* the Kubernetes tier's cross-namespace Kafka client (``tests/e2e/k8s/kafka_client.py``)
  runs from the kafka-python zip that tier ships to its pod, with nothing else on its
  path, over mTLS as carol.
"""

from __future__ import annotations

import datetime
import io
import json
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation, ResourceType
from headwater.security.scram import ScramClient, ScramCredential, ScramMechanism
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore
from headwater.testing.zookeeper import ZooKeeperServer, free_port

from tests.e2e.security.acl_helpers import AUTHORIZER, AclWriter, acl

from .test_kafka_tools import CONFIGS
from .test_kafka_tools import tools as tools  # a fixture: Kafka's command-line tools

pytestmark = pytest.mark.e2e

ALICE_PW = "alice-Kafka-door-1"
BOB_PW = "bob-Kafka-door-2"
SHA512, SHA256 = ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256


REAUTH_MS = 5000


@dataclass
class Secured:
    cluster: Cluster
    port: int
    truststore: Path
    sasl_plaintext_port: int
    mtls_port: int
    ca: CertificateAuthority
    tmp: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def _acls() -> list[Any]:
    alice, bob = "User:alice", "User:bob"
    return [
        acl(ResourceType.TOPIC, "*", AclOperation.ALL, principal=alice),
        acl(ResourceType.GROUP, "*", AclOperation.ALL, principal=alice),
        acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER, principal=alice),
        acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, principal=alice),
        acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS, principal=alice),
        acl(ResourceType.TOPIC, "*", AclOperation.DESCRIBE, principal=bob),
        acl(ResourceType.TOPIC, "*", AclOperation.WRITE, principal=bob),
        acl(ResourceType.GROUP, "*", AclOperation.READ, principal=bob),
        acl(ResourceType.TOPIC, "*", AclOperation.ALL, principal="User:carol"),
        acl(ResourceType.GROUP, "*", AclOperation.ALL, principal="User:carol"),
        acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, principal="User:carol"),
    ]


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(scope="module")
def secured(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[Secured]:
    tmp = tmp_path_factory.mktemp("kafka-sasl-ssl")
    ca = CertificateAuthority.create()
    truststore = tmp / "ca.pem"
    truststore.write_bytes(ca.pem)
    keystore = write_keystore(tmp / "broker.pem", ca.issue("broker"))
    port, sasl_plaintext_port, mtls_port = free_port(), free_port(), free_port()
    cluster = Cluster(
        data_dir=tmp / "cluster",
        zookeeper=zookeeper.connect_string,
        overrides={
            **AUTHORIZER,
            "super.users": "User:ANONYMOUS",
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,KAFKA:SASL_SSL,KSP:SASL_PLAINTEXT,KTLS:SSL"
            ),
            "kafka.listeners": (
                f"KAFKA://127.0.0.1:{port},KSP://127.0.0.1:{sasl_plaintext_port},"
                f"KTLS://127.0.0.1:{mtls_port}"
            ),
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(truststore),
            "listener.name.kafka.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
            "listener.name.ksp.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.ktls.ssl.client.auth": "required",
            "listener.name.ktls.ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/",
            "connections.max.reauth.ms": str(REAUTH_MS),
            "offsets.topic.replication.factor": "1",
        },
    )
    writer = AclWriter(zookeeper.connect_string + cluster.chroot)
    try:
        writer.add(*_acls())
        store = ScramCredentialStore(writer.client)
        for user, password, mechanisms in (
            ("alice", ALICE_PW, (SHA512, SHA256)),
            ("bob", BOB_PW, (SHA512,)),
        ):
            store.alter(
                user,
                upsertions={
                    m: ScramCredential.from_password(
                        m, password, salt=user.encode(), iterations=4096
                    )
                    for m in mechanisms
                },
            )
        with cluster:
            door = Secured(cluster, port, truststore, sasl_plaintext_port, mtls_port, ca, tmp)
            cluster.wait_for(
                lambda: _logs_in(door, "alice", ALICE_PW), what="the broker to know alice"
            )
            yield door
    finally:
        writer.close()


# -- raw protocol helpers ---------------------------------------------------------------------


def _tls_socket(door: Secured) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(door.truststore))
    raw = socket.create_connection(("127.0.0.1", door.port), timeout=15)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def _send(sock: socket.socket, correlation_id: int, request: Any) -> None:
    from kio.serial import entity_writer

    header_type = type(request).__header_schema__
    out = io.BytesIO()
    entity_writer(header_type)(
        out,
        header_type(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id="security-test",
        ),
    )
    entity_writer(type(request))(out, request)
    sock.sendall(struct.pack(">i", out.tell()) + out.getvalue())


def _exchange(sock: socket.socket, correlation_id: int, request: Any) -> Any:
    """Send ``request`` (a kio entity) and read its response, headers as its version has."""
    from kio.index import load_response_schema
    from kio.serial import entity_reader

    _send(sock, correlation_id, request)
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    frame = _recv_exactly(sock, size)
    schema = load_response_schema(request.__api_key__, request.__version__)
    header, used = entity_reader(schema.__header_schema__)(frame, 0)
    assert header.correlation_id == correlation_id
    body, body_used = entity_reader(schema)(frame, used)
    assert used + body_used == len(frame)
    return body


def _closed_by_broker(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def _scram_login(
    sock: socket.socket, user: str, password: str, mechanism: ScramMechanism = SHA512
) -> Any:
    """SaslHandshake v1 and SaslAuthenticate v1 until the end; the last response."""
    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    handshake = _exchange(sock, 1, SaslHandshakeRequest(mechanism=mechanism.value))
    assert int(handshake.error_code) == 0, handshake
    client = ScramClient(mechanism, username=user, password=password)
    first = _exchange(sock, 2, SaslAuthenticateRequest(auth_bytes=client.first_message()))
    assert int(first.error_code) == 0, first
    final = client.on_server_first(first.auth_bytes)
    last = _exchange(sock, 3, SaslAuthenticateRequest(auth_bytes=final))
    if int(last.error_code) == 0:
        client.on_server_final(last.auth_bytes)
    return last


def _logs_in(door: Secured, user: str, password: str) -> bool:
    with _tls_socket(door) as sock:
        return int(_scram_login(sock, user, password).error_code) == 0


def _kafka_python_options(door: Secured, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": door.bootstrap,
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(door.truststore),
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


def _new_topic(door: Secured) -> str:
    kafka_admin = pytest.importorskip("kafka.admin")
    name = f"sec-{uuid.uuid4().hex[:10]}"
    admin = kafka_admin.KafkaAdminClient(**_kafka_python_options(door, "alice", ALICE_PW))
    try:
        admin.create_topics([kafka_admin.NewTopic(name, 1, 1)], timeout_ms=15000)
    finally:
        admin.close()
    door.cluster.wait_for(lambda: door.cluster.leader_for(name, 0) is not None, what="a leader")
    return name


# -- tests ------------------------------------------------------------------------------------


def test_kafka_python_produces_and_consumes_with_scram_sha_512_over_tls(secured: Secured) -> None:
    kafka = pytest.importorskip("kafka")
    topic = _new_topic(secured)
    producer = kafka.KafkaProducer(acks="all", **_kafka_python_options(secured, "alice", ALICE_PW))
    try:
        metas = [producer.send(topic, b"v%d" % i).get(timeout=30) for i in range(20)]
    finally:
        producer.close(10)
    assert [m.offset for m in metas] == list(range(20))
    consumer = kafka.KafkaConsumer(
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
        **_kafka_python_options(secured, "alice", ALICE_PW),
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        values = [m.value for _, m in zip(range(20), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(20)]


def test_librdkafka_produces_and_consumes_in_a_group_with_scram_sha_256(secured: Secured) -> None:
    confluent = pytest.importorskip("confluent_kafka")
    topic = _new_topic(secured)
    common = {
        "bootstrap.servers": secured.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(secured.truststore),
        "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": ALICE_PW,
    }
    producer = confluent.Producer({**common, "acks": "all"})
    for i in range(10):
        producer.produce(topic, value=b"r%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent.Consumer(
        {**common, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        got: list[bytes] = []
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message.value())
            if len(got) == 10:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == [b"r%d" % i for i in range(10)]


def test_a_wrong_password_is_refused_and_the_connection_closed(secured: Secured) -> None:
    with _tls_socket(secured) as sock:
        last = _scram_login(sock, "alice", "not-" + ALICE_PW)
        assert int(last.error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert "invalid credentials" in last.error_message
        assert _closed_by_broker(sock)
    with _tls_socket(secured) as sock:  # an unknown user: the same answer
        last = _scram_login(sock, "mallory", ALICE_PW)
        assert int(last.error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert _closed_by_broker(sock)


def test_librdkafka_with_a_wrong_password_reports_an_authentication_error(
    secured: Secured,
) -> None:
    confluent = pytest.importorskip("confluent_kafka")
    errors: list[Any] = []
    producer = confluent.Producer(
        {
            "bootstrap.servers": secured.bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(secured.truststore),
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "wrong-password",
            "error_cb": errors.append,
        }
    )
    for _ in range(30):
        producer.poll(0.5)
        if errors:
            break
    assert errors, "no error reported"
    assert errors[0].code() == confluent.KafkaError._AUTHENTICATION, errors[0]
    assert "invalid credentials" in errors[0].str()


def test_a_principal_without_read_gets_topic_authorization_failed(secured: Secured) -> None:
    kafka = pytest.importorskip("kafka")
    topic = _new_topic(secured)
    producer = kafka.KafkaProducer(acks="all", **_kafka_python_options(secured, "bob", BOB_PW))
    try:
        assert producer.send(topic, b"bob was here").get(timeout=30).offset == 0  # WRITE: yes
    finally:
        producer.close(10)
    consumer = kafka.KafkaConsumer(
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **_kafka_python_options(secured, "bob", BOB_PW),
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            for _ in range(30):
                consumer.poll(timeout_ms=1000)
    finally:
        consumer.close()


def test_fetch_before_read_is_refused_on_the_wire(secured: Secured) -> None:
    """The same refusal at the protocol level: Fetch by an authenticated bob."""
    from kio.schema.fetch.v4.request import FetchPartition, FetchRequest, FetchTopic

    topic = _new_topic(secured)
    with _tls_socket(secured) as sock:
        assert int(_scram_login(sock, "bob", BOB_PW).error_code) == 0
        partition = FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        request = FetchRequest(
            max_wait=datetime.timedelta(0),
            min_bytes=0,
            topics=(FetchTopic(topic=topic, partitions=(partition,)),),
        )
        response = _exchange(sock, 4, request)
    (answer,) = response.responses
    assert int(answer.partitions[0].error_code) == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_describe_cluster_needs_describe_on_the_cluster(secured: Secured) -> None:
    from kio.schema.describe_cluster.v0.request import DescribeClusterRequest

    with _tls_socket(secured) as sock:
        assert int(_scram_login(sock, "bob", BOB_PW).error_code) == 0
        request = DescribeClusterRequest(include_cluster_authorized_operations=False)
        answer = _exchange(sock, 4, request)
    assert int(answer.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert answer.brokers == ()


def test_a_request_before_authentication_closes_the_connection(secured: Secured) -> None:
    from kio.schema.api_versions.v0.request import ApiVersionsRequest
    from kio.schema.metadata.v1.request import MetadataRequest

    with _tls_socket(secured) as sock:
        versions = _exchange(sock, 1, ApiVersionsRequest())
        served = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys
        }
        assert served[17] == (0, 1) and served[36] == (0, 2)
        _send(sock, 2, MetadataRequest(topics=None))
        assert _closed_by_broker(sock)
    with _tls_socket(secured) as sock:  # not even ApiVersions first
        _send(sock, 1, MetadataRequest(topics=None))
        assert _closed_by_broker(sock)
    assert _logs_in(secured, "alice", ALICE_PW)


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones_and_closed(
    secured: Secured,
) -> None:
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    with _tls_socket(secured) as sock:
        answer = _exchange(sock, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        assert int(answer.error_code) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert tuple(answer.mechanisms) == ("SCRAM-SHA-512", "SCRAM-SHA-256")
        assert _closed_by_broker(sock)


def test_kafka_python_over_sasl_plaintext(secured: Secured) -> None:
    kafka = pytest.importorskip("kafka")
    topic = _new_topic(secured)
    options = {
        "bootstrap_servers": f"127.0.0.1:{secured.sasl_plaintext_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": ALICE_PW,
    }
    producer = kafka.KafkaProducer(acks="all", **options)
    try:
        assert producer.send(topic, b"in the clear").get(timeout=30).offset == 0
    finally:
        producer.close(10)
    consumer = kafka.KafkaConsumer(
        auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=15000, **options
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0)])
        assert next(iter(consumer)).value == b"in the clear"
    finally:
        consumer.close()


def _mtls_producer(secured: Secured, common_name: str) -> Any:
    kafka = pytest.importorskip("kafka")
    keystore = write_keystore(secured.tmp / f"{common_name}.pem", secured.ca.issue(common_name))
    return kafka.KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{secured.mtls_port}",
        security_protocol="SSL",
        ssl_cafile=str(secured.truststore),
        ssl_certfile=str(keystore),
        ssl_keyfile=str(keystore),
        acks="all",
    )


def test_on_mtls_the_certificate_is_the_principal(secured: Secured) -> None:
    kafka = pytest.importorskip("kafka")
    topic = _new_topic(secured)
    carol = _mtls_producer(secured, "carol")  # User:carol by the mapping rule: ALL on topics
    try:
        assert carol.send(topic, b"from carol").get(timeout=30).offset == 0
    finally:
        carol.close(10)
    dave = _mtls_producer(secured, "dave")  # User:dave: no ACL
    try:
        with pytest.raises(kafka.errors.TopicAuthorizationFailedError):
            dave.send(topic, b"from dave").get(timeout=30)
    finally:
        dave.close(10)


def test_on_mtls_a_client_without_a_certificate_is_refused(secured: Secured) -> None:
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    context = ssl.create_default_context(cafile=str(secured.truststore))
    raw = socket.create_connection(("127.0.0.1", secured.mtls_port), timeout=15)
    try:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            _send(sock, 1, ApiVersionsRequest())
            assert _closed_by_broker(sock)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass  # refused during the handshake (TLS 1.2) rather than after it (TLS 1.3)
    log_path = Path(secured.cluster.brokers[0].log_path)
    deadline = time.monotonic() + 10
    while "Kafka listener KTLS: closing the connection" not in log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the refused handshake is not in the broker's log"
        time.sleep(0.1)
    assert "TLS handshake failed: PEER_DID_NOT_RETURN_A_CERTIFICATE" in log_path.read_text(
        errors="replace"
    )


def test_clients_reauthenticate_before_the_session_ends(secured: Secured) -> None:
    """connections.max.reauth.ms: kafka-python is told the lifetime, re-authenticates on
    the same connection, and its connection is never closed for an expired session."""
    kafka = pytest.importorskip("kafka")
    topic = _new_topic(secured)
    log_path = Path(secured.cluster.brokers[0].log_path)
    before = log_path.read_text(errors="replace").count("User:alice re-authenticated")
    producer = kafka.KafkaProducer(acks="all", **_kafka_python_options(secured, "alice", ALICE_PW))
    try:
        offsets = []
        for i in range(3):
            offsets.append(producer.send(topic, b"%d" % i).get(timeout=30).offset)
            time.sleep(REAUTH_MS / 1000)
    finally:
        producer.close(10)
    assert offsets == [0, 1, 2]
    log = log_path.read_text(errors="replace")
    assert log.count("User:alice re-authenticated") > before
    assert "the SASL session expired" not in log


# -- SCRAM administration: kafka-configs over the Kafka listener ------------------------------


def _login_code(door: Secured, user: str, password: str) -> int:
    """0 when ``user`` logs in with ``password``, else the failing step's error code."""
    from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    with _tls_socket(door) as sock:
        _exchange(sock, 1, SaslHandshakeRequest(mechanism=SHA512.value))
        client = ScramClient(SHA512, username=user, password=password)
        first = _exchange(sock, 2, SaslAuthenticateRequest(auth_bytes=client.first_message()))
        if int(first.error_code) != 0:
            return int(first.error_code)
        final = client.on_server_first(first.auth_bytes)
        return int(_exchange(sock, 3, SaslAuthenticateRequest(auth_bytes=final)).error_code)


def _until_login(door: Secured, user: str, password: str, expected: int) -> None:
    deadline = time.monotonic() + 30
    while (code := _login_code(door, user, password)) != expected:
        assert time.monotonic() < deadline, f"{user}'s login answers {code}, not {expected}"
        time.sleep(0.3)


def test_kafka_configs_adds_describes_and_deletes_a_scram_credential(
    secured: Secured,
    tools: Any,
) -> None:
    config = secured.tmp / "alice.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{ALICE_PW}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.truststore}\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    user, password = f"erin{uuid.uuid4().hex[:6]}", "erin-Kafka-door-3"
    common = f"--bootstrap-server {secured.bootstrap} --command-config {config}"
    users = f"--entity-type users --entity-name {user}"
    assert _login_code(secured, user, password) == ErrorCode.SASL_AUTHENTICATION_FAILED
    added = tools.ok(
        CONFIGS,
        f"{common} --alter --add-config SCRAM-SHA-512=[iterations=8192,password={password}] "
        + users,
    )
    assert f"Completed updating config for user {user}." in added.stdout
    _until_login(secured, user, password, 0)
    described = tools.ok(CONFIGS, f"{common} --describe {users}")
    assert (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=8192"
        in described.stdout
    )
    assert password not in described.output
    tools.ok(CONFIGS, f"{common} --alter --delete-config SCRAM-SHA-512 {users}")
    _until_login(secured, user, password, ErrorCode.SASL_AUTHENTICATION_FAILED)


def test_bad_scram_alterations_get_kafkas_errors(secured: Secured) -> None:
    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest,
        ScramCredentialDeletion,
        ScramCredentialUpsertion,
    )
    from kio.schema.describe_client_quotas.v1.request import (
        ComponentData,
        DescribeClientQuotasRequest,
    )
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest,
        UserName,
    )

    def upsert(user: str, mechanism: int, iterations: int) -> Any:
        return ScramCredentialUpsertion(
            name=user,
            mechanism=mechanism,
            iterations=iterations,
            salt=b"salt-salt",
            salted_password=b"x" * 64,
        )

    request = AlterUserScramCredentialsRequest(
        deletions=(ScramCredentialDeletion(name="nobody-here", mechanism=2),),
        upsertions=(upsert("few-iterations", 2, 1), upsert("odd-mechanism", 9, 8192)),
    )
    with _tls_socket(secured) as sock:
        assert int(_scram_login(sock, "alice", ALICE_PW).error_code) == 0
        answer = _exchange(sock, 4, request)
        codes = {r.user: int(r.error_code) for r in answer.results}
        described = _exchange(
            sock,
            5,
            DescribeUserScramCredentialsRequest(users=(UserName(name="alice"),) * 2),
        )
        missing = _exchange(
            sock, 6, DescribeUserScramCredentialsRequest(users=(UserName(name="nobody-here"),))
        )
        mine = _exchange(
            sock, 7, DescribeUserScramCredentialsRequest(users=(UserName(name="alice"),))
        )
        quotas = _exchange(
            sock,
            8,
            DescribeClientQuotasRequest(
                components=(ComponentData(entity_type="user", match_type=0, match="alice"),),
                strict=False,
            ),
        )
        bad_filter = _exchange(
            sock,
            9,
            DescribeClientQuotasRequest(
                components=(ComponentData(entity_type="user", match_type=2, match=None),) * 2,
                strict=False,
            ),
        )
    assert codes == {
        "few-iterations": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        "odd-mechanism": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        "nobody-here": ErrorCode.RESOURCE_NOT_FOUND,
    }
    assert int(described.error_code) == ErrorCode.DUPLICATE_RESOURCE
    assert [int(r.error_code) for r in missing.results] == [ErrorCode.RESOURCE_NOT_FOUND]
    ((info_256, info_512),) = [r.credential_infos for r in mine.results]
    assert (info_256.mechanism, info_512.mechanism) == (1, 2)
    assert (int(quotas.error_code), quotas.entries) == (0, ())
    assert int(bad_filter.error_code) == ErrorCode.INVALID_REQUEST
    assert "Duplicate user" in bad_filter.error_message
    with _tls_socket(secured) as sock:
        assert int(_scram_login(sock, "bob", BOB_PW).error_code) == 0
        refused = _exchange(sock, 4, AlterUserScramCredentialsRequest(
            deletions=(), upsertions=(upsert("bob", 2, 8192),)
        ))  # fmt: skip
    assert [int(r.error_code) for r in refused.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def test_the_k8s_tiers_kafka_client_runs_from_its_zip(secured: Secured, tmp_path: Path) -> None:
    pytest.importorskip("kafka")
    from tests.e2e.k8s import kafka_bundle

    client = Path(__file__).parents[1] / "e2e" / "k8s" / "kafka_client.py"
    bundle = tmp_path / "kafka-python.zip"
    bundle.write_bytes(kafka_bundle.kafka_python_zip())
    certs = tmp_path / "certs"
    certs.mkdir()
    carol = secured.ca.issue("carol")
    (certs / "ca.crt").write_bytes(secured.truststore.read_bytes())
    (certs / "user.crt").write_bytes(carol.chain_pem)
    (certs / "user.key").write_bytes(carol.key_pem)
    # -S: no site-packages, so kafka-python can only come from the zip, as in the pod.
    env = {"PYTHONPATH": str(bundle), "PATH": "/usr/bin:/bin"}
    where = subprocess.run(
        [sys.executable, "-S", "-c", "import kafka; print(kafka.__file__)"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(bundle)), where.stdout
    topic, records = f"zip-{uuid.uuid4().hex[:8]}", 12
    done = subprocess.run(
        [sys.executable, "-S", str(client), "--bootstrap", f"127.0.0.1:{secured.mtls_port}",
         "--topic", topic, "--records", str(records), "--certs", str(certs),
         "--replication-factor", "1"],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("SUMMARY ")]
    summary = json.loads(line.removeprefix("SUMMARY "))
    assert summary["received"] == summary["sent"]
    assert sorted(summary["sent"]) == sorted(f"v{i}" for i in range(records))
    ends: dict[str, int] = {}
    for p, o in summary["sent"].values():
        ends[str(p)] = max(ends.get(str(p), 0), o + 1)
    assert summary["committed"] == ends
