"""The Producer and Consumer clients under Kafka's authorizer (User:ANONYMOUS from
127.0.0.1): with the ACLs kafka-acls --producer / --consumer give they work (an
idempotent producer needs no IDEMPOTENT_WRITE with WRITE on its topic, Kafka 3.x);
without them they fail at once with Kafka's exception instead of retrying in silence:
TopicAuthorizationFailedError from send, GroupAuthorizationFailedError or
TopicAuthorizationFailedError from poll."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.consumer.consumer import Consumer
from headwater.client.producer.producer import Producer
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.security.acl_helpers import INTER_BROKER, AclWriter, acl, eventually, secured_cluster

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, AclWriter]]:
    data_dir: Path = tmp_path_factory.mktemp("acl-clients")
    creator = acl(ResourceType.CLUSTER, "kafka-cluster", Op.CREATE)
    with secured_cluster(
        zookeeper.connect_string,
        data_dir,
        initial=(INTER_BROKER, creator),
        overrides={"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"},
    ) as (cluster, writer):
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics([NewTopic("ledger", 1, 1), NewTopic("other", 1, 1)])
        yield cluster, writer


def consume_one(cluster: Cluster, topic: str, group: str) -> list[bytes | None]:
    with Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    ) as consumer:
        consumer.subscribe([topic])
        got: list[bytes | None] = []
        for _ in range(20):  # bounded: 20 polls of at most 1 s
            got += [r.value for r in consumer.poll(timeout_ms=1000)]
            if got:
                break
        return got


def test_idempotent_producer_refused_init_producer_id_fails_at_once(
    secured: tuple[Cluster, AclWriter],
) -> None:
    """DESCRIBE on a topic but WRITE on none (and no IDEMPOTENT_WRITE): InitProducerId is
    CLUSTER_AUTHORIZATION_FAILED, fatal as in Kafka -- not retried for the whole
    delivery_timeout_ms. Runs before any WRITE is granted in this module's cluster."""
    cluster, writer = secured
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("idem", 1, 1)])
    writer.add(acl(TOPIC, "idem", Op.DESCRIBE))
    with Admin(cluster.bootstrap) as admin:  # the broker learns of the ACL through its watch
        eventually(
            lambda: "idem" in admin.list_topics(), lambda seen: seen, what="'idem' described"
        )
    started = time.monotonic()
    with (
        Producer(cluster.bootstrap, max_block_ms=10000, delivery_timeout_ms=120000) as producer,
        pytest.raises(errors.ClusterAuthorizationFailedError),
    ):
        producer.send("idem", b"refused").result(timeout=60)
    assert time.monotonic() - started < 30


def test_producer_needs_write(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    with (
        Producer(cluster.bootstrap, max_block_ms=10000) as producer,
        pytest.raises(errors.TopicAuthorizationFailedError),
    ):
        producer.send("ledger", b"refused").result(timeout=30)
    writer.add(acl(TOPIC, "ledger", Op.WRITE))

    def send() -> object:
        try:
            with Producer(cluster.bootstrap, max_block_ms=10000) as producer:
                return producer.send("ledger", b"kept").result(timeout=30)
        except errors.TopicAuthorizationFailedError as exc:
            return exc

    eventually(send, lambda r: not isinstance(r, Exception), what="producing allowed")


def test_consumer_needs_read_on_the_group_and_the_topic(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, writer = secured
    writer.add(acl(TOPIC, "other", Op.WRITE))
    eventually(lambda: _produce(cluster, "other"), lambda ok: ok, what="a record in 'other'")
    with pytest.raises(errors.GroupAuthorizationFailedError):
        consume_one(cluster, "other", "billing")
    writer.add(acl(GROUP, "billing", Op.READ))
    eventually(
        lambda: _attempt(cluster, "other", "billing"),
        lambda exc: isinstance(exc, errors.TopicAuthorizationFailedError),
        what="the group allowed, the topic still refused",
    )
    writer.add(acl(TOPIC, "other", Op.READ))
    eventually(
        lambda: _attempt(cluster, "other", "billing"),
        lambda r: r == [b"x"],
        what="consuming allowed",
    )


def _produce(cluster: Cluster, topic: str) -> bool:
    try:
        with Producer(cluster.bootstrap, max_block_ms=10000) as producer:
            producer.send(topic, b"x").result(timeout=30)
        return True
    except errors.TopicAuthorizationFailedError:
        return False


def _attempt(cluster: Cluster, topic: str, group: str) -> list[bytes | None] | BaseException:
    try:
        return consume_one(cluster, topic, group)
    except errors.HeadwaterError as exc:
        return exc
