"""CreateTopics and CreatePartitions answer REQUEST_TIMED_OUT when leaders don't appear in time.

As in Kafka: the topic (or the new partitions) stays written to ZooKeeper and
the controller finishes the job later; the error only says it was not done
within the request's ``timeout_ms``.  The controller is held with SIGSTOP for
less than the ZooKeeper session timeout, so it is not replaced meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.errors import ErrorCode
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import admin_pb2

from .helpers import admin_stub, new_topic_name

pytestmark = pytest.mark.e2e

TIMEOUT_MS = 1200


@pytest.fixture
def pair(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(brokers=2, data_dir=tmp_path, zookeeper=zookeeper.connect_string) as cluster:
        yield cluster


def other_than_controller(cluster: Cluster) -> tuple[int, str]:
    controller = cluster.controller_id()
    assert controller is not None
    other = next(b for b in cluster.brokers.values() if b.broker_id != controller)
    return controller, other.address


def test_create_topics_times_out_while_the_controller_is_stopped(pair: Cluster) -> None:
    controller, address = other_than_controller(pair)
    name = new_topic_name()
    pair.pause(controller)
    try:
        response = admin_stub(address).CreateTopics(
            admin_pb2.CreateTopicsRequest(
                topics=[
                    admin_pb2.CreatableTopic(name=name, num_partitions=2, replication_factor=1)
                ],
                timeout_ms=TIMEOUT_MS,
            ),
            timeout=30,
        )
    finally:
        pair.resume(controller)
    result = response.topics[0]
    assert result.error == ErrorCode.REQUEST_TIMED_OUT, result
    assert "leader" in result.error_message
    # The topic was written; the controller elects its leaders once it runs again.
    for partition in (0, 1):
        pair.wait_for(
            lambda p=partition: pair.leader_for(name, p) is not None, what="a late leader"
        )


def test_create_partitions_times_out_while_the_controller_is_stopped(pair: Cluster) -> None:
    controller, address = other_than_controller(pair)
    name = new_topic_name()
    created = admin_stub(address).CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[admin_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=1)],
            timeout_ms=15000,
        ),
        timeout=30,
    )
    assert created.topics[0].error == ErrorCode.NONE, created
    pair.pause(controller)
    try:
        response = admin_stub(address).CreatePartitions(
            admin_pb2.CreatePartitionsRequest(
                topics=[admin_pb2.CreatePartitionsTopic(name=name, count=3)], timeout_ms=TIMEOUT_MS
            ),
            timeout=30,
        )
    finally:
        pair.resume(controller)
    assert response.topics[0].error == ErrorCode.REQUEST_TIMED_OUT, response
    for partition in (1, 2):
        pair.wait_for(
            lambda p=partition: pair.leader_for(name, p) is not None, what="a late leader"
        )
