"""Kafka admin requests to the runtime's calls: config operations and ACL bindings."""

from __future__ import annotations

import dataclasses

import pytest
from headwater import errors
from headwater.kafka.acl_apis import binding_of, filter_of
from headwater.kafka.admin_apis import alter_configs_ops, incremental_ops
from headwater.security.acls import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from headwater.server.runtime.config_admin import AlterOp, apply_ops, resource_type
from kio.index import load_payload_module
from kio.static.constants import EntityType

DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000"}


def test_alter_configs_replaces_every_override() -> None:
    ops = alter_configs_ops(
        [("retention.ms", "1000"), ("segment.bytes", None)],
        {"retention.ms": "5", "cleanup.policy": "compact", "max.message.bytes": "10"},
    )
    assert apply_ops({}, {}, ops) == (
        {"retention.ms": "1000"},
        ["segment.bytes", "cleanup.policy", "max.message.bytes"],
    )


def test_incremental_set_delete_append_subtract() -> None:
    current = {"retention.ms": "5", "cleanup.policy": "compact"}
    assert apply_ops(
        current,
        DEFAULTS,
        [
            ("retention.ms", AlterOp.DELETE, None),
            ("segment.bytes", AlterOp.SET, "1048576"),
            ("cleanup.policy", AlterOp.APPEND, "delete,compact"),
        ],
    ) == ({"segment.bytes": "1048576", "cleanup.policy": "compact,delete"}, ["retention.ms"])
    # from the default when the topic has no override; SUBTRACT of what is not there is a no-op
    assert apply_ops({}, DEFAULTS, [("cleanup.policy", AlterOp.SUBTRACT, "delete,x")]) == (
        {"cleanup.policy": ""},
        [],
    )
    assert apply_ops(
        {}, DEFAULTS, [("leader.replication.throttled.replicas", AlterOp.APPEND, "0:1")]
    ) == ({"leader.replication.throttled.replicas": "0:1"}, [])


@pytest.mark.parametrize(
    ("ops", "match"),
    [
        ([("retention.ms", AlterOp.APPEND, "1")], "append is not allowed"),
        ([("retention.ms", AlterOp.SUBTRACT, "1")], "subtract is not allowed"),
        ([("retention.ms", AlterOp.SET, None)], "without a value"),
        ([("retention.ms", AlterOp.SET, "1"), ("retention.ms", AlterOp.DELETE, None)], "twice"),
    ],
)
def test_incremental_refusals_are_invalid_request(
    ops: list[tuple[str, AlterOp, str | None]], match: str
) -> None:
    with pytest.raises(errors.InvalidRequestError, match=match):
        apply_ops({}, DEFAULTS, ops)


def test_an_unknown_operation_or_resource_type_is_invalid_request() -> None:
    module = load_payload_module(44, 1, EntityType.request)
    bad = module.AlterableConfig(name="retention.ms", config_operation=7, value="1")
    with pytest.raises(errors.InvalidRequestError, match="unknown config operation 7"):
        incremental_ops([bad])
    with pytest.raises(errors.InvalidRequestError, match="resource type 8"):
        resource_type(8)  # BROKER_LOGGER


def test_create_acls_fields_make_a_binding_or_the_reason() -> None:
    v1 = load_payload_module(30, 1, EntityType.request)
    creation = v1.AclCreation(
        resource_type=2,
        resource_name="orders",
        resource_pattern_type=3,
        principal="User:alice",
        host="*",
        operation=3,
        permission_type=3,
    )
    b = binding_of(creation)
    assert not isinstance(b, str)
    assert b.pattern == ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
    assert (b.entry.operation, b.entry.permission_type) == (
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    v3 = load_payload_module(30, 3, EntityType.request)
    prefixed = v3.AclCreation(
        resource_type=2,
        resource_name="ord",
        resource_pattern_type=4,
        principal="User:alice",
        host="*",
        operation=1,  # ANY: not a concrete operation
        permission_type=3,
    )
    reason = binding_of(prefixed)
    assert isinstance(reason, str)
    assert reason.startswith("invalid ACL:")
    assert "operation" in reason
    fixed = binding_of(dataclasses.replace(prefixed, operation=3))
    assert not isinstance(fixed, str)
    assert fixed.pattern.pattern_type is PatternType.PREFIXED


def test_describe_acls_filter_and_bad_codes_are_the_reason() -> None:
    v1 = load_payload_module(29, 1, EntityType.request).DescribeAclsRequest
    flt = filter_of(
        v1(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=2,
            principal_filter="User:alice",
            host_filter=None,
            operation=1,
            permission_type=1,
        )
    )
    assert not isinstance(flt, str)
    assert flt.pattern.pattern_type is PatternType.MATCH
    assert flt.entry.principal == "User:alice"
    bad = filter_of(
        v1(
            resource_type_filter=0,  # UNKNOWN
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )
    )
    assert isinstance(bad, str)
    assert "resource type" in bad
