"""The Kafka-protocol listener against clients no one here wrote.

A two-broker cluster (each broker with a gRPC listener and a Kafka listener,
``kafka.listeners=KAFKA://...``) and a two-partition topic whose leaders are on both
brokers, so a client must follow Metadata to each broker's advertised Kafka address:

* kafka-python and confluent-kafka (librdkafka) produce records with keys, headers and
  timestamps and read them back at the offsets the produce answered;
* Apache Kafka's Java clients (kafka-clients 3.9, ``KafkaClients.java``) produce
  idempotently with acks=all, consume in a group and commit; its AdminClient
  (``KafkaAdmin.java``, what kafka-configs, kafka-acls, kafka-delete-records and
  kafka-consumer-groups call) alters and describes configs, creates, describes and
  deletes ACLs, deletes records and a group's offsets;
* DescribeCluster names every broker at its Kafka address;
* topic administration: kafka-python's admin client creates (with a config, three
  partitions, RF=2), describes its configs, grows and deletes it;
* configs: kafka-python (AlterConfigs and IncrementalAlterConfigs) and librdkafka
  (IncrementalAlterConfigs) alter topic and broker configs and describe them; a bad value,
  an APPEND to a scalar config and an unknown topic answer Kafka's errors and change nothing;
* ACLs: kafka-python and librdkafka create, describe and delete ACLs, stored where the
  gRPC AclService keeps them (Headwater's admin client sees them);
* DeleteRecords: kafka-python and librdkafka move a partition's log start, ListOffsets and
  a fetch from the old start show it; an offset past the high watermark is refused;
* OffsetDelete: kafka-python's admin client deletes one partition's committed offset of an
  empty group (the other stays); an unknown group is GROUP_ID_NOT_FOUND;
* replicas: kafka-python describes each broker's log dirs, moves a partition to the other
  broker (AlterPartitionReassignments, ListPartitionReassignments) and runs a preferred
  leader election;
* consumer groups: kafka-python and librdkafka subscribe, consume and commit, a new
  member resumes from the commit, and Headwater's gRPC consumer resumes a group
  committed over Kafka; kafka-python's admin client describes, lists and deletes groups;
* KIP-848 consumer groups: two Java consumers with ``group.protocol=consumer``
  (``KafkaConsumerProtocol.java``) share a topic, and when one leaves the other resumes
  its partition from its commit; ConsumerGroupHeartbeat's errors (GROUP_ID_NOT_FOUND,
  UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, INVALID_REQUEST), its assignment by the topic id
  Metadata gives, ConsumerGroupDescribe, and random heartbeats that are all answered;
* kcat (librdkafka's command line) lists the metadata, produces and consumes;
* both doors at once: a record produced over gRPC is read over Kafka with the same
  offset, key, headers and timestamp, and the other way round;
* fetch sessions (KIP-227): an incremental Fetch names only partitions with news;
* Fetch v13+ by topic id: librdkafka and Kafka's Java consumer fetch at v13+ (the
  brokers' ``headwater_kafka_requests_total`` by version shows it); an id no topic has
  is UNKNOWN_TOPIC_ID, a by-name continuation of a by-id session
  FETCH_SESSION_TOPIC_ID_ERROR; a topic's id is the same on both brokers, after a
  restart and after a controller failover, and a topic deleted and created again gets a
  new one (its old id: UNKNOWN_TOPIC_ID); DeleteTopics v6 deletes by id;
* KIP-951: Fetch v16+ and Produce v10+ sent to a broker that does not lead the partition
  name the leader and its Kafka address;
* KIP-320: OffsetForLeaderEpoch v2 and v4 on the wire (the leader's end offset of the
  epoch Metadata advertises, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER), and a
  librdkafka consumer that checks its position with it after a leader change (replicas
  reordered and a preferred election) and reads every record once;
* bad input: a produce of garbage records is refused with an error and nothing is
  written; negative and huge sizes, a truncated frame, an unknown API key or garbage
  close that connection with the reason in the broker's log, and the broker keeps
  serving other clients; ApiVersions above v3 is answered at v0 with UNSUPPORTED_VERSION
  and ApiVersions' own range alone (KIP-511).
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import io
import shutil
import socket
import struct
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from headwater.coordination.model import decode_topic_id
from headwater.kafka.protocol import SUPPORTED
from headwater.security import acls
from headwater.testing import Cluster
from headwater.testing.zookeeper import free_port
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from .test_kafka_interop import kafka_classpath  # noqa: F401 (a fixture: the Kafka jars)

pytestmark = pytest.mark.e2e

KAFKA = "KAFKA"
JAVA_PROGRAM = Path(__file__).with_name("KafkaClients.java")
JAVA_ADMIN = Path(__file__).with_name("KafkaAdmin.java")
JAVA_CONSUMER_PROTOCOL = Path(__file__).with_name("KafkaConsumerProtocol.java")
BASE_TS = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(
        brokers=2,
        data_dir=tmp_path_factory.mktemp("kafka-listener"),
        kafka_listener=True,
        overrides={
            # ACLs are stored and served (CreateAcls ...); every client here is a super user.
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
        broker_overrides={b: {"metrics.port": str(free_port())} for b in range(2)},
    ) as c:
        yield c


def kafka_bootstrap(cluster: Cluster) -> str:
    return cluster.kafka_bootstrap


def request_versions(cluster: Cluster, request: str = "Fetch") -> collections.Counter[int]:
    """How many ``request`` requests of each version the brokers' Kafka listeners have
    received (``headwater_kafka_requests_total``, from each broker's metrics)."""
    seen: collections.Counter[int] = collections.Counter()
    for overrides in cluster.broker_overrides.values():
        port = overrides["metrics.port"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (
                    sample.name == "headwater_kafka_requests_total"
                    and sample.labels.get("listener") == KAFKA
                    and sample.labels.get("request") == request
                ):
                    seen[int(sample.labels["version"])] += int(sample.value)
    return seen


@contextlib.contextmanager
def versions_used(cluster: Cluster, request: str = "Fetch") -> Iterator[collections.Counter[int]]:
    """The versions of ``request`` received while the block runs (the tests of this module
    run one at a time and close their clients, so these are the block's clients')."""
    used: collections.Counter[int] = collections.Counter()
    before = request_versions(cluster, request)
    yield used
    used.update(request_versions(cluster, request) - before)


def new_topic(cluster: Cluster, partitions: int = 2) -> str:
    name = f"k-{uuid.uuid4().hex[:10]}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=15000)
    for p in range(partitions):
        cluster.wait_for(lambda p=p: cluster.leader_for(name, p) is not None, what="a leader")
    return name


def expected_records(
    n: int = 6,
) -> list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]], int]]:
    """``(partition, key, value, headers, timestamp)``: both partitions, a null key."""
    return [
        (
            i % 2,
            None if i == 3 else f"key-{i}".encode(),
            f"value-{i}".encode() * (i + 1),
            [("trace", f"t{i}".encode()), ("n", bytes([i]))] if i % 3 else [],
            BASE_TS + i * 1000,
        )
        for i in range(n)
    ]


# -- kafka-python --------------------------------------------------------------------------


def test_kafka_python_produces_and_consumes_with_keys_headers_and_timestamps(
    cluster: Cluster,
) -> None:
    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster)
    records = expected_records()
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    try:
        futures = [
            producer.send(topic, value=v, key=k, headers=h, partition=p, timestamp_ms=ts)
            for p, k, v, h, ts in records
        ]
        producer.flush(30)
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(10)
    assert [(m.partition, m.offset) for m in metas] == [(i % 2, i // 2) for i in range(6)]

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    try:
        consumer.assign([kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)])
        got = []
        for message in consumer:
            got.append(message)
            if len(got) == len(records):
                break
    finally:
        consumer.close()
    by_place = {(m.partition, m.offset): m for m in got}
    for (p, k, v, h, ts), meta in zip(records, metas, strict=True):
        m = by_place[(p, meta.offset)]
        assert (m.key, m.value, list(m.headers), m.timestamp) == (k, v, h, ts)


def test_kafka_python_produces_with_acks_0(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster, partitions=1)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks=0)
    try:
        for _ in range(5):
            producer.send(topic, value=b"fire-and-forget", partition=0).get(timeout=30)
    finally:
        producer.close(10)
    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_bootstrap(cluster))
    tp = kafka.TopicPartition(topic, 0)
    try:
        deadline = time.monotonic() + 15
        while consumer.end_offsets([tp])[tp] < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert consumer.end_offsets([tp])[tp] == 5
    finally:
        consumer.close()


def test_kafka_python_lists_offsets_and_reads_metadata(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks=1)
    for i in range(3):
        producer.send(topic, value=b"x", partition=1, timestamp_ms=BASE_TS + i).get(timeout=30)
    producer.close(10)
    consumer = kafka.KafkaConsumer(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        assert consumer.partitions_for_topic(topic) == {0, 1}
        tps = [kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)]
        assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert consumer.end_offsets(tps) == {tps[0]: 0, tps[1]: 3}
        found = consumer.offsets_for_times({tps[1]: BASE_TS + 1})
        assert found[tps[1]].offset == 1 and found[tps[1]].timestamp == BASE_TS + 1
    finally:
        consumer.close()


# -- confluent-kafka (librdkafka) ------------------------------------------------------------


def test_librdkafka_produces_and_consumes_with_keys_headers_and_timestamps(
    cluster: Cluster,
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(cluster)
    records = expected_records()
    producer = ck.Producer({"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all"})
    delivered: list[Any] = []
    for p, k, v, h, ts in records:
        producer.produce(
            topic,
            value=v,
            key=k,
            headers=h,
            partition=p,
            timestamp=ts,
            on_delivery=lambda err, msg: delivered.append((err, msg)),
        )
    assert producer.flush(30) == 0
    assert [err for err, _ in delivered] == [None] * len(records)
    offsets = {(m.partition(), m.value()): m.offset() for _, m in delivered}

    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": "unused",  # required by librdkafka; assign() does not join a group
            "enable.auto.commit": False,
        }
    )
    with versions_used(cluster) as fetches:
        try:
            consumer.assign([ck.TopicPartition(topic, 0, 0), ck.TopicPartition(topic, 1, 0)])
            got: list[Any] = []
            deadline = time.monotonic() + 20
            while len(got) < len(records) and time.monotonic() < deadline:
                m = consumer.poll(1.0)
                if m is not None:
                    assert m.error() is None, m.error()
                    got.append(m)
        finally:
            consumer.close()
    assert len(got) == len(records)
    # librdkafka 2.x fetches by topic id (Fetch v13+) from a broker that offers it.
    assert fetches and min(fetches) >= 13, fetches
    by_value = {m.value(): m for m in got}
    for p, k, v, h, ts in records:
        m = by_value[v]
        assert (m.partition(), m.offset()) == (p, offsets[(p, v)])
        assert m.key() == k
        assert list(m.headers() or []) == h
        assert m.timestamp() == (ck.TIMESTAMP_CREATE_TIME, ts)


# -- Apache Kafka's Java clients --------------------------------------------------------------


def test_kafka_java_clients_produce_consume_in_a_group_and_commit(
    cluster: Cluster,
    kafka_classpath: str,  # noqa: F811 (the fixture imported above)
) -> None:
    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with versions_used(cluster) as fetches:
        done = subprocess.run(
            [
                "java", "-cp", kafka_classpath, str(JAVA_PROGRAM), kafka_bootstrap(cluster),
                topic, group,
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # Kafka 3.9's consumer fetches at v17, by topic id, in incremental fetch sessions.
    assert set(fetches) == {17}, fetches
    lines = [line.split(" ") for line in done.stdout.splitlines()]
    produced = sorted((int(p), int(o)) for kind, p, o, *_ in lines if kind == "produced")
    assert produced == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    consumed = sorted(
        (int(p), int(o), key, value, int(ts), headers)
        for kind, p, o, key, value, ts, headers in (x for x in lines if x[0] == "consumed")
    )
    assert consumed == sorted(
        (i % 2, i // 2, "-" if i == 3 else f"key-{i}", f"value-{i}", BASE_TS + i, f"n=h{i};")
        for i in range(6)
    )
    committed = sorted((int(p), int(o)) for kind, p, o, *_ in lines if kind == "committed")
    assert committed == [(0, 3), (1, 3)]


def test_kafka_java_consumer_protocol_rebalances_and_resumes_from_commits(
    cluster: Cluster,
    kafka_classpath: str,  # noqa: F811 (the fixture imported above)
) -> None:
    """group.protocol=consumer (KIP-848): ConsumerGroupHeartbeat over the Kafka listener."""
    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with Producer(cluster.bootstrap) as producer:
        for i in range(20):
            producer.send(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush()
    done = subprocess.run(
        [
            "java",
            "-cp",
            kafka_classpath,
            str(JAVA_CONSUMER_PROTOCOL),
            kafka_bootstrap(cluster),
            topic,
            group,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line.split(" ") for line in done.stdout.splitlines()]
    assigned = [(who, ps) for kind, who, ps in (x for x in lines if x[0] == "assigned")]
    assert assigned[0] == ("a", "0,1")
    assert sorted([assigned[1][1], assigned[2][1]]) == ["0", "1"]
    assert assigned[3] == ("a", "0,1")
    moved = assigned[2][1]
    assert ["committed", moved, "5"] in lines
    assert ["resumed", moved, "5"] in lines


def test_kafka_java_admin_client_configs_acls_records_and_group_offsets(
    cluster: Cluster,
    kafka_classpath: str,  # noqa: F811 (the fixture imported above)
) -> None:
    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with Producer(cluster.bootstrap) as producer:
        for i in range(3):
            producer.send(topic, f"v{i}".encode(), partition=0)
        producer.flush()
    done = subprocess.run(
        ["java", "-cp", kafka_classpath, str(JAVA_ADMIN), kafka_bootstrap(cluster), topic, group],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "refused InvalidConfigurationException" in lines
    assert "config retention.ms 3000 DYNAMIC_TOPIC_CONFIG" in lines
    assert "config cleanup.policy compact,delete DYNAMIC_TOPIC_CONFIG" in lines
    assert cluster.zk.get_topic_config(topic)["retention.ms"] == "3000"
    assert f"acl User:carol READ LITERAL {topic}" in lines
    assert "acls-deleted 1" in lines
    assert "low-watermark 1" in lines
    assert "offsets 1=0" in lines


# -- kcat ------------------------------------------------------------------------------------


def wait_for_every_kafka_listener_to_list(cluster: Cluster, topic: str, partitions: int) -> None:
    """Every broker's Metadata answer has ``topic`` with a leader for each partition.

    A new topic reaches each broker's metadata cache a moment after CreateTopics returns
    (in Kafka too); a client that does not retry must wait for it.
    """
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=topic),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )

    def listed(port: int) -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            (answer,) = _exchange(sock, 1, request).topics
        return (
            answer.error_code.value == 0
            and len(answer.partitions) == partitions
            and all(p.error_code.value == 0 and p.leader_id >= 0 for p in answer.partitions)
        )

    ports = cluster.kafka_ports.values()
    cluster.wait_for(
        lambda: all(listed(port) for port in ports),
        timeout_s=30,
        what=f"every Kafka listener to list {topic}",
    )


def test_kcat_lists_metadata_produces_and_consumes(cluster: Cluster) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        pytest.skip("kcat is not installed (scripts/install-system-deps.sh installs it)")
    topic = new_topic(cluster)
    # kcat -L reports what the one broker it asks answers, without retrying.
    wait_for_every_kafka_listener_to_list(cluster, topic, partitions=2)
    bootstrap = kafka_bootstrap(cluster)
    listing = subprocess.run(
        [kcat, "-b", bootstrap, "-L", "-t", topic], capture_output=True, text=True, timeout=30
    )
    assert listing.returncode == 0, listing.stderr
    assert "2 brokers:" in listing.stdout
    for broker_id, port in cluster.kafka_ports.items():
        assert f"broker {broker_id} at 127.0.0.1:{port}" in listing.stdout
    assert f'topic "{topic}" with 2 partitions' in listing.stdout
    produced = subprocess.run(
        [kcat, "-b", bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", "-H", "h=v"],
        input="a:one\nb:two\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [
            kcat,
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %k %s %h\n",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["0 a one h=v", "1 b two h=v"]


# -- both doors --------------------------------------------------------------------------------


def test_a_record_produced_over_grpc_reads_the_same_over_kafka_and_back(
    cluster: Cluster,
) -> None:
    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster, partitions=1)
    producer = Producer(cluster.bootstrap)
    try:
        meta = producer.send(
            topic, b"from-grpc", key=b"g", headers=[("h", b"1")], partition=0, timestamp_ms=BASE_TS
        ).result(timeout=30)
    finally:
        producer.close()
    kp = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    kmeta = kp.send(
        topic,
        value=b"from-kafka",
        key=b"k",
        headers=[("h", b"2")],
        partition=0,
        timestamp_ms=BASE_TS + 5,
    ).get(timeout=30)
    kp.close(10)
    assert (meta.offset, kmeta.offset) == (0, 1)

    kc = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    kc.assign([kafka.TopicPartition(topic, 0)])
    over_kafka = []
    for m in kc:
        over_kafka.append((m.offset, m.key, m.value, list(m.headers), m.timestamp))
        if len(over_kafka) == 2:
            break
    kc.close()

    gc = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    try:
        gc.assign([TopicPartition(topic, 0)])
        over_grpc: list[Any] = []
        deadline = time.monotonic() + 15
        while len(over_grpc) < 2 and time.monotonic() < deadline:
            over_grpc += gc.poll(1000)
    finally:
        gc.close()
    expected = [
        (0, b"g", b"from-grpc", [("h", b"1")], BASE_TS),
        (1, b"k", b"from-kafka", [("h", b"2")], BASE_TS + 5),
    ]
    assert over_kafka == expected
    assert [
        (r.offset, r.key, r.value, [(k, v) for k, v in r.headers], r.timestamp_ms)
        for r in over_grpc
    ] == expected


# -- topic administration ----------------------------------------------------------------------


def test_kafka_python_admin_creates_and_deletes_topics(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import ConfigResource, KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaNewPartitions
    from kafka.admin import NewTopic as KafkaNewTopic

    name = f"adm-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        admin.create_topics(
            [KafkaNewTopic(name, 3, 2, topic_configs={"retention.ms": "600000"})],
            timeout_ms=30000,
        )
        with pytest.raises(kafka.errors.TopicAlreadyExistsError):
            admin.create_topics([KafkaNewTopic(name, 1, 1)], timeout_ms=30000)
        assert name in admin.list_topics()
        assert cluster.zk.get_topic_config(name).get("retention.ms") == "600000"
        every = admin.describe_configs([ConfigResource("TOPIC", name)], config_filter="all")
        configs = every["topic"][name]
        assert configs["retention.ms"]["value"] == "600000"
        assert configs["cleanup.policy"]["value"] == "delete"
        modified = admin.describe_configs([ConfigResource("TOPIC", name)])["topic"][name]
        assert set(modified) == {"retention.ms"}  # the one override (DYNAMIC_TOPIC_CONFIG)
        assignment = cluster.zk.get_assignment(name)
        assert assignment is not None
        assert (assignment.num_partitions, assignment.replication_factor) == (3, 2)
        producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
        assert producer.send(name, b"x", partition=2).get(timeout=30).offset == 0
        producer.close(10)
        admin.create_partitions({name: KafkaNewPartitions(5)}, timeout_ms=30000)
        assignment = cluster.zk.get_assignment(name)
        assert assignment is not None and assignment.num_partitions == 5
        admin.delete_topics([name], timeout_ms=30000)
        assert name not in admin.list_topics()
    finally:
        admin.close()


# -- configs and ACLs -----------------------------------------------------------------------


def test_kafka_python_alters_and_describes_topic_and_broker_configs(cluster: Cluster) -> None:
    pytest.importorskip("kafka")
    from kafka.admin import ConfigResource, KafkaAdminClient

    name = new_topic(cluster, partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        # AlterConfigs replaces the overrides; kafka-python sends the other overrides
        # (DescribeConfigs' DYNAMIC_TOPIC_CONFIG ones) along to keep them
        admin.alter_configs(
            [ConfigResource("TOPIC", name, configs={"retention.ms": "1000"})], incremental=False
        )
        assert cluster.zk.get_topic_config(name) == {"retention.ms": "1000"}
        admin.alter_configs(
            [ConfigResource("TOPIC", name, configs={"segment.bytes": "1048576"})],
            incremental=False,
        )
        assert cluster.zk.get_topic_config(name) == {
            "retention.ms": "1000",
            "segment.bytes": "1048576",
        }
        # IncrementalAlterConfigs: SET, APPEND to a list from its default, DELETE
        admin.alter_configs(
            [
                ConfigResource(
                    "TOPIC",
                    name,
                    configs={
                        "retention.ms": "2000",
                        "cleanup.policy": ("APPEND", "compact"),
                        "segment.bytes": ("DELETE", None),
                    },
                )
            ]
        )
        overrides = cluster.zk.get_topic_config(name)
        assert overrides["retention.ms"] == "2000"
        assert set(overrides["cleanup.policy"].split(",")) == {"delete", "compact"}
        assert "segment.bytes" not in overrides
        modified = admin.describe_configs([ConfigResource("TOPIC", name)])["topic"][name]
        assert set(modified) == {"retention.ms", "cleanup.policy"}
        # a broker's dynamic throttle, set and described, then its static settings
        admin.alter_configs(
            [ConfigResource("BROKER", "0", configs={"leader.replication.throttled.rate": "5000"})]
        )
        assert cluster.zk.get_broker_config("0") == {"leader.replication.throttled.rate": "5000"}
        broker = admin.describe_configs([ConfigResource("BROKER", "0")], config_filter="all")
        configs = broker["broker"]["0"]
        assert configs["leader.replication.throttled.rate"]["value"] == "5000"
        assert configs["broker.id"]["value"] == "0"
        admin.alter_configs(
            [
                ConfigResource(
                    "BROKER", "0", configs={"leader.replication.throttled.rate": ("DELETE", None)}
                )
            ]
        )
        assert cluster.zk.get_broker_config("0") == {}
    finally:
        admin.close()


def test_librdkafka_config_changes_and_their_errors(cluster: Cluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    name = new_topic(cluster, partitions=1)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})

    def alter(topic: str, key: str, value: str | None, op: Any) -> Any:
        entry = ConfigEntry(key, value, incremental_operation=op)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        return admin.incremental_alter_configs([resource])[resource].result(timeout=30)

    alter(name, "max.message.bytes", "20000", AlterConfigOpType.SET)
    assert cluster.zk.get_topic_config(name) == {"max.message.bytes": "20000"}
    resource = ConfigResource(ResourceType.TOPIC, name)
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["max.message.bytes"].value == "20000"
    assert described["max.message.bytes"].source == ck.admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["retention.ms"].source == ck.admin.ConfigSource.STATIC_BROKER_CONFIG.value

    refusals = [
        (name, "retention.ms", "soon", AlterConfigOpType.SET, "INVALID_CONFIG"),
        (name, "no.such.config", "1", AlterConfigOpType.SET, "INVALID_CONFIG"),
        (name, "retention.ms", "5", AlterConfigOpType.APPEND, "INVALID_REQUEST"),
        ("no-such-topic", "retention.ms", "5", AlterConfigOpType.SET, "UNKNOWN_TOPIC_OR_PART"),
    ]
    for topic, key, value, op, code in refusals:
        with pytest.raises(ck.KafkaException) as caught:
            alter(topic, key, value, op)
        assert caught.value.args[0].name() == code, (key, op)
    assert cluster.zk.get_topic_config(name) == {"max.message.bytes": "20000"}
    checked = ConfigResource(
        ResourceType.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([checked], validate_only=True)[checked].result(timeout=30)
    assert cluster.zk.get_topic_config(name) == {"max.message.bytes": "20000"}

    broker = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([broker])[broker].result(timeout=30)
    assert configs["broker.id"].value == "1"
    assert configs["broker.id"].is_read_only
    static = ConfigEntry("num.partitions", "7", incremental_operation=AlterConfigOpType.SET)
    refused = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[static])
    with pytest.raises(ck.KafkaException) as caught:
        admin.incremental_alter_configs([refused])[refused].result(timeout=30)
    assert caught.value.args[0].name() == "INVALID_REQUEST"


def test_kafka_python_creates_describes_and_deletes_acls(cluster: Cluster) -> None:
    pytest.importorskip("kafka")
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    topic = f"acl-{uuid.uuid4().hex[:8]}"
    read = ACL(
        principal="User:alice",
        host="*",
        operation=ACLOperation.READ,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, topic),
    )
    wanted = ACLFilter(
        principal="User:alice",
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(
            ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL
        ),
    )
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        created = admin.create_acls([read])
        assert created["failed"] == [] and len(created["succeeded"]) == 1
        found, error = admin.describe_acls(wanted)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:alice", ACLOperation.READ, topic)
        ]
        with Admin(cluster.bootstrap) as grpc_admin:  # the gRPC door sees the same ACL
            seen = grpc_admin.describe_acls(
                acls.AclBindingFilter(acls.ResourcePatternFilter(acls.ResourceType.TOPIC, topic))
            )
            assert [str(b.entry.principal) for b in seen] == ["User:alice"]
        [(_, deleted, error)] = admin.delete_acls([wanted])
        assert error.errno == 0 and len(deleted) == 1
        assert admin.describe_acls(wanted)[0] == []
    finally:
        admin.close()


def test_librdkafka_creates_describes_and_deletes_acls(cluster: Cluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    prefix = f"acl-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    write = AclBinding(
        ResourceType.TOPIC,
        prefix,
        ResourcePatternType.PREFIXED,
        "User:bob",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    admin.create_acls([write])[write].result(timeout=30)
    match = AclBindingFilter(
        ResourceType.TOPIC,
        f"{prefix}-orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert admin.describe_acls(match).result(timeout=30) == [write]
    bad = AclBinding(
        ResourceType.TOPIC,
        prefix,
        ResourcePatternType.LITERAL,
        "bob",  # not a principal: no "User:"
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    with pytest.raises(ck.KafkaException) as caught:
        admin.create_acls([bad])[bad].result(timeout=30)
    assert caught.value.args[0].name() == "INVALID_REQUEST"
    deleted = admin.delete_acls([match])[match].result(timeout=30)
    assert deleted == [write]
    assert admin.describe_acls(match).result(timeout=30) == []


def test_delete_records_moves_the_log_start(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient

    topic = new_topic(cluster)
    with Producer(cluster.bootstrap) as producer:
        for i in range(10):
            producer.send(topic, f"v{i}".encode(), partition=i % 2)
        producer.flush()
    tp0, tp1 = kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        deleted = admin.delete_records({tp0: 2})
        assert deleted[tp0]["low_watermark"] == 2
    finally:
        admin.close()
    rdk = AdminClient({"bootstrap.servers": kafka_bootstrap(cluster)})
    past_end = ck.TopicPartition(topic, 1, 6)  # the high watermark is 5
    with pytest.raises(ck.KafkaException) as caught:
        rdk.delete_records([past_end])[past_end].result(timeout=30)
    assert caught.value.args[0].name() == "OFFSET_OUT_OF_RANGE"
    whole = ck.TopicPartition(topic, 1, -1)  # OFFSET_END: everything
    assert rdk.delete_records([whole])[whole].result(timeout=30).low_watermark == 5

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster), auto_offset_reset="earliest"
    )
    try:
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 2, tp1: 5}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 5, tp1: 5}
        consumer.assign([tp0])
        consumer.seek(tp0, 0)  # below the log start: OFFSET_OUT_OF_RANGE, reset to earliest
        got = consumer.poll(timeout_ms=10000)
        assert [r.offset for r in got.get(tp0, [])][:1] == [2]
    finally:
        consumer.close()


def test_kafka_python_deletes_a_groups_offsets(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata

    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp0, tp1 = kafka.TopicPartition(topic, 0), kafka.TopicPartition(topic, 1)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster), group_id=group, enable_auto_commit=False
    )
    try:
        consumer.assign([tp0, tp1])
        consumer.commit({tp0: OffsetAndMetadata(3, "", -1), tp1: OffsetAndMetadata(4, "", -1)})
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        deleted = admin.delete_group_offsets(group, [tp0])
        assert {tp: error.errno for tp, error in dict(deleted).items()} == {tp0: 0}
        left = admin.list_group_offsets(group)[group]
        assert {tp: o.offset for tp, o in left.items()} == {tp1: 4}
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            admin.delete_group_offsets(f"no-{group}", [tp0])
    finally:
        admin.close()


def test_kafka_python_log_dirs_reassignment_and_election(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient

    topic = new_topic(cluster, partitions=1)
    tp = kafka.TopicPartition(topic, 0)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    other = 1 - leader
    # ZooKeeper names the leader before the broker has its log: a produce waits for it
    with Producer(cluster.bootstrap) as producer:
        producer.send(topic, b"x" * 100, partition=0)
        producer.flush()
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        [described] = admin.describe_log_dirs({topic: [0]}, brokers=[leader])
        assert described["broker"] == leader
        [log_dir] = described["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["total_bytes"] > 0
        [(name, [partition])] = [(t["name"], t["partitions"]) for t in log_dir["topics"]]
        assert name == topic and partition["partition_index"] == 0
        assert partition["partition_size"] > 100 and partition["offset_lag"] == 0

        assert admin.list_partition_reassignments([tp]) == {}
        assert admin.alter_partition_reassignments({tp: [other]}, timeout_ms=30000) == {tp: None}
        cluster.wait_for(
            lambda: (
                (a := cluster.zk.get_assignment(topic)) is not None
                and a.partitions[0] == (other,)
                and not a.reassignments
            ),
            timeout_s=60,
            what="the partition on the other broker",
        )
        assert admin.list_partition_reassignments([tp]) == {}
        cluster.wait_for(lambda: cluster.leader_for(topic, 0) == other, what="the new leader")

        elected = admin.elect_leaders(0, {topic: [0]}, timeout_ms=30000, raise_errors=False)
        [result] = elected.replica_election_results
        assert result.topic == topic
        assert [(p.partition_id, p.error_code) for p in result.partition_result] == [(0, 84)]
        # 84: ELECTION_NOT_NEEDED, the leader is the preferred replica already
    finally:
        admin.close()


def test_describe_cluster_names_every_broker_on_its_kafka_listener(cluster: Cluster) -> None:
    from kio.schema.describe_cluster.v1 import DescribeClusterRequest

    port = cluster.kafka_ports[0]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answer = _exchange(
            sock, 1, DescribeClusterRequest(include_cluster_authorized_operations=False)
        )
        refused = _exchange(
            sock,
            2,
            DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2),
        )
    assert answer.error_code.value == 0
    assert answer.cluster_id and answer.controller_id in cluster.brokers
    assert {(b.broker_id, b.host, b.port) for b in answer.brokers} == {
        (b, "127.0.0.1", p) for b, p in cluster.kafka_ports.items()
    }
    assert refused.error_code.value == 42 and refused.brokers == ()  # INVALID_REQUEST


# -- consumer groups ---------------------------------------------------------------------------


def test_kafka_python_group_commits_and_a_new_member_resumes(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    for i in range(10):
        producer.send(topic, value=f"v{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.close(10)

    def member() -> Any:
        return kafka.KafkaConsumer(
            topic,
            bootstrap_servers=kafka_bootstrap(cluster),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=20000,
        )

    first = member()
    seen: list[bytes] = []
    try:
        for m in first:
            seen.append(m.value)
            if len(seen) == 6:
                break
        assert first.assignment() == {
            kafka.TopicPartition(topic, 0),
            kafka.TopicPartition(topic, 1),
        }
        first.commit()
        committed = {p: first.committed(kafka.TopicPartition(topic, p)) for p in (0, 1)}
    finally:
        first.close()
    assert sum(committed.values()) == 6

    second = member()
    rest: list[bytes] = []
    try:
        for m in second:
            rest.append(m.value)
            if len(rest) == 4:
                break
    finally:
        second.close()
    assert sorted(seen + rest) == sorted(f"v{i}".encode() for i in range(10))


def test_a_group_committed_over_kafka_resumes_over_grpc(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    for i in range(5):
        producer.send(topic, value=f"v{i}".encode(), partition=0)
    producer.flush(30)
    producer.close(10)
    tp = kafka.TopicPartition(topic, 0)
    over_kafka = kafka.KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(cluster), group_id=group, enable_auto_commit=False
    )
    try:
        over_kafka.commit({tp: kafka.OffsetAndMetadata(3, "", -1)})
        assert over_kafka.committed(tp) == 3
    finally:
        over_kafka.close()
    over_grpc = Consumer(
        topic,
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            got += over_grpc.poll(1000)
    finally:
        over_grpc.close()
    assert [(r.offset, r.value) for r in got] == [(3, b"v3"), (4, b"v4")]


def test_kafka_python_admin_describes_lists_and_deletes_groups(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient

    topic = new_topic(cluster, partitions=1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    member = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap(cluster),
        group_id=group,
        client_id="describe-me",
        enable_auto_commit=False,
    )
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(200)
        member.commit({kafka.TopicPartition(topic, 0): kafka.OffsetAndMetadata(0, "", -1)})
        described = admin.describe_groups([group])[group]
        assert described["error"] is None
        assert (described["group_state"], described["protocol_type"]) == ("Stable", "consumer")
        assert [m["client_id"] for m in described["members"]] == ["describe-me"]
        assert group in [g["group_id"] for g in admin.list_groups()]
        member.close()
        deleted = dict(admin.delete_groups([group]))
        assert deleted == {group: "OK"}
        assert group not in [g["group_id"] for g in admin.list_groups()]
    finally:
        member.close()
        admin.close()


def test_librdkafka_group_subscribes_and_commits(cluster: Cluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    producer = ck.Producer({"bootstrap.servers": kafka_bootstrap(cluster)})
    for i in range(8):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 8 and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m)
        assert sorted(m.value() for m in got) == sorted(f"v{i}".encode() for i in range(8))
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [ck.TopicPartition(topic, 0), ck.TopicPartition(topic, 1)], timeout=10
        )
        assert sorted(tp.offset for tp in committed) == [4, 4]
    finally:
        consumer.close()


# -- fetch sessions (KIP-227), spoken with kio's generated message types ----------------------


def _exchange(sock: socket.socket, correlation_id: int, request: Any) -> Any:
    """Send ``request`` (a kio entity) with the header its version uses and read its
    response with the header that version uses (flexible or not)."""
    kio_serial = pytest.importorskip("kio.serial")
    from kio.index import load_response_schema

    out = io.BytesIO()
    header_type = type(request).__header_schema__
    kio_serial.entity_writer(header_type)(
        out,
        header_type(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id="interop-test",
        ),
    )
    kio_serial.entity_writer(type(request))(out, request)
    sock.sendall(struct.pack(">i", out.tell()) + out.getvalue())
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    frame = _recv_exactly(sock, size)
    schema = load_response_schema(request.__api_key__, request.__version__)
    header, used = kio_serial.entity_reader(schema.__header_schema__)(frame, 0)
    assert header.correlation_id == correlation_id
    body, body_used = kio_serial.entity_reader(schema)(frame, used)
    assert used + body_used == len(frame)
    return body


def test_fetch_sessions_answer_only_what_changed(cluster: Cluster) -> None:
    import datetime

    kafka = pytest.importorskip("kafka")
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    topic = new_topic(cluster, partitions=1)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    for i in range(2):
        producer.send(topic, value=f"v{i}".encode(), partition=0).get(timeout=30)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None

    def fetch(session_id: int, epoch: int, offset: int | None) -> Any:
        partitions = (
            (FetchTopic(topic=topic, partitions=(
                FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20),
            )),)
            if offset is not None
            else ()
        )  # fmt: skip
        return FetchRequest(
            max_wait=datetime.timedelta(milliseconds=100),
            min_bytes=1,
            session_id=session_id,
            session_epoch=epoch,
            topics=partitions,
            forgotten_topics_data=(),
        )

    port = cluster.kafka_ports[leader]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        full = _exchange(sock, 1, fetch(0, 0, 0))
        session = full.session_id
        assert session != 0 and full.error_code.value == 0
        (answer,) = full.responses[0].partitions
        assert (answer.high_watermark, len(answer.records) > 0) == (2, True)
        # Caught up, nothing new: the incremental answer names no partition.
        quiet = _exchange(sock, 2, fetch(session, 1, 2))
        assert (quiet.session_id, quiet.responses) == (session, ())
        producer.send(topic, value=b"v2", partition=0).get(timeout=30)
        # The partition is not named again; the session still reads it, and reports it.
        news = _exchange(sock, 3, fetch(session, 2, None))
        (answer,) = news.responses[0].partitions
        assert (answer.high_watermark, len(answer.records) > 0) == (3, True)
        stale = _exchange(sock, 4, fetch(session, 2, None))
        assert stale.error_code.value == 71  # INVALID_FETCH_SESSION_EPOCH
        unknown = _exchange(sock, 5, fetch(session + 1, 1, None))
        assert unknown.error_code.value == 70  # FETCH_SESSION_ID_NOT_FOUND
    producer.close(10)


def _metadata_topic(port: int, topic: str) -> Any:
    """``topic``'s entry in a Metadata v12 answer from the broker at ``port``."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answer = _exchange(
            sock,
            1,
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
    (found,) = answer.topics
    return found


def _metadata_topic_id(port: int, topic: str) -> uuid.UUID:
    found = _metadata_topic(port, topic)
    assert found.error_code.value == 0 and found.topic_id not in (None, uuid.UUID(int=0))
    tid: uuid.UUID = found.topic_id
    return tid


def _metadata_topic_id_or_none(port: int, topic: str) -> uuid.UUID | None:
    try:
        return _metadata_topic_id(port, topic)
    except (AssertionError, OSError):  # not serving yet, or the topic not known yet
        return None


def _topic_id_when_known(cluster: Cluster, port: int, topic: str) -> uuid.UUID:
    """The id Metadata at ``port`` gives ``topic``, once that broker knows the topic (a new
    topic reaches each broker's metadata cache on its own time)."""
    found: list[uuid.UUID] = []

    def known() -> bool:
        try:
            found.append(_metadata_topic_id(port, topic))
        except AssertionError:
            return False
        return True

    cluster.wait_for(known, what=f"the broker at port {port} knowing {topic}")
    return found[-1]


def _fetch_by_id(
    version: int,
    topics: list[tuple[uuid.UUID, int, int]],
    *,
    session_id: int = 0,
    epoch: int = -1,
    forgotten: tuple[tuple[uuid.UUID, int], ...] = (),
) -> Any:
    """A Fetch v13+ of ``(topic id, partition, offset)``s, spoken with kio's types."""
    import datetime
    import sys

    from headwater.kafka.protocol import build
    from kio.index import load_request_schema

    request_type = load_request_schema(1, version)
    m = sys.modules[request_type.__module__]
    return build(
        request_type,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            build(
                m.FetchTopic,
                topic_id=tid,
                partitions=(
                    build(
                        m.FetchPartition, partition=p, fetch_offset=o, partition_max_bytes=1 << 20
                    ),
                ),
            )
            for tid, p, o in topics
        ),
        forgotten_topics_data=tuple(
            build(m.ForgottenTopic, topic_id=tid, partitions=(p,)) for tid, p in forgotten
        ),
        rack_id="",
    )


@pytest.mark.parametrize("version", [13, 15, 17])
def test_fetch_by_topic_id_sessions_unknown_ids_and_the_current_leader(
    cluster: Cluster, version: int
) -> None:
    """Fetch v13+ by the id Metadata gives (the same on both brokers): records, a session
    by id that a by-name request cannot continue (FETCH_SESSION_TOPIC_ID_ERROR, nothing
    changed), UNKNOWN_TOPIC_ID for an id no topic has; from v16 the broker that does not
    lead a partition names its leader and the leader's Kafka address (KIP-951)."""
    import datetime

    kafka = pytest.importorskip("kafka")
    topic = new_topic(cluster, partitions=1)
    producer = kafka.KafkaProducer(bootstrap_servers=kafka_bootstrap(cluster), acks="all")
    for i in range(2):
        producer.send(topic, value=f"v{i}".encode(), partition=0).get(timeout=30)
    producer.close(10)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    other = 1 - leader
    ports = cluster.kafka_ports
    tid = _topic_id_when_known(cluster, ports[leader], topic)
    assert _topic_id_when_known(cluster, ports[other], topic) == tid
    stranger = uuid.uuid4()
    with socket.create_connection(("127.0.0.1", ports[leader]), timeout=10) as sock:
        full = _exchange(sock, 1, _fetch_by_id(version, [(tid, 0, 0), (stranger, 0, 0)], epoch=0))
        assert full.error_code.value == 0 and full.session_id != 0
        by_id = {t.topic_id: t.partitions for t in full.responses}
        (served,) = by_id[tid]
        assert (served.error_code.value, served.high_watermark) == (0, 2)
        assert served.records
        (unknown,) = by_id[stranger]
        assert unknown.error_code.value == 100  # UNKNOWN_TOPIC_ID
        # A by-name (v12) continuation of the session: refused, and nothing changes.
        from kio.schema.fetch.v12.request import FetchRequest as FetchV12

        by_name = _exchange(
            sock,
            2,
            FetchV12(
                max_wait=datetime.timedelta(milliseconds=100),
                min_bytes=1,
                session_id=full.session_id,
                session_epoch=1,
                topics=(),
                forgotten_topics_data=(),
            ),
        )
        assert by_name.error_code.value == 106  # FETCH_SESSION_TOPIC_ID_ERROR
        # Caught up, the unknown id forgotten: the continuation names nothing.
        quiet = _exchange(
            sock,
            3,
            _fetch_by_id(
                version, [(tid, 0, 2)], session_id=full.session_id, epoch=1,
                forgotten=((stranger, 0),),
            ),
        )  # fmt: skip
        assert (quiet.error_code.value, quiet.responses) == (0, ())
    with socket.create_connection(("127.0.0.1", ports[other]), timeout=10) as sock:
        moved = _exchange(sock, 1, _fetch_by_id(version, [(tid, 0, 0)]))
    (part,) = moved.responses[0].partitions
    assert part.error_code.value == 6  # NOT_LEADER_OR_FOLLOWER
    if version >= 16:
        assert part.current_leader.leader_id == leader
        assert [(n.node_id, n.host, n.port) for n in moved.node_endpoints] == [
            (leader, "127.0.0.1", ports[leader])
        ]


def test_produce_to_a_broker_that_does_not_lead_names_the_leader(cluster: Cluster) -> None:
    """Produce v10+ (KIP-951): NOT_LEADER_OR_FOLLOWER with the current leader, its epoch
    and its Kafka address, so a client goes straight there."""
    import datetime

    from headwater import records
    from kio.schema.produce.v11.request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )

    topic = new_topic(cluster, partitions=1)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    ports = cluster.kafka_ports
    batch = records.build_batch([records.Record(b"k", b"v", (), BASE_TS)], base_offset=0)
    request = ProduceRequest(
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(index=0, records=batch),),
            ),
        ),
    )
    with socket.create_connection(("127.0.0.1", ports[1 - leader]), timeout=10) as sock:
        answer = _exchange(sock, 1, request)
    (part,) = answer.responses[0].partition_responses
    assert part.error_code.value == 6  # NOT_LEADER_OR_FOLLOWER
    assert part.current_leader.leader_id == leader and part.current_leader.leader_epoch >= 0
    assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [
        (leader, "127.0.0.1", ports[leader])
    ]


def test_delete_topics_v6_by_topic_id(cluster: Cluster) -> None:
    """DeleteTopics v6 names a topic by the id Metadata gives; an id no topic has is
    UNKNOWN_TOPIC_ID, a name and an id in one entry INVALID_REQUEST."""
    import datetime

    from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState

    topic = new_topic(cluster, partitions=1)
    port = cluster.kafka_ports[0]
    tid = _topic_id_when_known(cluster, port, topic)
    stranger = uuid.uuid4()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answer = _exchange(
            sock,
            1,
            DeleteTopicsRequest(
                topics=(
                    DeleteTopicState(topic_id=tid),
                    DeleteTopicState(topic_id=stranger),
                    DeleteTopicState(name="other", topic_id=stranger),
                ),
                timeout=datetime.timedelta(seconds=20),
            ),
        )
    got = {(r.name, r.topic_id): r.error_code.value for r in answer.responses}
    assert got == {(topic, tid): 0, (None, stranger): 100, ("other", stranger): 42}
    with Admin(cluster.bootstrap) as admin:
        cluster.wait_for(lambda: topic not in admin.list_topics(), what="the topic deleted")


def test_a_produce_of_garbage_records_is_refused_and_nothing_is_written(cluster: Cluster) -> None:
    import datetime

    from kio.schema.produce.v9.request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )

    topic = new_topic(cluster, partitions=1)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    port = cluster.kafka_ports[leader]
    request = ProduceRequest(
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(index=0, records=b"\x00" * 70),),
            ),
        ),
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answer = _exchange(sock, 1, request)
    (partition,) = answer.responses[0].partition_responses
    assert partition.error_code.value != 0
    assert partition.base_offset == -1
    assert _answers_api_versions(port)
    consumer = Consumer(bootstrap_servers=cluster.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.end_offsets([tp])[tp] == 0
    finally:
        consumer.close()


# -- OffsetForLeaderEpoch (KIP-320) -----------------------------------------------------------


def _leader_and_epoch(port: int, topic: str) -> tuple[int, int]:
    """Partition 0's leader and leader epoch as Metadata v12 on ``port`` advertises them."""
    (partition,) = _metadata_topic(port, topic).partitions
    return int(partition.leader_id), int(partition.leader_epoch)


def _offset_for_leader_epoch(
    port: int, version: int, topic: str, current_epoch: int, epoch: int
) -> tuple[int, int, int]:
    """``(error, leader epoch, end offset)`` of partition 0 from OffsetForLeaderEpoch."""
    from kio.index import load_request_schema

    request_type = load_request_schema(23, version)
    m = __import__(request_type.__module__, fromlist=["_"])
    from headwater.kafka.protocol import build

    request = build(
        request_type,
        replica_id=-1,
        topics=(
            m.OffsetForLeaderTopic(
                topic=topic,
                partitions=(
                    m.OffsetForLeaderPartition(
                        partition=0, current_leader_epoch=current_epoch, leader_epoch=epoch
                    ),
                ),
            ),
        ),
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        answer = _exchange(sock, 2, request)
    ((t, (p,)),) = [(t.topic, t.partitions) for t in answer.topics]
    assert t == topic and p.partition == 0
    return p.error_code.value, int(p.leader_epoch), int(p.end_offset)


@pytest.mark.parametrize("version", [2, 4])
def test_offset_for_leader_epoch_on_the_wire(cluster: Cluster, version: int) -> None:
    """Key 23 at its lowest and highest version: the leader answers the end offset of its
    epoch as Metadata advertises it; a newer epoch, an older one and the broker that
    does not lead answer Kafka's errors."""
    topic = new_topic(cluster, partitions=1)
    with Producer(cluster.bootstrap) as producer:
        for i in range(5):
            producer.send(topic, b"v%d" % i, partition=0)
        producer.flush()
    ports = cluster.kafka_ports
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    cluster.wait_for(lambda: _leader_and_epoch(ports[leader], topic)[0] == leader, what="metadata")
    _, epoch = _leader_and_epoch(ports[leader], topic)
    assert epoch >= 0  # a real epoch: what clients fence their position with
    assert _offset_for_leader_epoch(ports[leader], version, topic, epoch, epoch) == (0, epoch, 5)
    assert _offset_for_leader_epoch(ports[leader], version, topic, -1, epoch) == (0, epoch, 5)
    assert _offset_for_leader_epoch(ports[leader], version, topic, epoch + 1, epoch)[0] == 75
    # 75: UNKNOWN_LEADER_EPOCH; 6: NOT_LEADER_OR_FOLLOWER; 3: UNKNOWN_TOPIC_OR_PARTITION
    assert _offset_for_leader_epoch(ports[1 - leader], version, topic, epoch, epoch)[0] == 6
    assert _offset_for_leader_epoch(ports[leader], version, f"{topic}-no", -1, 0)[0] == 3


def _move_leader(cluster: Cluster, topic: str) -> int:
    """Partition 0 (replicas on both brokers) led by the other broker: its replicas
    reordered (AlterPartitionReassignments) and a preferred election (ElectLeaders),
    both through kafka-python over the Kafka listener; the new leader's id."""
    kafka = pytest.importorskip("kafka")
    from kafka.admin import KafkaAdminClient

    tp = kafka.TopicPartition(topic, 0)
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    other = 1 - leader
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(cluster))
    try:
        assert admin.alter_partition_reassignments({tp: [other, leader]}, timeout_ms=30000) == {
            tp: None
        }
        cluster.wait_for(
            lambda: (
                (a := cluster.zk.get_assignment(topic)) is not None
                and a.partitions[0] == (other, leader)
                and not a.reassignments
            ),
            timeout_s=60,
            what="the replicas reordered",
        )
        cluster.wait_for(
            lambda: set(cluster.isr_for(topic, 0)) == {0, 1}, timeout_s=60, what="both in sync"
        )
        if cluster.leader_for(topic, 0) != other:
            admin.elect_leaders(0, {topic: [0]}, timeout_ms=30000, raise_errors=False)
        cluster.wait_for(lambda: cluster.leader_for(topic, 0) == other, what="the new leader")
    finally:
        admin.close()
    return other


def test_librdkafka_validates_its_position_after_a_leader_change(cluster: Cluster) -> None:
    """KIP-320: a librdkafka consumer that sees a new leader epoch in Metadata checks its
    position with OffsetForLeaderEpoch before it fetches on; it reads every record once,
    in order, across the change, and the brokers counted the requests."""
    ck = pytest.importorskip("confluent_kafka")
    name = f"k-{uuid.uuid4().hex[:10]}"
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, 1, 2)], timeout_ms=15000)
    cluster.wait_for(lambda: cluster.leader_for(name, 0) is not None, what="a leader")
    cluster.wait_for(lambda: set(cluster.isr_for(name, 0)) == {0, 1}, what="both in sync")
    producer = ck.Producer({"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all"})
    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    got: list[tuple[int, bytes]] = []

    def consume_until(n: int) -> None:
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.offset(), m.value()))

    def produce(first: int, last: int) -> None:
        for i in range(first, last):
            producer.produce(name, value=b"v%d" % i, partition=0)
        assert producer.flush(60) == 0

    try:
        with versions_used(cluster, "OffsetForLeaderEpoch") as used:
            consumer.subscribe([name])
            produce(0, 50)
            consume_until(50)
            assert len(got) == 50
            port = cluster.kafka_ports
            _, epoch_before = _leader_and_epoch(port[0], name)
            new_leader = _move_leader(cluster, name)
            cluster.wait_for(
                lambda: _leader_and_epoch(port[new_leader], name)[0] == new_leader,
                what="metadata naming the new leader",
            )
            assert _leader_and_epoch(port[new_leader], name)[1] > epoch_before
            produce(50, 100)
            consume_until(100)
            # Let librdkafka's validation finish if it is still in flight.
            cluster.wait_for(
                lambda: sum((request_versions(cluster, "OffsetForLeaderEpoch")).values()) > 0,
                timeout_s=30,
                what="an OffsetForLeaderEpoch request",
            )
        assert got == [(i, b"v%d" % i) for i in range(100)]  # nothing skipped or repeated
        assert sum(used.values()) > 0, used  # the position was checked on the new leader
        assert set(used) <= {2, 3, 4}, used  # librdkafka 2.16: one v2 request
    finally:
        consumer.close()


# -- bad input -------------------------------------------------------------------------------


def _api_versions_v0(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, -1)
    return struct.pack(">i", len(body)) + body


def _closed_by_broker(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _answers_api_versions(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_api_versions_v0(77))
        size, correlation_id, error = struct.unpack(">iih", _recv_exactly(sock, 10))
        _recv_exactly(sock, size - 6)
        return correlation_id == 77 and error == 0


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (struct.pack(">i", -5), "negative frame size -5"),
        (struct.pack(">i", 104_857_601), "larger than socket.request.max.bytes"),
        (struct.pack(">ihhih", 10, 99, 0, 1, -1), "unknown API key 99"),
        (struct.pack(">ihhih", 10, 0, 1, 1, -1), "unsupported API key 0 (Produce) version 1"),
        (struct.pack(">i", 30) + b"\x00\x03\x00\x0c" + b"\xff" * 26, "does not decode"),
        (b"GET / HTTP/1.1\r\n\r\n", "larger than socket.request.max.bytes"),
    ],
    ids=[
        "negative-size",
        "huge-size",
        "unknown-api-key",
        "unsupported-version",
        "garbage-body",
        "http",
    ],
)
def test_bad_frames_close_that_connection_and_the_broker_serves_on(
    cluster: Cluster, payload: bytes, reason: str
) -> None:
    port = cluster.kafka_ports[0]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as bystander:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(payload)
            assert _closed_by_broker(sock)
        # The connection that was open all along still works, and new ones do.
        bystander.sendall(_api_versions_v0(5))
        assert struct.unpack(">iih", _recv_exactly(bystander, 10))[1:] == (5, 0)
    assert _answers_api_versions(port)
    _wait_for_log(cluster, reason)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.one_of(
        st.binary(max_size=64),  # anything, size prefix included
        st.builds(  # a well-sized frame of random bytes after a real API key and version
            lambda key, version, rest: struct.pack(">ihh", 4 + len(rest), key, version) + rest,
            st.sampled_from(sorted(SUPPORTED)),
            st.integers(-1, 13),
            st.binary(max_size=48),
        ),
    )
)
def test_fuzz_random_bytes_never_stop_the_listener(cluster: Cluster, payload: bytes) -> None:
    port = cluster.kafka_ports[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(10)
        with contextlib.suppress(ConnectionResetError):
            while sock.recv(65536):  # an answer (if any), then the broker closes
                pass
    assert _answers_api_versions(port)


def test_a_truncated_frame_closes_the_connection(cluster: Cluster) -> None:
    port = cluster.kafka_ports[0]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x00")
        sock.shutdown(socket.SHUT_WR)
        assert _closed_by_broker(sock)
    _wait_for_log(cluster, "truncated frame: 4 of 100 bytes")
    assert _answers_api_versions(port)


def test_api_versions_above_v3_answers_v0_with_unsupported_version(cluster: Cluster) -> None:
    port = cluster.kafka_ports[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = struct.pack(">hhih", 18, 9, 1234, -1) + b"\x00"
        sock.sendall(struct.pack(">i", len(body)) + body)
        size, correlation_id, error, count = struct.unpack(">iihi", _recv_exactly(sock, 14))
        assert (correlation_id, error) == (1234, 35)
        ranges = [struct.unpack(">hhh", _recv_exactly(sock, 6)) for _ in range(count)]
        assert ranges == [(18, 0, 3)]  # KIP-511: ApiVersions' own range alone, as Kafka's
        assert size == 4 + 2 + 4 + 6 * count + 0  # v0: no throttle time
        # The connection stays open: the client retries at a version both speak.
        sock.sendall(_api_versions_v0(1235))
        assert struct.unpack(">iih", _recv_exactly(sock, 10))[1:] == (1235, 0)


def _wait_for_log(cluster: Cluster, text: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        logs = "".join(
            Path(b.log_path).read_text(errors="replace") for b in cluster.brokers.values()
        )
        if text in logs:
            return
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in the brokers' logs")


# -- KIP-848 consumer groups, spoken with kio's generated message types -----------------------


def _heartbeat(group: str, member_id: str, epoch: int, **fields: Any) -> Any:
    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

    return ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        topic_partitions=fields.pop("topic_partitions", None),
        **fields,
    )


def _coordinator_port(cluster: Cluster, group: str) -> int:
    """The Kafka port of ``group``'s coordinator, as FindCoordinator names it (the first
    FindCoordinator of a cluster creates ``__consumer_offsets``: retried meanwhile)."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    deadline = time.monotonic() + 30
    port = cluster.kafka_ports[0]
    while time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            answer = _exchange(
                sock, 1, FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
            )
        (found,) = answer.coordinators
        if found.error_code.value == 0:
            return int(found.port)
        time.sleep(0.5)
    raise AssertionError(f"no coordinator for {group}")


def test_consumer_group_heartbeat_errors_and_consumer_group_describe(cluster: Cluster) -> None:
    import datetime

    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    topic = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    port = _coordinator_port(cluster, group)
    timeout = datetime.timedelta(seconds=30)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        no_group = _exchange(sock, 2, _heartbeat(group, "nobody", 1))
        assert no_group.error_code.value == 69  # GROUP_ID_NOT_FOUND
        no_timeout = _exchange(sock, 3, _heartbeat(group, "", 0, subscribed_topic_names=(topic,)))
        assert no_timeout.error_code.value == 42  # INVALID_REQUEST
        assert "RebalanceTimeoutMs" in no_timeout.error_message
        joined = _exchange(
            sock,
            4,
            _heartbeat(group, "", 0, rebalance_timeout=timeout, subscribed_topic_names=(topic,)),
        )
        assert joined.error_code.value == 0 and joined.member_epoch > 0
        member, epoch = joined.member_id, joined.member_epoch
        unknown = _exchange(sock, 5, _heartbeat(group, "nobody", 1))
        assert unknown.error_code.value == 25  # UNKNOWN_MEMBER_ID
        stale = _exchange(sock, 5, _heartbeat(group, member, epoch + 7))
        assert stale.error_code.value == 110  # FENCED_MEMBER_EPOCH
        # The assignment names the topic by the id Metadata gives it.
        metadata = _exchange(
            sock,
            6,
            MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        )
        topic_id = metadata.topics[0].topic_id
        assert topic_id != uuid.UUID(int=0)
        deadline = time.monotonic() + 30
        beat = joined
        while beat.assignment is None or not beat.assignment.topic_partitions:
            assert time.monotonic() < deadline, beat
            time.sleep(0.2)
            beat = _exchange(sock, 7, _heartbeat(group, member, epoch))
            epoch = beat.member_epoch
        (assigned,) = beat.assignment.topic_partitions
        assert (assigned.topic_id, sorted(assigned.partitions)) == (topic_id, [0, 1])
        described = _exchange(
            sock,
            8,
            ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False),
        )
        (ours,) = described.groups
        assert (ours.error_code.value, ours.group_state) == (0, "Stable")
        (m,) = ours.members
        assert (m.member_id, m.subscribed_topic_names) == (member, (topic,))
        (target,) = m.target_assignment.topic_partitions
        assert (target.topic_id, target.topic_name, target.partitions) == (topic_id, topic, (0, 1))
        left = _exchange(sock, 9, _heartbeat(group, member, -1))
        assert (left.error_code.value, left.member_epoch) == (0, -1)
    nobody = f"none-{uuid.uuid4().hex[:8]}"
    with socket.create_connection(("127.0.0.1", _coordinator_port(cluster, nobody))) as sock:
        answer = _exchange(
            sock,
            10,
            ConsumerGroupDescribeRequest(group_ids=(nobody,), include_authorized_operations=False),
        )
    assert [g.error_code.value for g in answer.groups] == [69]  # GROUP_ID_NOT_FOUND


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    group=st.text(max_size=8),
    member=st.text(max_size=8),
    epoch=st.integers(-3, 3),
    timeout_ms=st.integers(-2, 60_000),
    names=st.none() | st.lists(st.text(max_size=6), max_size=3).map(tuple),
    owned=st.none()
    | st.lists(
        st.tuples(st.uuids(), st.lists(st.integers(-1, 3), max_size=3).map(tuple)), max_size=2
    ),
)
def test_fuzz_consumer_group_heartbeats_are_answered(
    cluster: Cluster,
    group: str,
    member: str,
    epoch: int,
    timeout_ms: int,
    names: tuple[str, ...] | None,
    owned: list[tuple[uuid.UUID, tuple[int, ...]]] | None,
) -> None:
    """Any well-formed ConsumerGroupHeartbeat gets an answer from both brokers (the
    coordinator's, or NOT_COORDINATOR), never a closed connection."""
    import datetime

    from kio.schema.consumer_group_heartbeat.v0.request import TopicPartitions

    request = _heartbeat(
        group,
        member,
        epoch,
        rebalance_timeout=datetime.timedelta(milliseconds=timeout_ms),
        subscribed_topic_names=names,
        topic_partitions=None
        if owned is None
        else tuple(TopicPartitions(topic_id=t, partitions=ps) for t, ps in owned),
    )
    for port in cluster.kafka_ports.values():
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            answer = _exchange(sock, 1, request)  # one of them coordinates the group
        assert answer.error_code.value >= 0


def test_topic_ids_are_drawn_per_creation_and_kept_by_restarts_and_failover(
    tmp_path: Path,
) -> None:
    """A topic's id is the same on every broker, after a broker restarts and after the
    controller's broker is killed (the id is kept in the topic's znode); a topic deleted
    and created again under its name gets a new id on every broker, and a Fetch by the
    old id answers UNKNOWN_TOPIC_ID.  A cluster of its own: the module's stays up."""
    with Cluster(brokers=2, data_dir=tmp_path, kafka_listener=True) as own:
        ports = own.kafka_ports
        topic = f"k-{uuid.uuid4().hex[:10]}"

        def create() -> None:
            with Admin(own.bootstrap) as admin:
                admin.create_topics([NewTopic(topic, 1, 2)], timeout_ms=15000)

        def topic_id_at(broker: int) -> uuid.UUID | None:
            try:
                return _metadata_topic_id(ports[broker], topic)
            except (AssertionError, OSError):  # not serving yet, or the topic not known yet
                return None

        def same_id_everywhere(differs_from: uuid.UUID | None = None) -> uuid.UUID:
            def agreed() -> bool:
                ids = {topic_id_at(b) for b in own.live_broker_ids()}
                return len(ids) == 1 and None not in ids and differs_from not in ids

            own.wait_for(agreed, what="every live broker naming one id")
            found = topic_id_at(own.live_broker_ids()[0])
            assert found is not None
            return found

        create()
        first = same_id_everywhere()
        stored = own.zk.get_assignment(topic)
        assert stored is not None and stored.topic_id  # the id is kept in the znode
        assert decode_topic_id(stored.topic_id) == first
        own.restart(1)
        own.wait_for(lambda: topic_id_at(1) == first, what="broker 1 naming the same id")

        with Admin(own.bootstrap) as admin:
            admin.delete_topics([topic], timeout_ms=15000)
        own.wait_for(
            lambda: (
                own.zk.get_assignment(topic) is None
                and all(topic_id_at(b) is None for b in own.live_broker_ids())
            ),
            what="the topic gone everywhere",
        )
        # Created again, this time with the door's CreateTopics v7 (it answers the id).
        from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest

        with socket.create_connection(("127.0.0.1", ports[1]), timeout=30) as sock:
            answer = _exchange(
                sock,
                1,
                CreateTopicsRequest(
                    topics=(
                        CreatableTopic(
                            name=topic,
                            num_partitions=1,
                            replication_factor=2,
                            assignments=(),
                            configs=(),
                        ),
                    ),
                    timeout=datetime.timedelta(seconds=15),
                    validate_only=False,
                ),
            )
        ((created, code),) = [(t.topic_id, t.error_code.value) for t in answer.topics]
        assert code == 0
        second = same_id_everywhere(differs_from=first)
        assert second == created != first
        with socket.create_connection(("127.0.0.1", ports[0]), timeout=10) as sock:
            answer = _exchange(sock, 1, _fetch_by_id(13, [(first, 0, 0)]))
        ((old, (gone,)),) = [(t.topic_id, t.partitions) for t in answer.responses]
        assert old == first and gone.error_code.value == 100  # UNKNOWN_TOPIC_ID

        # A topic written as before ids (TopicZNode v2, no "topic_id"): the controller
        # gives it one, once, and every broker answers it.
        legacy = f"k-{uuid.uuid4().hex[:10]}"
        own.zk.create_topic(legacy, {0: [0, 1]}, {}, topic_id="")
        own.wait_for(
            lambda: (a := own.zk.get_assignment(legacy)) is not None and a.topic_id != "",
            what="the controller giving the old topic an id",
        )
        given = own.zk.get_assignment(legacy)
        assert given is not None
        for b in ports:
            own.wait_for(
                lambda b=b: (
                    _metadata_topic_id_or_none(ports[b], legacy) == decode_topic_id(given.topic_id)
                ),
                what=f"broker {b} naming the id given",
            )

        controller = own.controller_id()
        assert controller is not None
        own.kill(controller)
        survivor = 1 - controller
        own.wait_for(
            lambda: own.controller_id() == survivor and own.live_broker_ids() == [survivor],
            timeout_s=60,
            what="the other broker becoming controller",
        )
        assert same_id_everywhere() == second
        assert own.zk.get_assignment(legacy) == given  # the new controller wrote no other
        assert _metadata_topic_id_or_none(ports[survivor], legacy) == decode_topic_id(
            given.topic_id
        )
        own.start_broker(controller)
        own.wait_for(
            lambda: topic_id_at(controller) == second, what="the restarted broker naming it"
        )
