"""A SASL_PLAINTEXT listener on a real broker, the user bootstrapped into ZooKeeper before
the broker starts (Kafka's way): a call without a session and a client with a wrong
password are refused, the right credentials reach every service, and after a broker
restart (sessions forgotten) the client re-authenticates transparently."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic, ScramDeletion, ScramUpsertion
from headwater.client.consumer.consumer import Consumer
from headwater.client.producer.producer import Producer
from headwater.client.transport import sasl
from headwater.client.types import TopicPartition
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing.cluster import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc

from tests.e2e.security.scram_helpers import logs_in

PASSWORD = "listener-Secret-4411"
SHA512 = ScramMechanism.SCRAM_SHA_512


def sasl_cluster(data_dir: Path, zookeeper: ZooKeeperServer) -> Cluster:
    """One broker with a SASL_PLAINTEXT client listener; ``alice`` written to ZooKeeper
    before it starts, as Kafka bootstraps its first users."""
    c = Cluster(
        brokers=1,
        data_dir=data_dir,
        zookeeper=zookeeper.connect_string,
        listeners={"CLIENT": "SASL_PLAINTEXT", "INTERNAL": "PLAINTEXT"},
        overrides={"inter.broker.listener.name": "INTERNAL"},
    )
    client = session.connect(c.zookeeper_connect)
    try:
        ScramCredentialStore(client).alter(
            "alice",
            upsertions={
                SHA512: ScramCredential.from_password(
                    SHA512, PASSWORD, salt=b"bootstrap-salt", iterations=4096
                )
            },
        )
    finally:
        session.close(client)
    return c


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[Cluster]:
    with sasl_cluster(tmp_path_factory.mktemp("scram-listener"), zookeeper) as c:
        yield c


def client_address(cluster: Cluster) -> str:
    return cluster.brokers[0].address_of("CLIENT")


def authenticated(
    cluster: Cluster, password: str = PASSWORD
) -> tuple[grpc.Channel, sasl.SaslClientInterceptor, grpc.Channel]:
    address = client_address(cluster)
    raw = grpc.insecure_channel(address)
    interceptor = sasl.SaslClientInterceptor(
        raw, credentials=sasl.SaslCredentials("SCRAM-SHA-512", "alice", password), address=address
    )
    return grpc.intercept_channel(raw, interceptor), interceptor, raw


def metadata(channel: grpc.Channel) -> broker_pb2.MetadataResponse:
    response: broker_pb2.MetadataResponse = broker_pb2_grpc.BrokerStub(channel).Metadata(
        broker_pb2.MetadataRequest(all_topics=True), timeout=15
    )
    return response


def test_a_call_without_a_session_is_unauthenticated(cluster: Cluster) -> None:
    with grpc.insecure_channel(client_address(cluster)) as raw:
        with pytest.raises(grpc.RpcError) as info:
            metadata(raw)
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        forged: tuple[tuple[str, str | bytes], ...] = ((sasl.SESSION_METADATA_KEY, "ab" * 32),)
        with pytest.raises(grpc.RpcError) as info:
            broker_pb2_grpc.BrokerStub(raw).Metadata(
                broker_pb2.MetadataRequest(all_topics=True), timeout=15, metadata=forged
            )
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_wrong_password_is_refused(cluster: Cluster) -> None:
    channel, interceptor, raw = authenticated(cluster, password="not-the-password")
    with raw, pytest.raises(errors.SaslAuthenticationFailedError) as info:
        metadata(channel)
    assert "not-the-password" not in str(info.value)
    assert interceptor.authentications == 0


def test_the_right_credentials_reach_the_services(cluster: Cluster) -> None:
    channel, interceptor, raw = authenticated(cluster)
    with raw:
        created = admin_pb2_grpc.AdminStub(channel).CreateTopics(
            admin_pb2.CreateTopicsRequest(
                topics=[admin_pb2.CreatableTopic(name="sasl-orders", num_partitions=1)],
                timeout_ms=15000,
            ),
            timeout=20,
        )
        assert created.topics[0].error == 0, created.topics[0].error_message
        assert "sasl-orders" in {t.name for t in metadata(channel).topics}
    assert interceptor.authentications == 1


def test_a_restarted_broker_is_answered_by_authenticating_again(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    with sasl_cluster(tmp_path, zookeeper) as cluster:
        channel, interceptor, raw = authenticated(cluster)
        with raw:
            before = metadata(channel)
            assert interceptor.authentications == 1
            cluster.restart(0)
            assert metadata(channel).brokers == before.brokers
        assert interceptor.authentications == 2
        log = cluster.brokers[0].log_tail(400)
        assert "SASL authentication" in log and PASSWORD not in log


def client_options(password: str = PASSWORD) -> dict[str, Any]:
    """kafka-python's option names."""
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": password,
    }


def test_producer_and_consumer_keep_working_across_a_broker_restart(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    with sasl_cluster(tmp_path, zookeeper) as cluster:
        bootstrap = cluster.bootstrap_for("CLIENT")
        with Admin(bootstrap, **client_options()) as admin:
            admin.create_topics([NewTopic("sasl-restart", 1, 1)])
        with Producer(bootstrap, acks="all", **client_options()) as producer:
            first = [
                producer.send("sasl-restart", b"a%d" % i).result(timeout=60) for i in range(20)
            ]
            cluster.restart(0)
            second = [
                producer.send("sasl-restart", b"b%d" % i).result(timeout=60) for i in range(20)
            ]
        assert [m.offset for m in first + second] == list(range(40))
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            consumer_timeout_ms=15000,
            **client_options(),
        )
        try:
            consumer.assign([TopicPartition("sasl-restart", 0)])
            values = []
            for record in consumer:
                values.append(record.value)
                if len(values) == 40:
                    break
        finally:
            consumer.close()
        assert values == [b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(20)]
        wrong = Producer(bootstrap, request_timeout_ms=5000, **client_options("wrong-Pw-1"))
        with wrong, pytest.raises(errors.HeadwaterError) as refused:
            wrong.send("sasl-restart", b"never").result(timeout=30)
        assert "wrong-Pw-1" not in str(refused.value)
        log = cluster.brokers[0].log_path.read_text(errors="replace")
        assert PASSWORD not in log and "wrong-Pw-1" not in log


def can_log_in(address: str, user: str, password: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        return logs_in(channel, user, password)


def test_deleting_a_credential_ends_its_open_sessions(cluster: Cluster) -> None:
    internal = cluster.brokers[0].address_of("INTERNAL")
    with Admin(internal) as admin:
        admin.alter_user_scram_credentials(
            [ScramUpsertion("temp", "SCRAM-SHA-512", 4096, "temp-Secret-8")]
        )
    address = client_address(cluster)
    # The broker's credential cache learns of "temp" through its ZooKeeper watch, a
    # moment after the write: the session below must not be the first to try.
    cluster.wait_for(
        lambda: can_log_in(address, "temp", "temp-Secret-8"),
        what="the broker to know temp's credential",
    )
    raw = grpc.insecure_channel(address)
    interceptor = sasl.SaslClientInterceptor(
        raw,
        credentials=sasl.SaslCredentials("SCRAM-SHA-512", "temp", "temp-Secret-8"),
        address=address,
    )
    channel = grpc.intercept_channel(raw, interceptor)
    with raw:
        metadata(channel)
        with Admin(internal) as admin:
            admin.alter_user_scram_credentials(deletions=[ScramDeletion("temp", "SCRAM-SHA-512")])
        deadline = time.monotonic() + 20
        with pytest.raises(errors.SaslAuthenticationFailedError):
            while time.monotonic() < deadline:
                metadata(channel)  # the session works until the broker's cache sees the deletion
                time.sleep(0.1)
