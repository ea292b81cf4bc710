"""The authorizer's and ZooKeeper ACLs' broker configs: validated with the key named; the
request helper costs nothing with authorization off; sensitive configs are recognised;
znode ACLs per path (Kafka's creator-all + world-read, sensitive paths creator-only)."""

from __future__ import annotations

import pytest
from headwater.coordination.settings import CoordinationSettings
from headwater.coordination.zk_security import ZkAuth, acl_for_path, is_sensitive
from headwater.security.acls import AclOperation
from headwater.server.auth.acl_runtime import BrokerAuthorization
from headwater.server.auth.authorization import ALLOW_ALL
from headwater.server.config import ConfigError, config_from_properties, is_secret

BASE = {"broker.id": "0"}


def test_authorization_is_off_by_default() -> None:
    c = config_from_properties(BASE)
    assert not c.authorizer_enabled
    assert not BrokerAuthorization(c).authz.enabled


@pytest.mark.parametrize(
    "name", ["kafka.security.authorizer.AclAuthorizer", "headwater.AclAuthorizer"]
)
def test_kafkas_authorizer_names_turn_it_on(name: str) -> None:
    c = config_from_properties({**BASE, "authorizer.class.name": name})
    authorization = BrokerAuthorization(c)
    assert authorization.authz.enabled and authorization.authorizer is not None


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"authorizer.class.name": "com.example.Custom"}, "authorizer.class.name"),
        ({"super.users": "User:a;bob"}, "super.users"),
        ({"zookeeper.digest.username": "hw"}, "zookeeper.digest.username"),
        ({"zookeeper.digest.password": "pw"}, "zookeeper.digest.username"),
        ({"zookeeper.set.acl": "true"}, "zookeeper.set.acl"),
        ({"allow.everyone.if.no.acl.found": "maybe"}, "allow.everyone.if.no.acl.found"),
    ],
)
def test_bad_security_configs_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        config_from_properties({**BASE, **props})


def test_super_users_and_allow_everyone_reach_the_authorizer() -> None:
    c = config_from_properties(
        {
            **BASE,
            "authorizer.class.name": "headwater.AclAuthorizer",
            "super.users": "User:admin; User:ops",
            "allow.everyone.if.no.acl.found": "true",
        }
    )
    authorizer = BrokerAuthorization(c).authorizer
    assert authorizer is not None
    assert authorizer.settings.super_users == {"User:admin", "User:ops"}
    assert authorizer.settings.allow_everyone_if_no_acl_found


def test_digest_settings_reach_zookeeper_without_showing_the_password() -> None:
    c = config_from_properties(
        {
            **BASE,
            "zookeeper.set.acl": "true",
            "zookeeper.digest.username": "hw",
            "zookeeper.digest.password": "pw-s3cret",
        }
    )
    settings = CoordinationSettings.from_properties(c.to_properties())
    assert settings.zk_auth == ZkAuth("hw", "pw-s3cret", set_acl=True)
    assert "pw-s3cret" not in repr(settings) and "pw-s3cret" not in repr(settings.zk_auth)
    assert CoordinationSettings().zk_auth is None


def test_sensitive_configs() -> None:
    for key in ("zookeeper.digest.password", "ssl.keystore.key", "ssl.truststore.password"):
        assert is_secret(key)
    for key in ("zookeeper.digest.username", "super.users", "ssl.keystore.location"):
        assert not is_secret(key)


def test_znode_acls_by_path() -> None:
    for path in ("/kafka-acl/Topic/t", "/kafka-acl-extended/prefixed/Group/g", "/config/users/a"):
        assert is_sensitive(path)
        assert {a.id.scheme for a in acl_for_path(path)} == {"auth"}
    for path in ("/brokers/topics/t", "/controller", "/config/topics/t", "/kafka-aclx"):
        assert not is_sensitive(path)
        assert {(a.id.scheme, a.perms) for a in acl_for_path(path)} == {("auth", 31), ("world", 1)}


class _NoPeer:
    def peer(self) -> str:
        raise AssertionError("authorization off must not even read the request's identity")


def test_authorization_off_reads_nothing() -> None:
    ctx = _NoPeer()
    assert ALLOW_ALL.topic(ctx, AclOperation.WRITE, "t")  # type: ignore[arg-type]
    assert ALLOW_ALL.topics(ctx, AclOperation.READ, ["a", "b"]) is None  # type: ignore[arg-type]
    assert ALLOW_ALL.by_resource_type(ctx, AclOperation.WRITE, 2) is True  # type: ignore[arg-type]
    assert ALLOW_ALL.check_cluster(ctx, AclOperation.ALTER) is None  # type: ignore[arg-type]
