"""``headwater acls``: the flags become the ACLs (add) and filters (list, remove) kafka-acls
makes of them; bad flags are usage errors (exit 2) before anything is contacted."""

from __future__ import annotations

import argparse

import pytest
from headwater.cli._common import CliError
from headwater.cli.acls import bindings_to_add, filters_for, parse_operation
from headwater.cli.main import build_parser, main
from headwater.security.acls import (
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding,
)

Op = AclOperation


def args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["acls", *argv])


def test_operation_names_are_kafkas_in_any_case() -> None:
    assert parse_operation("Read") is Op.READ
    assert parse_operation("DescribeConfigs") is Op.DESCRIBE_CONFIGS
    assert parse_operation("describe-configs") is Op.DESCRIBE_CONFIGS
    assert parse_operation("CLUSTER_ACTION") is Op.CLUSTER_ACTION
    with pytest.raises(CliError, match="unknown --operation 'Any'"):
        parse_operation("Any")


def test_add_is_the_product_of_principals_hosts_operations_and_resources() -> None:
    out = bindings_to_add(
        args(
            "add",
            "--allow-principal", "User:alice",
            "--allow-principal", "User:bob",
            "--allow-host", "10.0.0.1",
            "--operation", "Read",
            "--operation", "Write",
            "--topic", "orders",
            "--resource-pattern-type", "prefixed",
        )
    )  # fmt: skip
    assert len(out) == 4
    assert {(b.entry.principal, b.entry.operation) for b in out} == {
        ("User:alice", Op.READ),
        ("User:alice", Op.WRITE),
        ("User:bob", Op.READ),
        ("User:bob", Op.WRITE),
    }
    assert all(b.pattern.pattern_type is PatternType.PREFIXED for b in out)
    assert all(b.entry.host == "10.0.0.1" for b in out)


def test_add_defaults_to_all_from_any_host_and_denies() -> None:
    (b,) = bindings_to_add(args("add", "--deny-principal", "User:eve", "--cluster"))
    assert b == binding(
        resource_type=ResourceType.CLUSTER,
        name="kafka-cluster",
        principal="User:eve",
        operation=Op.ALL,
        permission_type=AclPermissionType.DENY,
    )


def test_producer_and_consumer_shortcuts() -> None:
    out = bindings_to_add(
        args(
            "add", "--allow-principal", "User:app", "--producer", "--consumer",
            "--topic", "orders", "--group", "billing", "--idempotent",
        )
    )  # fmt: skip
    got = {(b.pattern.resource_type, b.pattern.name, b.entry.operation) for b in out}
    assert got == {
        (ResourceType.TOPIC, "orders", Op.WRITE),
        (ResourceType.TOPIC, "orders", Op.DESCRIBE),
        (ResourceType.TOPIC, "orders", Op.CREATE),
        (ResourceType.TOPIC, "orders", Op.READ),
        (ResourceType.GROUP, "billing", Op.READ),
        (ResourceType.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE),
    }


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        (["add", "--topic", "t"], "--allow-principal or --deny-principal"),
        (["add", "--allow-principal", "User:a"], "name a resource"),
        (["add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--group"),
        (["add", "--allow-principal", "User:a", "--producer"], "need --topic"),
        (
            [
                "add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "any",
            ],
            "add takes literal or prefixed",
        ),
        (["remove", "--allow-principal", "User:a"], "remove needs a resource"),
    ],
)
def test_bad_combinations_are_usage_errors(argv: list[str], why: str) -> None:
    ns = args(*argv)
    with pytest.raises(CliError, match=why) as raised:
        if argv[0] == "add":
            bindings_to_add(ns)
        else:
            filters_for(ns, removing=True)
    assert raised.value.exit_code == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["acls", "add", "--allow-principal", "alice", "--topic", "t"],
        ["acls", "add", "--allow-principal", "User:a", "--allow-host", "nowhere", "--topic", "t"],
        ["acls", "add", "--allow-principal", "User:a", "--group", "g", "--operation", "Write"],
    ],
)
def test_invalid_acls_exit_2_without_contacting_anything(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--bootstrap", "127.0.0.1:1", "--request-timeout-ms", "100"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("headwater: error:") and len(err.strip().splitlines()) == 1


def test_list_without_resources_matches_everything() -> None:
    (f,) = filters_for(args("list"), removing=False)
    assert f.pattern.resource_type is ResourceType.ANY and f.pattern.name is None
    (f,) = filters_for(args("list", "--principal", "User:a", "--topic", "t"), removing=False)
    assert f.entry.principal == "User:a" and f.pattern.pattern_type is PatternType.LITERAL
    (f,) = filters_for(
        args("list", "--topic", "orders-eu", "--resource-pattern-type", "match"), removing=False
    )
    assert f.pattern.pattern_type is PatternType.MATCH


def test_remove_narrows_by_principal_host_and_operation() -> None:
    fs = filters_for(
        args(
            "remove", "--topic", "t", "--allow-principal", "User:a",
            "--operation", "Read", "--operation", "Write",
        ),
        removing=True,
    )  # fmt: skip
    assert {(f.entry.principal, f.entry.operation, f.entry.permission_type) for f in fs} == {
        ("User:a", Op.READ, AclPermissionType.ALLOW),
        ("User:a", Op.WRITE, AclPermissionType.ALLOW),
    }
    (f,) = filters_for(args("remove", "--group", "g"), removing=True)
    assert f.entry.principal is None and f.entry.operation is Op.ANY
