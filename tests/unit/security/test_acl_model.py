"""The ACL values: validation of bindings and filters, and Kafka's filter semantics (ANY, MATCH)."""

from __future__ import annotations

import pytest
from headwater.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    binding,
    operation_from_zk,
    permission_from_zk,
    resource_type_from_zk,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def topic(name: str, pattern: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(ResourceType.TOPIC, name, pattern)


def entry(
    principal: str = "User:alice",
    op: AclOperation = AclOperation.READ,
    perm: AclPermissionType = ALLOW,
    host: str = "*",
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


@pytest.mark.parametrize(
    ("rtype", "name", "pattern", "why"),
    [
        (ResourceType.ANY, "t", LIT, "concrete resource type"),
        (ResourceType.UNKNOWN, "t", LIT, "concrete resource type"),
        (ResourceType.TOPIC, "t", PatternType.ANY, "LITERAL or PREFIXED"),
        (ResourceType.TOPIC, "t", PatternType.MATCH, "LITERAL or PREFIXED"),
        (ResourceType.TOPIC, "", LIT, "must not be empty"),
        (ResourceType.CLUSTER, "other", LIT, "kafka-cluster"),
        (ResourceType.CLUSTER, "kafka-cluster", PRE, "kafka-cluster"),
        (ResourceType.TOPIC, "*", PRE, "PREFIXED pattern cannot be"),
    ],
)
def test_bad_patterns_are_refused(
    rtype: ResourceType, name: str, pattern: PatternType, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        ResourcePattern(rtype, name, pattern)


@pytest.mark.parametrize(
    ("principal", "host", "op", "perm", "why"),
    [
        ("alice", "*", AclOperation.READ, ALLOW, "<type>:<name>"),
        ("User:", "*", AclOperation.READ, ALLOW, "<type>:<name>"),
        ("User:alice", "not-an-ip", AclOperation.READ, ALLOW, "IP address"),
        ("User:alice", "", AclOperation.READ, ALLOW, "IP address"),
        ("User:alice", "*", AclOperation.ANY, ALLOW, "concrete operation"),
        ("User:alice", "*", AclOperation.UNKNOWN, ALLOW, "concrete operation"),
        ("User:alice", "*", AclOperation.READ, AclPermissionType.ANY, "ALLOW or DENY"),
        ("User:alice", "*", AclOperation.READ, AclPermissionType.UNKNOWN, "ALLOW or DENY"),
    ],
)
def test_bad_entries_are_refused(
    principal: str, host: str, op: AclOperation, perm: AclPermissionType, why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        AccessControlEntry(principal, host, op, perm)


def test_hosts_are_normalised_ip_addresses() -> None:
    assert entry(host="::0001").host == "::1"
    assert entry(host="10.0.0.1").host == "10.0.0.1"


@pytest.mark.parametrize(
    ("rtype", "name", "op"),
    [
        (ResourceType.GROUP, "g", AclOperation.WRITE),
        (ResourceType.GROUP, "g", AclOperation.ALTER),
        (ResourceType.TOPIC, "t", AclOperation.CLUSTER_ACTION),
        (ResourceType.TOPIC, "t", AclOperation.IDEMPOTENT_WRITE),
        (ResourceType.CLUSTER, "kafka-cluster", AclOperation.READ),
        (ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.READ),
    ],
)
def test_operations_must_suit_the_resource_type(
    rtype: ResourceType, name: str, op: AclOperation
) -> None:
    with pytest.raises(ValueError, match="does not apply"):
        AclBinding(ResourcePattern(rtype, name), entry(op=op))


def test_every_type_accepts_all() -> None:
    for rtype, name in [
        (ResourceType.TOPIC, "t"),
        (ResourceType.GROUP, "g"),
        (ResourceType.CLUSTER, "kafka-cluster"),
        (ResourceType.TRANSACTIONAL_ID, "x"),
    ]:
        AclBinding(ResourcePattern(rtype, name), entry(op=AclOperation.ALL))


def test_zk_names_are_kafkas() -> None:
    assert ResourceType.TRANSACTIONAL_ID.zk_name == "TransactionalId"
    assert AclOperation.CLUSTER_ACTION.zk_name == "ClusterAction"
    assert AclOperation.DESCRIBE_CONFIGS.zk_name == "DescribeConfigs"
    assert AclOperation.IDEMPOTENT_WRITE.zk_name == "IdempotentWrite"
    assert ALLOW.zk_name == "Allow" and DENY.zk_name == "Deny"
    for op in AclOperation:
        if op not in (AclOperation.ANY, AclOperation.UNKNOWN):
            assert operation_from_zk(op.zk_name) is op
    for rtype in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER):
        assert resource_type_from_zk(rtype.zk_name) is rtype
    assert permission_from_zk("Deny") is DENY
    for bad, parse in [("Any", operation_from_zk), ("Any", permission_from_zk)]:
        with pytest.raises(ValueError):
            parse(bad)
    with pytest.raises(ValueError):
        resource_type_from_zk("User")


# -- filters ---------------------------------------------------------------------------------


def test_default_filter_matches_everything() -> None:
    f = AclBindingFilter.any()
    assert f.matches(AclBinding(topic("a"), entry()))
    assert f.matches(AclBinding(topic("a", PRE), entry(perm=DENY, host="1.2.3.4")))


@pytest.mark.parametrize(
    ("flt", "pattern", "expected"),
    [
        (ResourcePatternFilter(ResourceType.TOPIC, "foo", PatternType.ANY), topic("foo"), True),
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foo", PatternType.ANY),
            topic("foo", PRE),
            True,
        ),
        (ResourcePatternFilter(ResourceType.TOPIC, "foo", PatternType.ANY), topic("*"), False),
        (ResourcePatternFilter(ResourceType.TOPIC, "foo", LIT), topic("foo", PRE), False),
        (ResourcePatternFilter(ResourceType.TOPIC, "foo", PRE), topic("foo", PRE), True),
        (ResourcePatternFilter(ResourceType.TOPIC, "foobar", PRE), topic("foo", PRE), False),
        (ResourcePatternFilter(ResourceType.GROUP, "foo", PatternType.ANY), topic("foo"), False),
        (ResourcePatternFilter(ResourceType.ANY, "foo", PatternType.ANY), topic("foo"), True),
        (ResourcePatternFilter(ResourceType.TOPIC, None, LIT), topic("foo"), True),
        (ResourcePatternFilter(ResourceType.TOPIC, None, PRE), topic("foo"), False),
        # MATCH: what would apply to the resource named.
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foobar", PatternType.MATCH),
            topic("foobar"),
            True,
        ),
        (ResourcePatternFilter(ResourceType.TOPIC, "foobar", PatternType.MATCH), topic("*"), True),
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foobar", PatternType.MATCH),
            topic("foo", PRE),
            True,
        ),
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foobar", PatternType.MATCH),
            topic("foobar", PRE),
            True,
        ),
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foobar", PatternType.MATCH),
            topic("bar", PRE),
            False,
        ),
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foobar", PatternType.MATCH),
            topic("foo"),
            False,
        ),
        (
            ResourcePatternFilter(ResourceType.TOPIC, "foo", PatternType.MATCH),
            topic("foobar", PRE),
            False,
        ),
    ],
)
def test_pattern_filters(
    flt: ResourcePatternFilter, pattern: ResourcePattern, expected: bool
) -> None:
    assert flt.matches(pattern) is expected


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (AccessControlEntryFilter(), True),
        (AccessControlEntryFilter(principal="User:alice"), True),
        (AccessControlEntryFilter(principal="User:bob"), False),
        (AccessControlEntryFilter(principal="User:*"), False),
        (AccessControlEntryFilter(host="10.0.0.1"), True),
        (AccessControlEntryFilter(host="*"), False),
        (AccessControlEntryFilter(operation=AclOperation.READ), True),
        (AccessControlEntryFilter(operation=AclOperation.WRITE), False),
        (AccessControlEntryFilter(permission_type=ALLOW), True),
        (AccessControlEntryFilter(permission_type=DENY), False),
    ],
)
def test_entry_filters(flt: AccessControlEntryFilter, expected: bool) -> None:
    assert flt.matches(entry(host="10.0.0.1")) is expected


@pytest.mark.parametrize(
    "make",
    [
        lambda: ResourcePatternFilter(ResourceType.UNKNOWN),
        lambda: ResourcePatternFilter(pattern_type=PatternType.UNKNOWN),
        lambda: AccessControlEntryFilter(principal="nobody"),
        lambda: AccessControlEntryFilter(host="somewhere"),
        lambda: AccessControlEntryFilter(operation=AclOperation.UNKNOWN),
        lambda: AccessControlEntryFilter(permission_type=AclPermissionType.UNKNOWN),
    ],
)
def test_bad_filters_are_refused(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_binding_shorthand_and_text() -> None:
    b = binding(
        resource_type=ResourceType.TOPIC,
        name="orders",
        principal="User:alice",
        operation=AclOperation.WRITE,
        pattern_type=PRE,
    )
    assert b == AclBinding(topic("orders", PRE), entry(op=AclOperation.WRITE))
    assert str(b) == "ALLOW User:alice from * WRITE on TOPIC:PREFIXED:orders"
