"""A broker's certificate rotates under a running producer, without a restart.

The broker's keystore (from CA 1) is replaced on disk by one from CA 2 while a producer
(trusting both CAs, as clients do during a CA rotation) sends with acks=all: every send
succeeds, every record is read back, and new connections see the new certificate (a
client trusting CA 2 alone is refused before the rotation and served after it; one
trusting CA 1 alone the other way round).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.consumer.consumer import Consumer
from headwater.client.producer.futures import RecordFuture
from headwater.client.producer.producer import Producer
from headwater.client.types import TopicPartition
from headwater.testing import Cluster
from headwater.testing.tls import CertificateAuthority, write_keystore

pytestmark = pytest.mark.e2e


def served(address: str, roots: bytes) -> bool:
    """Whether a brand-new TLS connection trusting ``roots`` alone gets an answer."""
    channel = grpc.secure_channel(
        address,
        grpc.ssl_channel_credentials(roots),
        options=[("grpc.use_local_subchannel_pool", 1)],
    )
    try:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=3)
    except grpc.RpcError:
        return False
    finally:
        channel.close()
    return True


@pytest.fixture
def rotating(tmp_path: Path) -> Iterator[tuple[Cluster, Path, CertificateAuthority, bytes]]:
    old_ca, new_ca = CertificateAuthority.create("CA 1"), CertificateAuthority.create("CA 2")
    keystore = write_keystore(tmp_path / "broker.pem", old_ca.issue("broker"))
    both = tmp_path / "both.pem"
    both.write_bytes(old_ca.pem + new_ca.pem)
    cluster = Cluster(
        data_dir=tmp_path / "cluster",
        listeners={"SSL": "SSL"},
        overrides={
            "security.inter.broker.protocol": "SSL",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(both),
            "offsets.topic.replication.factor": "1",
        },
        probe_credentials=grpc.ssl_channel_credentials(both.read_bytes()),
    )
    with cluster:
        yield cluster, keystore, new_ca, old_ca.pem


def test_certificate_rotates_under_a_running_producer(
    rotating: tuple[Cluster, Path, CertificateAuthority, bytes], tmp_path: Path
) -> None:
    cluster, keystore, new_ca, old_ca_pem = rotating
    address = cluster.brokers[0].address
    client = {"security_protocol": "SSL", "ssl_cafile": str(tmp_path / "both.pem")}
    with Admin(cluster.bootstrap, **client) as admin:
        admin.create_topics([NewTopic("rotating", 1, 1)])
    futures: list[RecordFuture] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer(cluster.bootstrap, acks="all", linger_ms=1, **client) as producer:
            i = 0
            while not stop.is_set() and i < 200_000:
                futures.append(producer.send("rotating", b"r-%d" % i))
                i += 1
                if i % 50 == 0:
                    futures[-1].result(timeout=60)  # keep a steady, bounded pace
            producer.flush(timeout=60)

    sender = threading.Thread(target=produce, name="rotating-producer")
    sender.start()
    try:
        deadline = time.monotonic() + 60
        while len(futures) < 500 and time.monotonic() < deadline and sender.is_alive():
            time.sleep(0.05)
        assert not served(address, new_ca.pem) and served(address, old_ca_pem)
        before = len(futures)
        write_keystore(keystore, new_ca.issue("broker"))
        assert served(address, new_ca.pem)
        assert not served(address, old_ca_pem)
        deadline = time.monotonic() + 60
        while len(futures) < before + 500 and time.monotonic() < deadline and sender.is_alive():
            time.sleep(0.05)
    finally:
        stop.set()
        sender.join(timeout=120)
    assert not sender.is_alive()
    assert len(futures) >= before + 500
    offsets = [f.result(timeout=60).offset for f in futures]  # every send succeeded
    assert offsets == list(range(len(futures)))
    consumer = Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
        **client,
    )
    try:
        consumer.assign([TopicPartition("rotating", 0)])
        count = 0
        for _ in consumer:
            count += 1
            if count >= len(futures):
                break
    finally:
        consumer.close()
    assert count == len(futures)
