"""Metadata on the Kafka listener advertises each broker's own Kafka address, its rack and
the controller, as a Kubernetes deployment needs (each pod advertises its stable DNS name,
which is not the address it binds).

Three brokers bind their Kafka listeners to ``127.0.0.1:<port>`` and advertise
``localhost:<port>`` (``kafka.advertised.listeners``), each with a ``broker.rack``:

* Metadata at every version from v0 to v12 (request and response headers as the version
  wants, flexible from v9), asked of each broker, names every live broker with its
  advertised host and port, its rack (v1+) and the controller ZooKeeper names (v1+);
* Kafka's own clients see the same: kafka-python's DescribeCluster; librdkafka
  (confluent-kafka) produces through the advertised names and its ``list_topics()`` (a
  Metadata v12 request with bytes after its body, which Kafka ignores) names them;
* after the controller is killed, the survivors' Metadata leaves it out and names the new
  controller.
"""

from __future__ import annotations

import dataclasses
import io
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from headwater.client import Admin, NewTopic
from headwater.testing import Cluster

pytestmark = pytest.mark.e2e

BROKERS = 3
RACKS = {0: "zone-a", 1: "zone-b", 2: "zone-a"}
ADVERTISED_HOST = "localhost"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(
        brokers=BROKERS, data_dir=tmp_path_factory.mktemp("kafka-metadata"), kafka_listener=True
    )
    for b, port in cluster.kafka_ports.items():
        cluster.broker_overrides[b] = {
            "kafka.advertised.listeners": f"KAFKA://{ADVERTISED_HOST}:{port}",
            "broker.rack": RACKS[b],
        }
    with cluster as c:
        yield c


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "the broker closed the connection"
        out += chunk
    return out


def metadata(port: int, version: int) -> Any:
    """Metadata (all topics) at ``version`` from the Kafka listener on ``port``, decoded."""
    kio_serial = pytest.importorskip("kio.serial")
    from kio.index import load_request_schema, load_response_schema

    request_type = load_request_schema(3, version)
    fields = {f.name for f in dataclasses.fields(request_type)}
    request = request_type(  # type: ignore[call-arg]
        topics=() if version == 0 else None,
        **{name: False for name in fields - {"topics"}},
    )
    header_type = request_type.__header_schema__
    out = io.BytesIO()
    kio_serial.entity_writer(header_type)(
        out,
        header_type(  # type: ignore[call-arg]
            request_api_key=3, request_api_version=version, correlation_id=version + 1,
            client_id="metadata-test",
        ),
    )  # fmt: skip
    kio_serial.entity_writer(request_type)(out, request)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", out.tell()) + out.getvalue())
        (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
        frame = _recv_exactly(sock, size)
    response_type = load_response_schema(3, version)
    header, used = kio_serial.entity_reader(response_type.__header_schema__)(frame, 0)
    assert header.correlation_id == version + 1
    body, body_used = kio_serial.entity_reader(response_type)(frame, used)
    assert used + body_used == len(frame), "trailing bytes after the response"
    return body


def wait_for_every_broker(cluster: Cluster, brokers: set[int]) -> None:
    """Every broker's metadata cache holds exactly ``brokers`` (registrations reach the
    brokers through the controller, a moment after ZooKeeper has them)."""
    ports = cluster.kafka_ports
    cluster.wait_for(
        lambda: all(
            {b.node_id for b in metadata(ports[asked], 1).brokers} == brokers for asked in brokers
        ),
        what=f"every broker to know brokers {sorted(brokers)}",
    )


@pytest.mark.parametrize("version", range(13))
def test_metadata_advertises_each_brokers_kafka_address_rack_and_the_controller(
    cluster: Cluster, version: int
) -> None:
    ports = cluster.kafka_ports
    wait_for_every_broker(cluster, set(ports))
    controller = cluster.controller_id()
    assert controller in ports
    for asked, port in ports.items():
        answer = metadata(port, version)
        brokers = {(b.node_id, b.host, b.port) for b in answer.brokers}
        assert brokers == {(b, ADVERTISED_HOST, p) for b, p in ports.items()}, f"from {asked}"
        if version >= 1:
            assert {b.node_id: b.rack for b in answer.brokers} == RACKS, f"from {asked}"
            assert answer.controller_id == controller, f"from {asked}"
        if version >= 2:
            assert answer.cluster_id, f"from {asked}"


def test_kafka_clients_see_the_advertised_addresses_racks_and_controller(
    cluster: Cluster,
) -> None:
    ports = cluster.kafka_ports
    wait_for_every_broker(cluster, set(ports))
    bootstrap = f"127.0.0.1:{ports[0]}"
    kafka = pytest.importorskip("kafka")
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_cluster()
    finally:
        admin.close()
    assert {(b["broker_id"], b["host"], b["port"], b["rack"]) for b in described["brokers"]} == {
        (b, ADVERTISED_HOST, p, RACKS[b]) for b, p in ports.items()
    }
    assert described["controller_id"] == cluster.controller_id()

    confluent_kafka = pytest.importorskip("confluent_kafka")
    # librdkafka producing to leaders on every broker goes through the advertised names.
    topic = f"md-{uuid.uuid4().hex[:8]}"
    with Admin(cluster.bootstrap) as hw_admin:
        hw_admin.create_topics([NewTopic(topic, BROKERS, 1)], timeout_ms=15000)
    for p in range(BROKERS):
        cluster.wait_for(lambda p=p: cluster.leader_for(topic, p) is not None, what="a leader")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list[tuple[int, int]] = []
    for p in range(BROKERS):
        producer.produce(
            topic,
            b"v",
            partition=p,
            on_delivery=lambda err, msg: delivered.append((msg.partition(), -1 if err else 0)),
        )
    assert producer.flush(30) == 0
    assert sorted(delivered) == [(p, 0) for p in range(BROKERS)]


def test_librdkafka_lists_the_advertised_brokers_and_controller(cluster: Cluster) -> None:
    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient

    ports = cluster.kafka_ports
    wait_for_every_broker(cluster, set(ports))
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ports[0]}"})
    listing = admin.list_topics(timeout=10)
    assert {(b.id, b.host, b.port) for b in listing.brokers.values()} == {
        (b, ADVERTISED_HOST, p) for b, p in ports.items()
    }
    assert listing.controller_id == cluster.controller_id()


def test_after_the_controller_dies_metadata_names_the_new_one(cluster: Cluster) -> None:
    ports = cluster.kafka_ports
    wait_for_every_broker(cluster, set(ports))
    old = cluster.controller_id()
    assert old is not None
    cluster.kill(old)
    survivors = set(ports) - {old}
    cluster.wait_for(
        lambda: cluster.controller_id() in survivors, timeout_s=60, what="a new controller"
    )
    wait_for_every_broker(cluster, survivors)
    new = cluster.controller_id()

    def answers_agree() -> bool:
        return all(metadata(ports[b], 12).controller_id == new for b in survivors)

    cluster.wait_for(answers_agree, what=f"every survivor to name controller {new}")
    for asked in survivors:
        answer = metadata(ports[asked], 12)
        assert {(b.node_id, b.host, b.port, b.rack) for b in answer.brokers} == {
            (b, ADVERTISED_HOST, ports[b], RACKS[b]) for b in survivors
        }
