"""Client quotas through the Kafka listener: Kafka's own ``kafka-configs`` sets, describes
and deletes user and client-id quotas (stored where Headwater's brokers read them), bad
quotas are refused with Kafka's messages, and a kafka-python producer above its
``producer_byte_rate`` is slowed to about the quota on every broker, and sped up when
the quota is raised.

The brokers measure rates over 2 samples of 1 s (``quota.window.num=2``), so a quota
bites after about one second's worth of bytes rather than Kafka's default ten.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.testing import Cluster

from .test_kafka_tools import (
    CONFIGS,
    KafkaTools,
    _kafka_cluster,
    bootstrap,
    new_topic,
    tools,  # noqa: F401 (a fixture: Kafka's tools)
    unique,
)

pytestmark = pytest.mark.e2e

QUOTA = 60_000
"""Bytes per second: far below what one producer manages on this machine unthrottled."""
MEASURE_S = 4.0
VALUE = b"q" * 2000
OUTSTANDING = 128 * 1024


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    data_dir: Path = tmp_path_factory.mktemp("kafka-quotas")
    with _kafka_cluster(2, data_dir, **{"quota.window.num": "2"}) as c:
        yield c


def produce_rate(cluster: Cluster, topic: str, partition: int, client_id: str) -> float:
    """Bytes per second of values a kafka-python producer gets acknowledged on
    ``partition`` over :data:`MEASURE_S`, sending as fast as it is let."""
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap(cluster),
        client_id=client_id,
        acks=1,
        linger_ms=0,
        max_in_flight_requests_per_connection=1,
        batch_size=16 * 1024,
        max_block_ms=30_000,
    )
    try:
        producer.send(topic, b"warm-up", partition=partition).get(timeout=30)
        acked = [0]

        def count(_metadata: object) -> None:
            acked[0] += len(VALUE)

        start = time.monotonic()
        deadline = start + MEASURE_S
        sent = 0
        while time.monotonic() < deadline:
            if sent - acked[0] > OUTSTANDING:
                time.sleep(0.002)  # at most OUTSTANDING bytes buffered in the producer
                continue
            producer.send(topic, VALUE, partition=partition).add_callback(count)
            sent += len(VALUE)
        elapsed = time.monotonic() - start
        return acked[0] / elapsed
    finally:
        producer.close(timeout=15)


def test_kafka_configs_sets_describes_and_deletes_quotas(
    cluster: Cluster,
    tools: KafkaTools,  # noqa: F811 (the fixture imported above)
) -> None:
    user = unique("user")
    users = f"--bootstrap-server {bootstrap(cluster)} --entity-type users --entity-name {user}"
    done = tools.ok(
        CONFIGS, f"{users} --alter --add-config producer_byte_rate=1024,request_percentage=50"
    )
    assert f"Completed updating config for user {user}." in done.stdout
    described = tools.ok(CONFIGS, f"{users} --describe").stdout
    assert f"Quota configs for user-principal '{user}' are" in described
    assert "producer_byte_rate=1024.0" in described and "request_percentage=50.0" in described
    both = (
        f"--bootstrap-server {bootstrap(cluster)} --entity-type users --entity-name {user} "
        "--entity-type clients --entity-default"
    )
    tools.ok(CONFIGS, f"{both} --alter --add-config consumer_byte_rate=2048")
    assert "consumer_byte_rate=2048.0" in tools.ok(CONFIGS, f"{both} --describe").stdout
    assert cluster.zk.client.exists(f"/config/users/{user}/clients/<default>") is not None
    tools.ok(CONFIGS, f"{users} --alter --delete-config producer_byte_rate")
    after = tools.ok(CONFIGS, f"{users} --describe").stdout
    assert "producer_byte_rate" not in after and "request_percentage=50.0" in after


def test_bad_quotas_are_refused_with_kafkas_errors(
    cluster: Cluster,
    tools: KafkaTools,  # noqa: F811 (the fixture imported above)
) -> None:
    clients = f"--bootstrap-server {bootstrap(cluster)} --entity-type clients --entity-name c1"
    negative = tools.run(CONFIGS, f"{clients} --alter --add-config producer_byte_rate=-5")
    assert negative.returncode != 0
    assert "must be > 0" in negative.output
    mutation = tools.run(CONFIGS, f"{clients} --alter --add-config controller_mutation_rate=5")
    assert mutation.returncode != 0
    assert "controller_mutation_rate is not supported" in mutation.output


def test_a_producer_above_its_quota_is_slowed_on_every_broker(
    cluster: Cluster,
    tools: KafkaTools,  # noqa: F811 (the fixture imported above)
) -> None:
    topic = new_topic(cluster, partitions=2)
    leaders = {cluster.leader_for(topic, p) for p in range(2)}
    client_id = unique("slow")
    free = produce_rate(cluster, topic, 0, client_id)
    assert free > 4 * QUOTA, f"unthrottled {free:.0f} B/s is too slow to show a quota"
    clients = (
        f"--bootstrap-server {bootstrap(cluster)} --entity-type clients --entity-name {client_id}"
    )
    tools.ok(CONFIGS, f"{clients} --alter --add-config producer_byte_rate={QUOTA}")
    time.sleep(1.0)  # every broker's watcher reads the change
    rates = {p: produce_rate(cluster, topic, p, client_id) for p in range(2)}
    for p, rate in rates.items():
        # one window's burst, then about the quota
        assert rate < 2.0 * QUOTA, f"partition {p} (leaders {leaders}): {rate:.0f} B/s"
        assert rate > 0.3 * QUOTA, f"partition {p}: {rate:.0f} B/s, starved"
    tools.ok(CONFIGS, f"{clients} --alter --add-config producer_byte_rate={4 * QUOTA}")
    time.sleep(1.0)
    raised = {p: produce_rate(cluster, topic, p, client_id) for p in range(2)}
    for p, rate in raised.items():
        assert rate > 1.8 * rates[p], f"partition {p}: {rates[p]:.0f} then {rate:.0f} B/s"
        assert rate < 8.0 * QUOTA
