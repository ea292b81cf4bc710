"""Bad reassignment requests and throttle configs are refused with Kafka's errors and change
nothing: unknown topic or partition, an empty list, a duplicate or dead broker, a cancel of a
partition not moving, a replica list or rate that does not parse, a broker config that is not
dynamic; during a move CreatePartitions is refused (REASSIGNMENT_IN_PROGRESS) and a topic
deletion waits for the move, as in Kafka.  A broker that is not the controller answers
NOT_CONTROLLER."""

from __future__ import annotations

import grpc
import headwater
import pytest
from headwater import errors
from headwater.client import NewTopic, TopicPartition
from headwater.errors import ErrorCode
from headwater.testing import Cluster
from headwater.v1 import admin_pb2, admin_pb2_grpc

from .conftest import TP, moving, setup_topic, start_move, throttle, wait_until

pytestmark = pytest.mark.e2e


def _znode(cluster: Cluster) -> tuple[bytes, int]:
    data, stat = cluster.zk.client.get("/brokers/topics/moving")
    return data, stat.version


def test_bad_requests_are_refused_and_change_nothing(quad: Cluster, admin: headwater.Admin) -> None:
    roles = setup_topic(quad, admin, prefill_mib=0.1)
    before = _znode(quad)
    answers = admin.alter_partition_reassignments(
        {
            TopicPartition("nope", 0): [0, 1],
            TopicPartition("moving", 5): [0, 1],
            TopicPartition("moving", 0): [roles.arriving, roles.arriving, roles.staying],
        }
    )
    assert isinstance(answers[TopicPartition("nope", 0)], errors.UnknownTopicOrPartitionError)
    assert isinstance(answers[TopicPartition("moving", 5)], errors.UnknownTopicOrPartitionError)
    assert isinstance(answers[TP], errors.InvalidReplicaAssignmentError)
    for target in ([], [roles.arriving, 42]):
        error = admin.alter_partition_reassignments({TP: target})[TP]
        assert isinstance(error, errors.InvalidReplicaAssignmentError), target
    error = admin.alter_partition_reassignments({TP: None})[TP]
    assert isinstance(error, errors.NoReassignmentInProgressError)
    assert _znode(quad) == before
    assert not admin.list_partition_reassignments()

    with pytest.raises(errors.InvalidConfigError):
        admin.alter_topic_configs(
            "moving", set_configs={"leader.replication.throttled.replicas": "0-1"}
        )
    with pytest.raises(errors.InvalidRequestError):
        admin.alter_broker_configs(None, {"leader.replication.throttled.rate": "fast"})
    with pytest.raises(errors.InvalidRequestError):
        admin.alter_broker_configs(roles.arriving, {"num.partitions": "7"})
    assert admin.describe_broker_configs(None) == {}
    topic_configs = admin.describe_configs(["moving"])["moving"]
    assert topic_configs["leader.replication.throttled.replicas"].value == ""


def test_changes_during_a_move(quad: Cluster, admin: headwater.Admin) -> None:
    roles = setup_topic(quad, admin, prefill_mib=1.0)
    throttle(admin, roles, rate=0)  # Kafka allows 0: the move holds still
    start_move(admin, roles.target)
    assert moving(admin)
    before = _znode(quad)
    grown = admin.create_partitions({"moving": 3}, raise_on_error=False)
    assert isinstance(grown["moving"], errors.ReassignmentInProgressError)
    assert _znode(quad) == before

    # Only the controller takes AlterPartitionReassignments (Kafka's ZooKeeper mode).
    controller = quad.controller_id()
    other = next(b for b in quad.brokers if b != controller)
    with grpc.insecure_channel(quad.brokers[other].address) as channel:
        response = admin_pb2_grpc.AdminStub(channel).AlterPartitionReassignments(
            admin_pb2.AlterPartitionReassignmentsRequest(
                partitions=[
                    admin_pb2.ReassignablePartition(topic="moving", partition=0, cancel=True)
                ]
            ),
            timeout=30,
        )
    assert [ErrorCode(r.error) for r in response.results] == [ErrorCode.NOT_CONTROLLER]
    assert moving(admin)

    # Deletion waits for the move (Kafka marks the topic ineligible), then runs.
    admin.delete_topics(["moving"], timeout_ms=2000, raise_on_error=False)
    assert "moving" in quad.zk.get_topics()
    assert admin.alter_partition_reassignments({TP: None}) == {TP: None}
    wait_until(lambda: "moving" not in quad.zk.get_topics(), timeout_s=30, what="the deletion")
    admin.create_topics([NewTopic("after", replica_assignment={0: roles.target})])
