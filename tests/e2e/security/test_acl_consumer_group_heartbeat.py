"""ConsumerGroupHeartbeat (KIP-848) under Kafka's authorizer on a real broker
(``User:ANONYMOUS`` from 127.0.0.1), as Kafka's KafkaApis and group coordinator decide:
READ on the group or GROUP_AUTHORIZATION_FAILED; a named topic the principal may not
DESCRIBE refuses the heartbeat with TOPIC_AUTHORIZATION_FAILED and joins nobody; a regex
is never refused, its matches the principal may not DESCRIBE are left out of the
assignment until an ACL allows them; the Consumer (``group_protocol="consumer"``) raises
TopicAuthorizationFailedError from poll for a named topic it may not see."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.client.consumer.consumer import Consumer
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import PatternType, ResourceType
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import group_pb2

from tests.e2e.security.acl_helpers import (
    INTER_BROKER,
    AclWriter,
    acl,
    eventually,
    group,
    name,
    secured_cluster,
)

TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
PRE = PatternType.PREFIXED
SEEN, HIDDEN, LATER = "cgh-seen", "cgh-hidden", "cgh-later"


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, AclWriter]]:
    """One broker; topics cgh-seen (2 partitions, DESCRIBE and READ), cgh-hidden and
    cgh-later (no ACL); READ on the groups named ``ok-*``."""
    data_dir: Path = tmp_path_factory.mktemp("acl-cgh")
    initial = (
        INTER_BROKER,
        acl(ResourceType.CLUSTER, "kafka-cluster", Op.CREATE),
        acl(GROUP, "ok-", Op.READ, pattern=PRE),
        acl(TOPIC, SEEN, Op.DESCRIBE),
        acl(TOPIC, SEEN, Op.READ),
    )
    with secured_cluster(
        zookeeper.connect_string,
        data_dir,
        initial=initial,
        overrides={"offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1"},
    ) as (cluster, writer):
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics(
                [NewTopic(SEEN, 2, 1), NewTopic(HIDDEN, 1, 1), NewTopic(LATER, 1, 1)]
            )
        for t in (SEEN, HIDDEN, LATER):
            cluster.wait_for(lambda t=t: cluster.leader_for(t, 0) is not None, what=f"{t} leader")
        yield cluster, writer


def coordinator(cluster: Cluster, gid: str) -> Any:
    """The group's coordinator stub, once FindCoordinator answers."""
    g = group(cluster.bootstrap.split(",")[0])
    found = eventually(
        lambda: g.FindCoordinator(group_pb2.FindCoordinatorRequest(key=gid), timeout=30),
        lambda r: r.error_code == ErrorCode.NONE,
        what=f"the coordinator of {gid}",
    )
    return group(f"{found.host}:{found.port}")


def join(stub: Any, gid: str, *, topics: list[str] | None = None, regex: str | None = None) -> Any:
    request = group_pb2.ConsumerGroupHeartbeatRequest(
        group_id=gid, member_epoch=0, rebalance_timeout_ms=30_000
    )
    if topics is not None:
        request.subscribed_topic_names.names.extend(topics)
    if regex is not None:
        request.subscribed_topic_regex = regex
    return stub.ConsumerGroupHeartbeat(request, timeout=30)


def heartbeat(stub: Any, gid: str, member_id: str, epoch: int, owned: Any) -> Any:
    return stub.ConsumerGroupHeartbeat(
        group_pb2.ConsumerGroupHeartbeatRequest(
            group_id=gid, member_id=member_id, member_epoch=epoch, topic_partitions=owned
        ),
        timeout=30,
    )


def assigned(r: Any) -> set[tuple[str, int]]:
    return {(t.topic, p) for t in r.assignment.topic_partitions for p in t.partitions}


def test_heartbeat_needs_read_on_the_group(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, _ = secured
    stub = group(cluster.bootstrap.split(",")[0])
    gid = name("no-")
    r = join(stub, gid, topics=[SEEN])
    assert r.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert r.error_message == f"not authorized to READ GROUP {gid!r}"


def test_a_named_topic_it_may_not_describe_refuses_the_heartbeat(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, _ = secured
    gid = name("ok-")
    stub = coordinator(cluster, gid)
    r = join(stub, gid, topics=[SEEN, HIDDEN])
    assert r.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert r.error_message == f"not authorized to DESCRIBE TOPIC {HIDDEN!r}"
    assert not r.member_id and not r.HasField("assignment")
    described = stub.DescribeGroups(group_pb2.DescribeGroupsRequest(groups=[gid]), timeout=30)
    assert not described.groups[0].members  # the refused join changed nothing
    ok = join(stub, gid, topics=[SEEN])
    assert ok.error_code == ErrorCode.NONE, ok.error_message
    assert assigned(ok) == {(SEEN, 0), (SEEN, 1)}


def test_a_regex_is_assigned_only_the_topics_it_may_describe(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, writer = secured
    gid = name("ok-")
    stub = coordinator(cluster, gid)
    r = join(stub, gid, regex="cgh-.*")
    assert r.error_code == ErrorCode.NONE, r.error_message
    assert assigned(r) == {(SEEN, 0), (SEEN, 1)}
    # DESCRIBE on another matching topic: a later heartbeat assigns it too.
    writer.add(acl(TOPIC, LATER, Op.DESCRIBE))
    state = {"epoch": r.member_epoch, "owned": r.assignment}

    def beat() -> Any:
        answer = heartbeat(stub, gid, r.member_id, state["epoch"], state["owned"])
        if answer.error_code == ErrorCode.NONE:
            state["epoch"] = answer.member_epoch
            if answer.HasField("assignment"):
                state["owned"] = answer.assignment
        return answer

    last = eventually(
        beat, lambda a: (LATER, 0) in assigned(a), what=f"{LATER} assigned once describable"
    )
    assert last.error_code == ErrorCode.NONE
    assert HIDDEN not in {t for t, _ in assigned(last)}


def test_the_consumer_raises_topic_authorization_failed_for_a_named_hidden_topic(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, _ = secured
    with Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=name("ok-"),
        group_protocol="consumer",
        enable_auto_commit=False,
    ) as consumer:
        consumer.subscribe([HIDDEN])
        with pytest.raises(errors.TopicAuthorizationFailedError):
            for _ in range(20):  # bounded: 20 polls of at most 0.5 s
                consumer.poll(timeout_ms=500)


def test_the_consumer_with_a_pattern_gets_only_describable_topics(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, _ = secured
    with Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=name("ok-"),
        group_protocol="consumer",
        enable_auto_commit=False,
    ) as consumer:
        consumer.subscribe(pattern=r"cgh-(seen|hidden)")
        for _ in range(40):  # bounded: 40 polls of at most 0.5 s
            consumer.poll(timeout_ms=500)
            if consumer.assignment():
                break
        assert {tp.topic for tp in consumer.assignment()} == {SEEN}
