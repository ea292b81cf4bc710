"""Client quotas on the gRPC listeners of real brokers: Headwater's producer above its
user's ``producer_byte_rate`` is slowed to about the quota on both brokers, the
answers carry ``throttle_time_ms``, and raising the quota in ZooKeeper speeds it up
on every broker.  A quota on a client id slows only the producer with that ``client_id``.
A tiny ``request_percentage`` throttles every gRPC request of its client id, and each
throttled entity's figures show in the broker's Prometheus metrics.

The brokers measure rates over 2 samples of 1 s (``quota.window.num=2``), so a quota
bites after about one second's worth of bytes rather than Kafka's default ten.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater.client import Admin, NewTopic, Producer
from headwater.coordination.client_quotas import ClientQuotaStore
from headwater.quotas.entities import QuotaEntity
from headwater.records import Record, build_batch
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer, free_port
from headwater.v1 import broker_pb2, broker_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.e2e

QUOTA = 60_000
MEASURE_S = 3.0
VALUE = b"g" * 2000
USER = "ANONYMOUS"  # a PLAINTEXT listener's principal


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    data_dir: Path = tmp_path_factory.mktemp("quotas")
    with Cluster(
        brokers=2,
        data_dir=data_dir,
        zookeeper=zookeeper.connect_string,
        overrides={"quota.window.num": "2"},
        broker_overrides={b: {"metrics.port": str(free_port())} for b in range(2)},
    ) as c:
        yield c


def quota_metric(cluster: Cluster, broker: int, name: str, quota: str, client_id: str) -> float:
    """A broker's per-entity quota sample (0 when the entity has none)."""
    port = cluster.broker_overrides[broker]["metrics.port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == name
                and sample.labels.get("quota") == quota
                and sample.labels.get("client_id") == client_id
            ):
                return float(sample.value)
    return 0.0


def new_topic(cluster: Cluster) -> str:
    name = f"q-{time.monotonic_ns()}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 2, 1)], timeout_ms=15000)
    for p in range(2):
        cluster.wait_for(lambda p=p: cluster.leader_for(name, p) is not None, what="a leader")
    return name


def produce_rate(
    cluster: Cluster, topic: str, partition: int, client_id: str | None = None
) -> float:
    """Bytes per second of values acknowledged on ``partition``: sending as fast as the
    producer's 128 KiB buffer lets for :data:`MEASURE_S`, then flushing."""
    with Producer(
        cluster.bootstrap,
        acks=1,
        linger_ms=0,
        buffer_memory=128 * 1024,
        max_block_ms=30_000,
        client_id=client_id,
    ) as producer:
        producer.send(topic, b"warm-up", partition=partition).result(timeout=30)
        start = time.monotonic()
        sent = 0
        while time.monotonic() < start + MEASURE_S:
            producer.send(topic, VALUE, partition=partition)
            sent += len(VALUE)
        producer.flush(timeout=60)
        return sent / (time.monotonic() - start)


def set_quota(cluster: Cluster, rate: float) -> None:
    ClientQuotaStore(cluster.zk.client).alter(
        QuotaEntity.of(user=USER), {"producer_byte_rate": rate}
    )
    time.sleep(1.0)  # every broker's watcher reads the change


def test_a_producer_above_its_quota_is_slowed_on_every_broker(cluster: Cluster) -> None:
    topic = new_topic(cluster)
    free = produce_rate(cluster, topic, 0)
    assert free > 4 * QUOTA, f"unthrottled {free:.0f} B/s is too slow to show a quota"
    set_quota(cluster, QUOTA)
    try:
        rates = {p: produce_rate(cluster, topic, p) for p in range(2)}
        for p, rate in rates.items():
            assert 0.3 * QUOTA < rate < 2.0 * QUOTA, f"partition {p}: {rate:.0f} B/s"
        set_quota(cluster, 4 * QUOTA)
        raised = {p: produce_rate(cluster, topic, p) for p in range(2)}
        for p, rate in raised.items():
            assert rate > 1.8 * rates[p], f"partition {p}: {rates[p]:.0f} then {rate:.0f} B/s"
    finally:
        ClientQuotaStore(cluster.zk.client).alter(
            QuotaEntity.of(user=USER), {"producer_byte_rate": None}
        )


def test_a_quota_on_a_client_id_slows_the_producer_with_that_client_id(cluster: Cluster) -> None:
    topic = new_topic(cluster)
    store = ClientQuotaStore(cluster.zk.client)
    store.alter(QuotaEntity.of(client_id="slow-producer"), {"producer_byte_rate": QUOTA})
    time.sleep(1.0)  # every broker's watcher reads the change
    try:
        slowed = produce_rate(cluster, topic, 0, client_id="slow-producer")
        other = produce_rate(cluster, topic, 0, client_id="another-producer")
    finally:
        store.alter(QuotaEntity.of(client_id="slow-producer"), {"producer_byte_rate": None})
    assert 0.3 * QUOTA < slowed < 2.0 * QUOTA, f"client-id slow-producer: {slowed:.0f} B/s"
    assert other > 4 * QUOTA, f"another client id is slowed too: {other:.0f} B/s"


def test_a_throttled_answer_carries_its_throttle_time(cluster: Cluster) -> None:
    topic = new_topic(cluster)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    ClientQuotaStore(cluster.zk.client).alter(
        QuotaEntity.of(client_id="raw-grpc"), {"producer_byte_rate": 1000.0}
    )
    time.sleep(1.0)
    batch = build_batch([Record(None, b"x" * 3000)])
    with grpc.insecure_channel(cluster.brokers[leader].address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        request = broker_pb2.ProduceRequest(
            acks=1,
            timeout_ms=5000,
            partitions=[broker_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)],
        )
        start = time.monotonic()
        answer = stub.Produce(request, metadata=(("client-id", "raw-grpc"),), timeout=30)
        held = time.monotonic() - start
        other = stub.Produce(request, metadata=(("client-id", "other"),), timeout=30)
    assert answer.throttle_time_ms > 1000
    assert held >= answer.throttle_time_ms / 1000 * 0.9
    assert other.throttle_time_ms == 0
    total = "headwater_client_quota_throttle_time_ms_total"
    assert (
        quota_metric(cluster, leader, total, "producer_byte_rate", "raw-grpc")
        >= answer.throttle_time_ms
    )
    assert quota_metric(cluster, leader, "headwater_client_quota_rate", "producer_byte_rate",
                        "raw-grpc") > 1000  # fmt: skip
    assert quota_metric(cluster, leader, total, "producer_byte_rate", "other") == 0


def test_a_tiny_request_percentage_throttles_every_grpc_request(cluster: Cluster) -> None:
    """0.001 percent of a thread is 10 µs of handler CPU per second: one Produce or
    Metadata request is over it, so its answer is held and carries a throttle time; a
    client id without the quota is answered at once."""
    topic = new_topic(cluster)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    store = ClientQuotaStore(cluster.zk.client)
    store.alter(QuotaEntity.of(client_id="busy-grpc"), {"request_percentage": 0.001})
    time.sleep(1.0)  # every broker's watcher reads the change
    batch = build_batch([Record(None, b"x" * 100)])
    request = broker_pb2.ProduceRequest(
        acks=1,
        timeout_ms=5000,
        partitions=[broker_pb2.ProducePartitionData(topic=topic, partition=0, records=batch)],
    )
    busy = (("client-id", "busy-grpc"),)
    try:
        with grpc.insecure_channel(cluster.brokers[leader].address) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            start = time.monotonic()
            answers = [stub.Produce(request, metadata=busy, timeout=30) for _ in range(2)]
            held = time.monotonic() - start
            start = time.monotonic()
            stub.Metadata(broker_pb2.MetadataRequest(topics=[topic]), metadata=busy, timeout=30)
            metadata_held = time.monotonic() - start
            streamed = list(stub.ProduceStream(iter([request, request]), metadata=busy, timeout=30))
            start = time.monotonic()
            free = [
                stub.Produce(request, metadata=(("client-id", "idle-grpc"),), timeout=30)
                for _ in range(2)
            ]
            free_s = time.monotonic() - start
    finally:
        store.alter(QuotaEntity.of(client_id="busy-grpc"), {"request_percentage": None})
    assert all(a.throttle_time_ms > 0 for a in answers), [a.throttle_time_ms for a in answers]
    assert held >= sum(a.throttle_time_ms for a in answers) / 1000 * 0.9
    assert metadata_held > 0.5, f"a throttled Metadata request took {metadata_held:.3f} s"
    assert [a.throttle_time_ms > 0 for a in streamed] == [True, True]
    assert all(a.throttle_time_ms == 0 for a in free)
    assert free_s < 0.5 * held, f"unthrottled {free_s:.3f} s, throttled {held:.3f} s"
    total = "headwater_client_quota_throttle_time_ms_total"
    assert quota_metric(cluster, leader, total, "request_percentage", "busy-grpc") >= sum(
        a.throttle_time_ms for a in answers
    )
    assert quota_metric(cluster, leader, total, "request_percentage", "idle-grpc") == 0


def quotas_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", "quotas", *args,
         "--bootstrap-server", cluster.bootstrap, "--output", "json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_cli_sets_describes_and_deletes_quotas_over_grpc(cluster: Cluster) -> None:
    set_ = quotas_cli(
        cluster,
        "alter", "--user", "carol", "--client-id-default",
        "--add-config", "producer_byte_rate=4096,request_percentage=25",
    )  # fmt: skip
    assert set_.returncode == 0, set_.stderr
    assert cluster.zk.client.exists("/config/users/carol/clients/<default>") is not None
    described = quotas_cli(cluster, "describe", "--user", "carol", "--client-id-default")
    assert json.loads(described.stdout) == [
        {
            "entity": {"client-id": None, "user": "carol"},
            "quotas": {"producer_byte_rate": 4096.0, "request_percentage": 25.0},
        }
    ]
    # the user alone is another entity (strict), which has no quota
    assert json.loads(quotas_cli(cluster, "describe", "--user", "carol").stdout) == []
    quotas_cli(
        cluster, "alter", "--user", "carol", "--client-id-default", "--delete-config",
        "producer_byte_rate",
    )  # fmt: skip
    with Admin(cluster.bootstrap) as admin:
        found = admin.describe_client_quotas()
    assert found[(("client-id", None), ("user", "carol"))] == {"request_percentage": 25.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--user", "dave", "--add-config", "producer_byte_rate=-1"), "must be > 0"),
        (("--client-id", "x", "--add-config", "no_such=1"), "Unknown quota key: no_such"),
        (("--user", "", "--add-config", "producer_byte_rate=1"), "Empty user not supported"),
        (
            ("--user", "d", "--add-config", "controller_mutation_rate=1"),
            "controller_mutation_rate is not supported",
        ),
    ],
)
def test_bad_quotas_are_refused_over_grpc(
    cluster: Cluster, args: tuple[str, ...], message: str
) -> None:
    done = quotas_cli(cluster, "alter", *args)
    assert done.returncode != 0
    assert "INVALID_REQUEST" in done.stderr and message in done.stderr
