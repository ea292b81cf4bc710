"""The ACL decision of a ConsumerGroupHeartbeat (Kafka's handleConsumerGroupHeartbeat and
filterTopicDescribeAuthorizedTopics): GROUP READ first, explicitly named topics refused
whole with TOPIC_AUTHORIZATION_FAILED, regex matches the principal may not DESCRIBE
silently left out.  Covers the pure :func:`authorize_subscription`, the state machine's
regex filtering (:class:`ConsumerGroup`), and the servicer over a real AclAuthorizer --
where a refused heartbeat changes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.groups.consumer.group import JOIN_EPOCH, ConsumerGroup, Heartbeat
from headwater.groups.consumer.subscription_authorization import (
    authorize_subscription,
    regex_authorized,
)
from headwater.groups.values import ConsumerGroupHeartbeatRequest
from headwater.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding,
)
from headwater.security.authorizer import AclAuthorizer, AclSnapshot, AuthorizerSettings
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.v1 import common_pb2
from headwater.values import TopicPartition

from tests.unit.groups.test_consumer_group_service import Cluster, owned
from tests.unit.groups.test_consumer_records import _coordinator

TP = TopicPartition
Op = AclOperation

# -- the pure decision ---------------------------------------------------------------------


def test_no_group_read_refuses_the_whole_request_before_the_topics() -> None:
    d = authorize_subscription(
        group_id="g",
        group_read=False,
        subscribed_topic_names=("t",),
        describe_refused=("t",),
        describable_topics=frozenset(),
    )
    assert d.refused and d.error_code is ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert "GROUP 'g'" in d.error_message and d.describable_topics is None


def test_a_named_topic_without_describe_refuses_the_request_naming_it() -> None:
    d = authorize_subscription(
        group_id="g",
        group_read=True,
        subscribed_topic_names=("a", "secret", "b"),
        describe_refused=("secret",),
        describable_topics=frozenset({"a", "b"}),
    )
    assert d.error_code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert d.error_message == "not authorized to DESCRIBE TOPIC 'secret'"
    assert d.describable_topics is None
    # The message carries no code name: the code travels in error_code.
    assert "AUTHORIZATION_FAILED" not in d.error_message


def test_allowed_names_pass_the_describable_topics_on() -> None:
    d = authorize_subscription(
        group_id="g",
        group_read=True,
        subscribed_topic_names=("a",),
        describe_refused=(),
        describable_topics=frozenset({"a", "x"}),
    )
    assert not d.refused and d.describable_topics == {"a", "x"}


def test_names_absent_from_the_heartbeat_are_not_checked() -> None:
    # Kafka checks only a non-empty SubscribedTopicNames: unchanged means not sent.
    d = authorize_subscription(
        group_id="g",
        group_read=True,
        subscribed_topic_names=None,
        describe_refused=("secret",),
        describable_topics=None,
    )
    assert not d.refused and d.describable_topics is None


def test_regex_authorized_keeps_the_whole_name_matches_of_the_describable_topics() -> None:
    describable = frozenset({"orders-eu", "orders-eu-old", "xorders-us", "payments"})
    assert regex_authorized("orders-[a-z]+", describable) == {"orders-eu"}
    assert regex_authorized("orders-.*", None) is None
    assert regex_authorized(None, describable) is None


# -- the state machine: a regex matches only describable topics -----------------------------

COUNTS = {"orders-eu": 2, "orders-us": 1, "payments": 1}


def regex_join(group: ConsumerGroup, describable: frozenset[str] | None) -> set[TP]:
    hb = Heartbeat(
        "",
        JOIN_EPOCH,
        subscribed_topics=frozenset(),
        subscribed_topic_regex="orders-.*",
        describable_topics=describable,
    )
    r = group.heartbeat(hb, now_ms=0, partition_counts=COUNTS)
    assert r.error_code is ErrorCode.NONE
    return set(r.assignment)


def test_a_regex_drops_the_topics_the_member_may_not_describe() -> None:
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    got = regex_join(group, frozenset({"orders-eu", "payments"}))
    assert got == {TP("orders-eu", 0), TP("orders-eu", 1)}
    assert group.members["m1"].regex_topics == {"orders-eu"}


def test_without_an_authorizer_a_regex_matches_every_topic() -> None:
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    got = regex_join(group, None)
    assert got == {TP("orders-eu", 0), TP("orders-eu", 1), TP("orders-us", 0)}


def test_a_new_topic_waits_for_a_heartbeat_that_may_describe_it() -> None:
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    first = regex_join(group, frozenset({"orders-eu", "orders-us"}))
    counts = dict(COUNTS, **{"orders-jp": 1})
    # The timer sees the new topic, but no heartbeat has said the member may see it.
    group.tick(now_ms=1, partition_counts=counts)
    assert group.members["m1"].regex_topics == {"orders-eu", "orders-us"}
    hb = Heartbeat("m1", 1, owned=frozenset(first), describable_topics=frozenset(counts))
    r = group.heartbeat(hb, now_ms=2, partition_counts=counts)
    assert r.error_code is ErrorCode.NONE and TP("orders-jp", 0) in r.assignment


def test_losing_describe_revokes_the_topic_at_the_next_heartbeat() -> None:
    group = ConsumerGroup("g", member_id_factory=lambda: "m1")
    first = regex_join(group, frozenset(COUNTS))
    assert TP("orders-us", 0) in first
    hb = Heartbeat("m1", 1, owned=frozenset(first), describable_topics=frozenset({"orders-eu"}))
    r = group.heartbeat(hb, now_ms=1, partition_counts=COUNTS)
    assert r.error_code is ErrorCode.NONE
    assert group.members["m1"].regex_topics == {"orders-eu"}
    assert TP("orders-us", 0) in group.members["m1"].pending_revocation


def test_members_sharing_a_regex_see_each_their_own_topics() -> None:
    ids = iter(["m1", "m2"])
    group = ConsumerGroup("g", member_id_factory=lambda: next(ids))
    regex_join(group, frozenset({"orders-eu"}))
    regex_join(group, frozenset({"orders-eu", "orders-us"}))
    assert group.members["m1"].regex_topics == {"orders-eu"}
    assert group.members["m2"].regex_topics == {"orders-eu", "orders-us"}
    assert all(tp.topic == "orders-eu" for tp in group.target.get("m1", frozenset()))


# -- the servicer over a real authorizer --------------------------------------------------

ANON = "User:ANONYMOUS"


def acl(name: str, op: AclOperation, rtype: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return binding(
        resource_type=rtype,
        name=name,
        principal=ANON,
        operation=op,
        permission_type=AclPermissionType.ALLOW,
        host="*",
        pattern_type=PatternType.LITERAL,
    )


@pytest.fixture
def secured() -> Iterator[Cluster]:
    """The in-process cluster (topics t:4, u:2) with ACLs: READ on group g, DESCRIBE on t."""
    loop = asyncio.new_event_loop()
    c = Cluster(loop)
    snapshot = AclSnapshot.of([acl("g", Op.READ, ResourceType.GROUP), acl("t", Op.DESCRIBE)])
    c.service._authz = RequestAuthorizer(AclAuthorizer(AuthorizerSettings(), snapshot))
    c.lead()
    yield c
    c.run(c.runtime.close())
    loop.close()


class _Peer:
    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"


def test_allowed_topics_are_remembered_until_the_acls_or_the_topics_change() -> None:
    authorizer = AclAuthorizer(AuthorizerSettings(), AclSnapshot.of([acl("t", Op.DESCRIBE)]))
    authz = RequestAuthorizer(authorizer)
    ctx: Any = _Peer()
    assert authz.allowed_topics(ctx, Op.DESCRIBE, ["t", "u"], version=1) == {"t"}
    # Same ACLs, same version: the remembered answer (the names are not looked at).
    assert authz.allowed_topics(ctx, Op.DESCRIBE, ["t", "u", "v"], version=1) == {"t"}
    assert authz.allowed_topics(ctx, Op.DESCRIBE, ["t", "u", "v"], version=2) == {"t"}
    authorizer.update(AclSnapshot.of([acl("t", Op.DESCRIBE), acl("v", Op.DESCRIBE)]))
    assert authz.allowed_topics(ctx, Op.DESCRIBE, ["t", "u", "v"], version=2) == {"t", "v"}
    # A new version: only the new names are decided, the names gone are dropped.
    asked: list[str] = []
    decide = authorizer.authorize

    def counting(**kw: Any) -> bool:
        asked.append(kw["name"])
        return decide(**kw)

    authorizer.authorize = counting  # type: ignore[method-assign]
    assert authz.allowed_topics(ctx, Op.DESCRIBE, ["v", "w"], version=3) == {"v"}
    assert asked == ["w"]
    assert RequestAuthorizer(None).allowed_topics(ctx, Op.DESCRIBE, ["t"], version=1) is None


def test_service_refuses_a_named_topic_it_may_not_describe_and_creates_nothing(
    secured: Cluster,
) -> None:
    r = secured.join(["t", "u"])
    assert r.error_code == common_pb2.TOPIC_AUTHORIZATION_FAILED
    assert r.error_message == "not authorized to DESCRIBE TOPIC 'u'"
    assert not r.HasField("assignment")
    assert secured.describe().group_state == "Dead"  # no group was created


def test_service_assigns_named_topics_it_may_describe(secured: Cluster) -> None:
    r = secured.join(["t"])
    assert r.error_code == common_pb2.NONE, r.error_message
    assert owned(r) == {("t", p) for p in range(4)}


def test_service_drops_regex_matches_it_may_not_describe(secured: Cluster) -> None:
    r = secured.hb(member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_regex="t|u")
    assert r.error_code == common_pb2.NONE, r.error_message
    assert owned(r) == {("t", p) for p in range(4)}


def test_service_refuses_a_group_it_may_not_read(secured: Cluster) -> None:
    r = secured.hb(group_id="other", member_epoch=0, rebalance_timeout_ms=30_000, topics=["t"])
    assert r.error_code == common_pb2.GROUP_AUTHORIZATION_FAILED
    assert "GROUP_AUTHORIZATION_FAILED" not in r.error_message


def test_service_without_authorizer_keeps_regex_matching_everything() -> None:
    loop = asyncio.new_event_loop()
    c = Cluster(loop)
    c.lead()
    try:
        r = c.hb(member_epoch=0, rebalance_timeout_ms=30_000, subscribed_topic_regex="t|u")
        assert r.error_code == common_pb2.NONE
        assert {t for t, _ in owned(r)} == {"t", "u"}
    finally:
        c.run(c.runtime.close())
        loop.close()


# -- a new coordinator: the recorded matches bound the regex until the next heartbeat ------


def test_after_replay_a_regex_matches_no_new_topic_before_its_member_heartbeats() -> None:
    c = _coordinator()
    counts = {"orders-eu": 1, "orders-us": 1}
    join = ConsumerGroupHeartbeatRequest(
        "g",
        "",
        0,
        rebalance_timeout_ms=5000,
        subscribed_topic_regex="orders-.*",
        describable_topics=frozenset({"orders-eu"}),
    )
    d = c.consumer_group_heartbeat(join, request_id=1, now_ms=0, partition_counts=counts)
    fresh = _coordinator()
    for r in d.records:
        fresh.replay(r.key, r.value, now_ms=10)
    member = fresh.consumer.groups["g"].members["m0"]
    assert member.regex_topics == {"orders-eu"}
    # Its principal's rights are unknown to the new coordinator: no topic is added...
    fresh.consumer.groups["g"].tick(now_ms=11, partition_counts=counts)
    assert member.regex_topics == {"orders-eu"}
    # ...until a heartbeat says what it may describe.
    beat = ConsumerGroupHeartbeatRequest(
        "g",
        "m0",
        1,
        topic_partitions=(TP("orders-eu", 0),),
        describable_topics=frozenset(counts),
    )
    d = fresh.consumer_group_heartbeat(beat, request_id=2, now_ms=12, partition_counts=counts)
    assert d.replies[0].response.error_code is ErrorCode.NONE  # type: ignore[union-attr]
    assert member.regex_topics == {"orders-eu", "orders-us"}
