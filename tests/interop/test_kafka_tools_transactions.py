"""Apache Kafka's transaction tools, unchanged, against Headwater's Kafka listener.

Kafka 3.9.1's classes (``scripts/fetch-kafka-tools.sh``), run as their shell scripts
run them, against a two-broker cluster with Kafka listeners:

* kafka-transactions (``TransactionsCommand``): ``list`` names an open transaction with
  its state, ``describe`` its producer id, state and partition, ``describe-producers``
  the partition's transactional producer and the offset its transaction started at;
* kafka-producer-perf-test (``ProducerPerformance``) with ``--transactional-id`` and
  ``--transaction-duration-ms 100``: every record it sent is read by Headwater's gRPC
  ``read_committed`` consumer.

Without Java or the jars the tests skip, saying why, unless ``CI`` is set (see
``test_kafka_tools``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from headwater.client import Consumer, Producer, TopicPartition
from headwater.testing import Cluster

from .test_kafka_tools import (
    KafkaTools,
    _kafka_cluster,
    bootstrap,
    new_topic,
    tools,  # noqa: F401 (a fixture: Kafka's tools)
    unique,
)

pytestmark = pytest.mark.e2e

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with _kafka_cluster(
        2,
        tmp_path_factory.mktemp("kafka-tools-txn"),
        **{
            "transaction.state.log.num.partitions": "3",
            "transaction.state.log.replication.factor": "2",
            "transaction.state.log.min.isr": "1",
        },
    ) as c:
        yield c


def test_kafka_transactions_lists_and_describes_an_open_transaction(
    cluster: Cluster,
    tools: KafkaTools,  # noqa: F811 (the fixture imported above)
) -> None:
    topic = new_topic(cluster, 1)
    tid = unique("open")
    with Producer(cluster.bootstrap, transactional_id=tid) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"pending", partition=0)
        producer.flush(30)
        servers = f"--bootstrap-server {bootstrap(cluster)}"

        listed = tools.ok(TRANSACTIONS, f"{servers} list").stdout
        (row,) = [line.split() for line in listed.splitlines() if tid in line]
        assert "Ongoing" in row, listed

        described = tools.ok(TRANSACTIONS, f"{servers} describe --transactional-id {tid}")
        assert "Ongoing" in described.stdout and f"{topic}-0" in described.stdout, described

        producers = tools.ok(
            TRANSACTIONS, f"{servers} describe-producers --topic {topic} --partition 0"
        ).stdout
        lines = [line.split() for line in producers.splitlines() if line.strip()]
        assert lines[0][:2] == ["ProducerId", "ProducerEpoch"], producers
        (producer_row,) = lines[1:]
        header = lines[0]
        # The open transaction started at the partition's first offset.
        assert producer_row[header.index("CurrentTransactionStartOffset")] == "0", producers
        producer.commit_transaction()

    described = tools.ok(TRANSACTIONS, f"{servers} describe --transactional-id {tid}")
    assert "CompleteCommit" in described.stdout, described
    missing = tools.run(TRANSACTIONS, f"{servers} describe --transactional-id {unique('no')}")
    assert missing.returncode != 0 and "could not be found" in missing.output, missing


def test_producer_performance_with_transactions_is_read_committed(
    cluster: Cluster,
    tools: KafkaTools,  # noqa: F811 (the fixture imported above)
) -> None:
    topic = new_topic(cluster, 2)
    records = 3000
    ran = tools.ok(
        PRODUCER_PERFORMANCE,
        f"--topic {topic} --num-records {records} --record-size 100 --throughput -1 "
        f"--producer-props bootstrap.servers={bootstrap(cluster)} "
        f"--transactional-id {unique('perf')} --transaction-duration-ms 100",
    )
    assert f"{records} records sent" in ran.stdout, ran.output
    consumer = Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    got = 0
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        deadline = time.monotonic() + 30
        while got < records and time.monotonic() < deadline:
            got += len(consumer.poll(500))
    finally:
        consumer.close()
    assert got == records
