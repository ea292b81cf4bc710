"""Kafka's AclAuthorizer decisions: DENY wins, wildcards, PREFIXED, implied operations,
super.users, allow.everyone.if.no.acl.found, authorizeByResourceType and the cache."""

from __future__ import annotations

import pytest
from headwater.security.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding,
)
from headwater.security.authorizer import (
    AclAuthorizer,
    AclSnapshot,
    AuthorizerSettings,
    decide,
    decide_by_resource_type,
    parse_super_users,
)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
DEFAULTS = AuthorizerSettings()


def acl(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    *,
    principal: str = ALICE,
    host: str = "*",
    rtype: ResourceType = TOPIC,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return binding(
        resource_type=rtype,
        name=name,
        principal=principal,
        operation=op,
        permission_type=perm,
        host=host,
        pattern_type=pattern,
    )


def allowed(
    acls: list[AclBinding],
    op: AclOperation,
    name: str = "orders",
    *,
    principal: str = ALICE,
    host: str = HOST,
    rtype: ResourceType = TOPIC,
    settings: AuthorizerSettings = DEFAULTS,
) -> bool:
    return decide(
        AclSnapshot.of(acls),
        settings,
        principal=principal,
        host=host,
        operation=op,
        resource_type=rtype,
        name=name,
    )


def test_no_acl_denies_by_default_and_allows_when_configured() -> None:
    assert not allowed([], Op.READ)
    assert allowed([], Op.READ, settings=AuthorizerSettings(allow_everyone_if_no_acl_found=True))


def test_allow_everyone_only_applies_to_resources_without_any_acl() -> None:
    settings = AuthorizerSettings(allow_everyone_if_no_acl_found=True)
    acls = [acl("orders", Op.READ, principal=BOB)]
    assert not allowed(acls, Op.READ, settings=settings)
    assert allowed(acls, Op.READ, "other", settings=settings)


def test_literal_allow_for_the_principal() -> None:
    acls = [acl("orders", Op.READ)]
    assert allowed(acls, Op.READ)
    assert not allowed(acls, Op.WRITE)
    assert not allowed(acls, Op.READ, principal=BOB)
    assert not allowed(acls, Op.READ, "orders2")
    assert not allowed(acls, Op.READ, rtype=GROUP)


def test_deny_beats_allow() -> None:
    acls = [acl("orders", Op.READ), acl("orders", Op.READ, DENY)]
    assert not allowed(acls, Op.READ)


def test_deny_all_beats_allow_of_any_operation() -> None:
    acls = [acl("orders", Op.READ), acl("orders", Op.WRITE), acl("orders", Op.ALL, DENY)]
    assert not allowed(acls, Op.READ)
    assert not allowed(acls, Op.WRITE)


def test_deny_of_another_operation_does_not_deny() -> None:
    acls = [acl("orders", Op.READ), acl("orders", Op.WRITE, DENY)]
    assert allowed(acls, Op.READ)
    assert not allowed(acls, Op.WRITE)


def test_wildcard_resource_deny_beats_literal_allow() -> None:
    acls = [acl("orders", Op.READ), acl("*", Op.READ, DENY)]
    assert not allowed(acls, Op.READ)


def test_prefixed_deny_beats_literal_allow() -> None:
    acls = [acl("orders", Op.READ), acl("ord", Op.READ, DENY, pattern=PatternType.PREFIXED)]
    assert not allowed(acls, Op.READ)
    assert not allowed(acls, Op.READ, "ordinary")


def test_wildcard_principal_and_host() -> None:
    acls = [acl("orders", Op.READ, principal="User:*")]
    assert allowed(acls, Op.READ, principal=BOB)
    deny = [acl("orders", Op.READ), acl("orders", Op.READ, DENY, principal="User:*")]
    assert not allowed(deny, Op.READ)


def test_host_based_deny_and_allow() -> None:
    acls = [acl("orders", Op.READ), acl("orders", Op.READ, DENY, host=HOST)]
    assert not allowed(acls, Op.READ, host=HOST)
    assert allowed(acls, Op.READ, host="10.0.0.2")
    only_there = [acl("orders", Op.READ, host="10.0.0.2")]
    assert not allowed(only_there, Op.READ, host=HOST)
    assert allowed(only_there, Op.READ, host="10.0.0.2")


def test_prefixed_allow_matches_names_starting_with_it() -> None:
    acls = [acl("orders-", Op.WRITE, pattern=PatternType.PREFIXED)]
    assert allowed(acls, Op.WRITE, "orders-eu")
    assert allowed(acls, Op.WRITE, "orders-")
    assert not allowed(acls, Op.WRITE, "orders")
    assert not allowed(acls, Op.WRITE, "payments-eu")


def test_wildcard_literal_allow_matches_every_name() -> None:
    acls = [acl("*", Op.READ)]
    assert allowed(acls, Op.READ, "anything")
    assert allowed(acls, Op.READ, "*")


def test_literal_star_named_resource_is_only_the_wildcard() -> None:
    # A LITERAL ACL on "orders" does not apply to a resource literally named "*".
    assert not allowed([acl("orders", Op.READ)], Op.READ, "*")


def test_allow_all_allows_every_operation() -> None:
    acls = [acl("orders", Op.ALL)]
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER_CONFIGS):
        assert allowed(acls, op)


@pytest.mark.parametrize("implier", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_describe_is_implied(implier: AclOperation) -> None:
    assert allowed([acl("orders", implier)], Op.DESCRIBE)


def test_describe_is_not_implied_by_create_or_configs() -> None:
    assert not allowed([acl("orders", Op.CREATE)], Op.DESCRIBE)
    assert not allowed([acl("orders", Op.DESCRIBE_CONFIGS)], Op.DESCRIBE)


def test_describe_configs_is_implied_by_alter_configs() -> None:
    assert allowed([acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS)
    assert not allowed([acl("orders", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS)


def test_implication_does_not_widen_a_deny() -> None:
    acls = [acl("orders", Op.DESCRIBE), acl("orders", Op.READ, DENY)]
    assert allowed(acls, Op.DESCRIBE)
    acls = [acl("orders", Op.READ), acl("orders", Op.DESCRIBE, DENY)]
    assert not allowed(acls, Op.DESCRIBE)
    assert allowed(acls, Op.READ)


def test_the_implied_operation_does_not_imply_back() -> None:
    assert not allowed([acl("orders", Op.DESCRIBE)], Op.READ)


def test_super_users_are_always_allowed() -> None:
    settings = AuthorizerSettings(super_users=parse_super_users("User:admin; User:ops"))
    deny_all = [acl("*", Op.ALL, DENY, principal="User:*")]
    assert allowed(deny_all, Op.DELETE, principal="User:admin", settings=settings)
    assert allowed(
        [], Op.ALTER, "kafka-cluster", principal="User:ops", rtype=CLUSTER, settings=settings
    )
    assert not allowed(deny_all, Op.READ, principal=ALICE, settings=settings)


def test_super_users_parsing() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" User:a ;;User:b;") == {"User:a", "User:b"}
    with pytest.raises(ValueError, match="<type>:<name>"):
        parse_super_users("User:a;bob")


def test_cluster_resource() -> None:
    acls = [acl("kafka-cluster", Op.CLUSTER_ACTION, rtype=CLUSTER)]
    assert allowed(acls, Op.CLUSTER_ACTION, "kafka-cluster", rtype=CLUSTER)
    assert not allowed(acls, Op.ALTER, "kafka-cluster", rtype=CLUSTER)


def test_group_acls_do_not_apply_to_topics_of_the_same_name() -> None:
    acls = [acl("orders", Op.READ, rtype=GROUP)]
    assert allowed(acls, Op.READ, rtype=GROUP)
    assert not allowed(acls, Op.READ, rtype=TOPIC)


# -- by resource type (idempotent producers without IDEMPOTENT_WRITE) -------------------------


def by_type(acls: list[AclBinding], settings: AuthorizerSettings = DEFAULTS) -> bool:
    return decide_by_resource_type(
        AclSnapshot.of(acls),
        settings,
        principal=ALICE,
        host=HOST,
        operation=Op.WRITE,
        resource_type=TOPIC,
    )


def test_by_resource_type() -> None:
    assert not by_type([])
    assert by_type([], AuthorizerSettings(allow_everyone_if_no_acl_found=True))
    assert by_type([acl("orders", Op.WRITE)])
    assert by_type([acl("ord", Op.WRITE, pattern=PatternType.PREFIXED)])
    assert not by_type([acl("orders", Op.READ)])
    assert not by_type([acl("orders", Op.WRITE, principal=BOB)])
    assert not by_type([acl("orders", Op.WRITE), acl("orders", Op.WRITE, DENY)])
    assert not by_type(
        [acl("orders", Op.WRITE), acl("o", Op.WRITE, DENY, pattern=PatternType.PREFIXED)]
    )
    assert not by_type([acl("orders", Op.WRITE), acl("*", Op.WRITE, DENY)])
    assert by_type(
        [acl("orders", Op.WRITE), acl("payments", Op.WRITE), acl("orders", Op.WRITE, DENY)]
    )
    assert by_type([acl("orders", Op.WRITE)], AuthorizerSettings(super_users=frozenset({ALICE})))


# -- the authorizer object: cache and updates ------------------------------------------------


def test_authorizer_cache_is_dropped_on_update() -> None:
    authorizer = AclAuthorizer(AuthorizerSettings(), AclSnapshot.of([acl("orders", Op.READ)]))

    def ask() -> bool:
        return authorizer.authorize(
            principal=ALICE, host=HOST, operation=Op.READ, resource_type=TOPIC, name="orders"
        )

    assert ask() and ask()
    authorizer.update(AclSnapshot.of([acl("orders", Op.READ), acl("orders", Op.READ, DENY)]))
    assert not ask()
    authorizer.update(AclSnapshot.empty())
    assert not ask()
    assert len(authorizer.snapshot) == 0


def test_snapshot_bindings_round_trip() -> None:
    acls = [
        acl("orders", Op.READ),
        acl("orders", Op.READ, DENY),
        acl("o", Op.WRITE, pattern=PatternType.PREFIXED),
    ]
    snap = AclSnapshot.of(acls + acls)
    assert len(snap) == 3
    assert snap.bindings() == sorted(acls)
