"""Kafka's authorizer on real brokers, with the identity a PLAINTEXT listener gives
(``User:ANONYMOUS`` from 127.0.0.1): every RPC family is refused without the ACL it needs,
with Kafka's error, and changes nothing; Metadata hides topics one may not describe;
PREFIXED ACLs apply; a DENY (here by host) beats an ALLOW; ACLs written on one broker or in
ZooKeeper reach every broker through the watch."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.transport import connection, streams
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import AclPermissionType, PatternType, ResourceType
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import admin_pb2, broker_pb2, common_pb2, control_pb2, group_pb2

from tests.e2e.security.acl_helpers import (
    INTER_BROKER,
    AclWriter,
    acl,
    admin,
    broker,
    control,
    create_topic,
    eventually,
    fetch,
    fetch_request,
    group,
    metadata,
    name,
    produce,
    produce_request,
    secured_cluster,
)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
DENY = AclPermissionType.DENY
PRE = PatternType.PREFIXED
MAY_CREATE_MADE = acl(TOPIC, "made-", Op.CREATE, pattern=PRE)
DENIED_TOPIC = ErrorCode.TOPIC_AUTHORIZATION_FAILED
DENIED_GROUP = ErrorCode.GROUP_AUTHORIZATION_FAILED
DENIED_CLUSTER = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, AclWriter]]:
    data_dir: Path = tmp_path_factory.mktemp("secured")
    with secured_cluster(
        zookeeper.connect_string,
        data_dir,
        brokers=2,
        initial=(INTER_BROKER, MAY_CREATE_MADE),
        overrides={"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"},
    ) as pair:
        yield pair


def addresses(cluster: Cluster) -> list[str]:
    return [b.address for b in cluster.brokers.values()]


def new_topic(cluster: Cluster, writer: AclWriter) -> str:
    """A topic created through the PREFIXED CREATE ACL, with its leader known."""
    topic = name("made-")
    response = create_topic(addresses(cluster)[0], topic)
    assert response.topics[0].error == ErrorCode.NONE, response
    cluster.wait_for(lambda: cluster.leader_for(topic, 0) is not None, what="a leader")
    return topic


def leader_address(cluster: Cluster, topic: str) -> str:
    leader = cluster.leader_for(topic, 0)
    assert leader is not None
    return cluster.brokers[leader].address


def test_create_topics_needs_create(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, _ = secured
    other = name("other-")
    response = create_topic(addresses(cluster)[0], other)
    assert response.topics[0].error == DENIED_TOPIC
    assert other not in cluster.zk.get_topics()
    # The PREFIXED ACL allows names starting with it.
    topic = name("made-")
    assert create_topic(addresses(cluster)[1], topic).topics[0].error == ErrorCode.NONE


def test_metadata_hides_undescribable_topics_until_allowed_on_every_broker(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    for address in addresses(cluster):
        assert topic not in [t.name for t in metadata(address).topics]
        (asked,) = metadata(address, topic).topics
        assert asked.error == DENIED_TOPIC and not asked.partitions
    writer.add(acl(TOPIC, topic, Op.DESCRIBE))
    for address in addresses(cluster):
        eventually(
            lambda a=address: [t.name for t in metadata(a).topics],  # type: ignore[misc]
            lambda names: topic in names,
            what=f"{topic} visible on {address}",
        )
        (asked,) = metadata(address, topic).topics
        assert asked.error == ErrorCode.NONE and asked.partitions


def test_produce_needs_write_and_a_host_deny_beats_the_allow(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    leader = leader_address(cluster, topic)
    (refused,) = produce(leader, topic).partitions
    assert refused.error == DENIED_TOPIC
    writer.add(acl(TOPIC, topic, Op.WRITE))
    eventually(
        lambda: produce(leader, topic).partitions[0].error,
        lambda e: e == ErrorCode.NONE,
        what="produce allowed",
    )
    deny = acl(TOPIC, topic, Op.WRITE, DENY, host="127.0.0.1")
    writer.add(deny)
    eventually(
        lambda: produce(leader, topic).partitions[0].error,
        lambda e: e == DENIED_TOPIC,
        what="produce denied from 127.0.0.1",
    )
    # A DENY for another host does not apply.
    writer.remove(deny)
    writer.add(acl(TOPIC, topic, Op.WRITE, DENY, host="10.9.8.7"))
    eventually(
        lambda: produce(leader, topic).partitions[0].error,
        lambda e: e == ErrorCode.NONE,
        what="produce allowed again",
    )


def test_prefixed_deny_beats_literal_allow(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    leader = leader_address(cluster, topic)
    writer.add(acl(TOPIC, topic, Op.WRITE))
    eventually(
        lambda: produce(leader, topic).partitions[0].error,
        lambda e: e == ErrorCode.NONE,
        what="produce allowed",
    )
    # The prefix is all but the name's last character: a shorter one (it was
    # ``topic[:7]``, "made-" and two hex digits) also denied CREATE to one in 256 of the
    # later tests' random "made-" names, and the DENY goes once it has been seen to apply.
    deny = acl(TOPIC, topic[:-1], Op.ALL, DENY, pattern=PRE)
    writer.add(deny)
    try:
        eventually(
            lambda: produce(leader, topic).partitions[0].error,
            lambda e: e == DENIED_TOPIC,
            what="a PREFIXED DENY ALL applies",
        )
    finally:
        writer.remove(deny)


def test_fetch_needs_read_and_list_offsets_describe(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    leader = leader_address(cluster, topic)
    writer.add(acl(TOPIC, topic, Op.WRITE))
    eventually(
        lambda: produce(leader, topic, b"secret").partitions[0].error,
        lambda e: e == ErrorCode.NONE,
        what="produce allowed",
    )
    (refused,) = fetch(leader, topic).partitions
    assert refused.error == DENIED_TOPIC and refused.records == b""

    # WRITE implies DESCRIBE: ListOffsets is allowed, Fetch still not.
    def list_offsets() -> int:
        r = broker(leader).ListOffsets(
            broker_pb2.ListOffsetsRequest(
                replica_id=-1,
                partitions=[
                    broker_pb2.ListOffsetsPartition(
                        topic=topic, partition=0, timestamp=-1, current_leader_epoch=-1
                    )
                ],
            ),
            timeout=30,
        )
        return int(r.partitions[0].error)

    assert list_offsets() == ErrorCode.NONE
    writer.add(acl(TOPIC, topic, Op.READ))
    fetched = eventually(
        lambda: fetch(leader, topic).partitions[0],
        lambda p: p.error == ErrorCode.NONE,
        what="fetch allowed",
    )
    assert b"secret" in fetched.records
    writer.remove(acl(TOPIC, topic, Op.WRITE), acl(TOPIC, topic, Op.READ))
    eventually(list_offsets, lambda e: e == DENIED_TOPIC, what="ListOffsets refused")


def test_each_request_on_a_produce_or_fetch_stream_is_authorized_as_the_unary_call(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    leader = leader_address(cluster, topic)
    channels = connection.Channels()
    produce_on, fetch_on = (
        streams.StreamedCalls(channels, "Produce"),
        streams.StreamedCalls(channels, "Fetch"),
    )
    try:

        def streamed_produce() -> int:
            return int(
                produce_on.call(leader, produce_request(topic), timeout_s=30).partitions[0].error
            )

        def streamed_fetch() -> broker_pb2.FetchedPartition:
            return fetch_on.call(leader, fetch_request(topic), timeout_s=30).partitions[0]

        assert streamed_produce() == DENIED_TOPIC
        refused = streamed_fetch()
        assert refused.error == DENIED_TOPIC and refused.records == b""
        writer.add(acl(TOPIC, topic, Op.WRITE), acl(TOPIC, topic, Op.READ))
        eventually(streamed_produce, lambda e: e == ErrorCode.NONE, what="streamed produce")
        fetched = eventually(
            streamed_fetch, lambda p: p.error == ErrorCode.NONE, what="streamed fetch"
        )
        assert b"v" in bytes(fetched.records)  # a view of the received answer
        # Both went on their streams (not a fallback to unary calls).
        assert isinstance(produce_on, streams.StreamedCalls)
        assert list(produce_on._streams) == [leader] and list(fetch_on._streams) == [leader]
        writer.remove(acl(TOPIC, topic, Op.WRITE))
        eventually(streamed_produce, lambda e: e == DENIED_TOPIC, what="refused again")
    finally:
        produce_on.close()
        fetch_on.close()
        channels.close()


def test_group_rpcs_need_group_acls(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    gid = name("app-")
    address = addresses(cluster)[0]
    g = group(address)
    found = g.FindCoordinator(group_pb2.FindCoordinatorRequest(key=gid), timeout=30)
    assert found.error_code == DENIED_GROUP
    join = g.JoinGroup(
        group_pb2.JoinGroupRequest(
            group_id=gid, session_timeout_ms=10000, protocol_type="consumer"
        ),
        timeout=30,
    )
    assert join.error_code == DENIED_GROUP
    hb = g.Heartbeat(group_pb2.HeartbeatRequest(group_id=gid, member_id="m"), timeout=30)
    assert hb.error_code == DENIED_GROUP
    commit = g.OffsetCommit(
        group_pb2.OffsetCommitRequest(
            group_id=gid,
            generation_id=-1,
            partitions=[
                group_pb2.OffsetCommitRequestPartition(
                    topic=topic, partition_index=0, committed_offset=5
                )
            ],
        ),
        timeout=30,
    )
    assert commit.error_code == DENIED_GROUP
    fetched = g.OffsetFetch(group_pb2.OffsetFetchRequest(group_id=gid), timeout=30)
    assert fetched.error_code == DENIED_GROUP
    described = g.DescribeGroups(group_pb2.DescribeGroupsRequest(groups=[gid]), timeout=30)
    assert described.groups[0].error_code == DENIED_GROUP
    deleted = g.DeleteGroups(group_pb2.DeleteGroupsRequest(groups_names=[gid]), timeout=30)
    assert deleted.results[0].error_code == DENIED_GROUP
    # READ on the group (PREFIXED) but not on the topic: the commit is refused per partition.
    writer.add(acl(GROUP, "app-", Op.READ, pattern=PRE))
    coordinator = eventually(
        lambda: g.FindCoordinator(group_pb2.FindCoordinatorRequest(key=gid), timeout=30),
        lambda r: r.error_code == ErrorCode.NONE,
        what="FindCoordinator allowed (READ implies DESCRIBE)",
    )
    c = group(f"{coordinator.host}:{coordinator.port}")
    commit = eventually(
        lambda: c.OffsetCommit(
            group_pb2.OffsetCommitRequest(
                group_id=gid,
                generation_id=-1,
                partitions=[
                    group_pb2.OffsetCommitRequestPartition(
                        topic=topic, partition_index=0, committed_offset=5
                    )
                ],
            ),
            timeout=30,
        ),
        lambda r: r.error_code == ErrorCode.NONE,
        what="group READ seen by the coordinator",
    )
    assert [p.error_code for p in commit.partitions] == [DENIED_TOPIC]
    fetched = c.OffsetFetch(group_pb2.OffsetFetchRequest(group_id=gid), timeout=30)
    assert fetched.error_code == ErrorCode.NONE and not fetched.partitions  # nothing committed
    # ListGroups without DESCRIBE on the cluster lists only describable groups.
    listed = c.ListGroups(group_pb2.ListGroupsRequest(), timeout=30)
    assert all(lg.group_id.startswith("app-") for lg in listed.groups)
    deleted = c.DeleteGroups(group_pb2.DeleteGroupsRequest(groups_names=[gid]), timeout=30)
    assert deleted.results[0].error_code == DENIED_GROUP  # READ does not imply DELETE


def test_admin_topic_and_config_rpcs(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    topic = new_topic(cluster, writer)
    a = admin(addresses(cluster)[0])
    deleted = a.DeleteTopics(admin_pb2.DeleteTopicsRequest(topics=[topic], timeout_ms=5000))
    assert deleted.topics[0].error == DENIED_TOPIC
    assert topic in cluster.zk.get_topics()
    grown = a.CreatePartitions(
        admin_pb2.CreatePartitionsRequest(
            topics=[admin_pb2.CreatePartitionsTopic(name=topic, count=3)], timeout_ms=5000
        )
    )
    assert grown.topics[0].error == DENIED_TOPIC
    assert len(cluster.zk.get_assignment(topic).partitions) == 1  # type: ignore[union-attr]
    described = a.DescribeConfigs(
        admin_pb2.DescribeConfigsRequest(
            resources=[
                admin_pb2.ConfigResource(type=admin_pb2.TOPIC, name=topic),
                admin_pb2.ConfigResource(type=admin_pb2.BROKER, name="0"),
            ]
        )
    )
    assert [r.error for r in described.results] == [DENIED_TOPIC, DENIED_CLUSTER]
    altered = a.AlterConfigs(
        admin_pb2.AlterConfigsRequest(
            resources=[
                admin_pb2.AlterConfigsResource(
                    type=admin_pb2.TOPIC,
                    name=topic,
                    configs=[
                        admin_pb2.AlterableConfig(
                            name="retention.ms", value="1000", op=admin_pb2.SET
                        )
                    ],
                )
            ]
        )
    )
    assert altered.results[0].error == DENIED_TOPIC
    assert "retention.ms" not in cluster.zk.get_topic_config(topic)
    with pytest.raises(grpc.RpcError) as refused:
        a.DescribeCluster(admin_pb2.DescribeClusterRequest(), timeout=30)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "CLUSTER_AUTHORIZATION_FAILED" in (refused.value.details() or "")
    with (
        Admin(cluster.bootstrap, default_api_timeout_ms=10000) as client,
        pytest.raises(errors.ClusterAuthorizationFailedError, match="DESCRIBE the cluster"),
    ):
        client.describe_cluster()
    elected = a.ElectLeaders(
        admin_pb2.ElectLeadersRequest(
            election_type=admin_pb2.PREFERRED,
            partitions=[common_pb2.TopicPartition(topic=topic, partition=0)],
        )
    )
    assert elected.results[0].error == DENIED_CLUSTER
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS; DELETE allows the delete.
    writer.add(acl(TOPIC, topic, Op.ALTER_CONFIGS), acl(TOPIC, topic, Op.DELETE))
    eventually(
        lambda: (
            a.DescribeConfigs(
                admin_pb2.DescribeConfigsRequest(
                    resources=[admin_pb2.ConfigResource(type=admin_pb2.TOPIC, name=topic)]
                )
            )
            .results[0]
            .error
        ),
        lambda e: e == ErrorCode.NONE,
        what="DescribeConfigs allowed",
    )
    eventually(
        lambda: (
            a.DeleteTopics(admin_pb2.DeleteTopicsRequest(topics=[topic], timeout_ms=15000))
            .topics[0]
            .error
        ),
        lambda e: e in (ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        what="DeleteTopics allowed",
    )


def test_broker_configs_never_show_the_zookeeper_password(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, writer = secured
    writer.add(acl(CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS))
    a = admin(addresses(cluster)[0])
    result = eventually(
        lambda: a.DescribeConfigs(
            admin_pb2.DescribeConfigsRequest(
                resources=[admin_pb2.ConfigResource(type=admin_pb2.BROKER, name="0")]
            )
        ).results[0],
        lambda r: r.error == ErrorCode.NONE,
        what="DescribeConfigs of the broker allowed",
    )
    entries = {e.name: e for e in result.entries}
    assert entries["authorizer.class.name"].value == "kafka.security.authorizer.AclAuthorizer"
    assert entries["zookeeper.digest.password"].is_sensitive
    writer.remove(acl(CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS))


def test_controller_rpcs_need_cluster_action(secured: tuple[Cluster, AclWriter]) -> None:
    """Last in the module: it takes CLUSTER_ACTION away from every broker for a moment."""
    cluster, writer = secured
    address = addresses(cluster)[1]
    deny = acl(CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, DENY)
    writer.add(deny)
    try:
        c = control(address)
        # Wait with a harmless request (a stale epoch, refused either way) until the DENY
        # is in force, then send ones that would change the broker if they were obeyed.
        eventually(
            lambda: (
                c.UpdateMetadata(
                    control_pb2.UpdateMetadataRequest(controller_id=99, controller_epoch=0),
                    timeout=30,
                ).error
            ),
            lambda e: e == DENIED_CLUSTER,
            what="the DENY in force",
        )
        response = c.UpdateMetadata(
            control_pb2.UpdateMetadataRequest(controller_id=99, controller_epoch=1 << 30),
            timeout=30,
        )
        assert response.error == DENIED_CLUSTER
        stopped = c.StopReplica(control_pb2.StopReplicaRequest(controller_epoch=1 << 30))
        assert stopped.error == DENIED_CLUSTER
        shutdown = c.ControlledShutdown(control_pb2.ControlledShutdownRequest(broker_id=1))
        assert shutdown.error == DENIED_CLUSTER
        leaders = c.LeaderAndIsr(control_pb2.LeaderAndIsrRequest(controller_epoch=1 << 30))
        assert leaders.error == DENIED_CLUSTER
    finally:
        writer.remove(deny)
    # Nothing changed: the broker still knows the real controller, and the cluster works.
    assert metadata(address).controller_id == cluster.controller_id() != 99
    new_topic(cluster, writer)
