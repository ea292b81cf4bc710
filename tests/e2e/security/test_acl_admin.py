"""The ACL RPCs end to end: Admin.create_acls / describe_acls / delete_acls and
``headwater acls`` against real brokers; bad ACLs refused with nothing written; the
RPCs need ALTER / DESCRIBE on the cluster; an ACL created on one broker applies on
another; SECURITY_DISABLED without an authorizer; and ``zookeeper.set.acl`` brokers
whose znodes an unauthenticated ZooKeeper client cannot write."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater import errors
from headwater.cli.main import main
from headwater.client.admin.client import Admin
from headwater.client.admin.values import NewTopic
from headwater.coordination import session
from headwater.errors import ErrorCode
from headwater.security.acls import (
    AccessControlEntryFilter,
    AclBindingFilter,
    AclPermissionType,
    PatternType,
    ResourcePatternFilter,
    ResourceType,
)
from headwater.security.acls import AclOperation as Op
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import acls_pb2
from kazoo.exceptions import NoAuthError

from tests.e2e.security.acl_helpers import (
    INTER_BROKER,
    AclWriter,
    acl,
    acls,
    eventually,
    metadata,
    name,
    secured_cluster,
)

TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
MANAGE = (acl(CLUSTER, "kafka-cluster", Op.ALTER), acl(CLUSTER, "kafka-cluster", Op.DESCRIBE))


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, AclWriter]]:
    data_dir: Path = tmp_path_factory.mktemp("acl-admin")
    with secured_cluster(
        zookeeper.connect_string, data_dir, brokers=2, initial=(INTER_BROKER, *MANAGE)
    ) as pair:
        yield pair


EVERYTHING = acls_pb2.AclBindingFilter(
    resource_type=1, pattern_type=1, operation=1, permission_type=1
)
"""A filter every binding matches (ANY in each field)."""


def describe_acls_error(address: str) -> ErrorCode:
    """DescribeAcls of everything on ``address``: harmless, so tests wait with it for ACL
    changes to reach a broker."""
    request = acls_pb2.DescribeAclsRequest(filter=EVERYTHING)
    return ErrorCode(acls(address).DescribeAcls(request).error)


def test_admin_creates_describes_and_deletes(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    topic = name("orders-")
    literal = acl(TOPIC, topic, Op.READ, principal="User:alice")
    prefixed = acl(TOPIC, "orders-", Op.WRITE, principal="User:bob", pattern=PatternType.PREFIXED)
    denied = acl(TOPIC, "*", Op.DELETE, principal="User:*", host="10.0.0.9")
    with Admin(cluster.bootstrap) as admin:
        assert admin.create_acls([literal, prefixed, denied]) == [None, None, None]
        assert set(admin.describe_acls(AclBindingFilter.any())) >= {literal, prefixed, denied}
        # MATCH: every ACL that applies to the topic.
        match = AclBindingFilter(ResourcePatternFilter(TOPIC, topic, PatternType.MATCH))
        assert set(admin.describe_acls(match)) == {literal, prefixed, denied}
        by_principal = AclBindingFilter(entry=AccessControlEntryFilter(principal="User:bob"))
        assert admin.describe_acls(by_principal) == [prefixed]
        deleted = admin.delete_acls(
            [by_principal, AclBindingFilter(ResourcePatternFilter(TOPIC, "*"))]
        )
        assert deleted == [[prefixed], [denied]]
        assert set(admin.describe_acls(match)) == {literal}
    assert literal in writer.all() and prefixed not in writer.all()


def test_bad_acls_are_refused_and_nothing_is_written(secured: tuple[Cluster, AclWriter]) -> None:
    cluster, writer = secured
    before = writer.all()
    good = acls_pb2.AclBinding(
        resource_type=TOPIC, resource_name="fine", pattern_type=3, principal="User:a",
        host="*", operation=Op.READ, permission_type=3,
    )  # fmt: skip
    bad = [
        acls_pb2.AclBinding(resource_type=3, resource_name="g", pattern_type=3,
                            principal="User:a", host="*", operation=Op.WRITE, permission_type=3),
        acls_pb2.AclBinding(resource_type=4, resource_name="other", pattern_type=3,
                            principal="User:a", host="*", operation=Op.ALTER, permission_type=3),
        acls_pb2.AclBinding(resource_type=2, resource_name="t", pattern_type=1,
                            principal="User:a", host="*", operation=Op.READ, permission_type=3),
        acls_pb2.AclBinding(resource_type=2, resource_name="t", pattern_type=3,
                            principal="nobody", host="*", operation=Op.READ, permission_type=3),
        acls_pb2.AclBinding(resource_type=2, resource_name="t", pattern_type=3,
                            principal="User:a", host="a host", operation=Op.READ,
                            permission_type=3),
        acls_pb2.AclBinding(resource_type=2, resource_name="t", pattern_type=3,
                            principal="User:a", host="*", operation=99, permission_type=3),
        acls_pb2.AclBinding(resource_type=2, resource_name="t", pattern_type=3,
                            principal="User:a", host="*", operation=Op.READ, permission_type=1),
    ]  # fmt: skip
    stub = acls(cluster.brokers[0].address)
    response = stub.CreateAcls(acls_pb2.CreateAclsRequest(creations=bad), timeout=30)
    assert [r.error for r in response.results] == [ErrorCode.INVALID_REQUEST] * len(bad)
    assert all(r.error_message.startswith("invalid ACL: ") for r in response.results)
    assert writer.all() == before
    # In one request with a good one: only the good one is written.
    response = stub.CreateAcls(acls_pb2.CreateAclsRequest(creations=[bad[0], good]), timeout=30)
    assert [r.error for r in response.results] == [ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert len(writer.all()) == len(before) + 1
    bad_filter = acls_pb2.AclBindingFilter(resource_type=0)
    described = stub.DescribeAcls(acls_pb2.DescribeAclsRequest(filter=bad_filter), timeout=30)
    assert described.error == ErrorCode.INVALID_REQUEST
    deleted = stub.DeleteAcls(acls_pb2.DeleteAclsRequest(filters=[bad_filter]), timeout=30)
    assert deleted.filter_results[0].error == ErrorCode.INVALID_REQUEST
    assert len(writer.all()) == len(before) + 1


def test_an_acl_created_on_one_broker_applies_on_the_other(
    secured: tuple[Cluster, AclWriter],
) -> None:
    cluster, _ = secured
    topic = name("seen-")
    writer_addr, other = cluster.brokers[0].address, cluster.brokers[1].address
    with Admin(writer_addr) as admin:
        admin.create_acls([acl(TOPIC, topic, Op.CREATE), acl(TOPIC, topic, Op.DESCRIBE)])
        eventually(
            lambda: admin.create_topics([NewTopic(topic, 1, 1)], raise_on_error=False)[topic],
            lambda e: e is None or isinstance(e, errors.TopicAlreadyExistsError),
            what="CreateTopics allowed",
        )
    cluster.wait_for(lambda: cluster.leader_for(topic, 0) is not None, what="a leader")
    eventually(
        lambda: [t.name for t in metadata(other).topics],
        lambda names: topic in names,
        what="the topic visible on the other broker",
    )


def test_acl_rpcs_need_alter_and_describe_on_the_cluster(
    secured: tuple[Cluster, AclWriter],
) -> None:
    """Takes the management ACLs away (the CLI test after it puts them back)."""
    cluster, writer = secured
    before = writer.all()
    writer.remove(*MANAGE)
    stub = acls(cluster.brokers[1].address)
    creation = acls_pb2.AclBinding(
        resource_type=2, resource_name="x", pattern_type=3, principal="User:a", host="*",
        operation=Op.READ, permission_type=3,
    )  # fmt: skip
    # Wait with the harmless DescribeAcls: DESCRIBE was removed after ALTER, and a broker
    # applies notifications in order, so ALTER is gone too once it is refused.
    eventually(
        lambda: describe_acls_error(cluster.brokers[1].address),
        lambda e: e == ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        what="DescribeAcls refused",
    )
    created = stub.CreateAcls(acls_pb2.CreateAclsRequest(creations=[creation]))
    assert created.results[0].error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    deleted = stub.DeleteAcls(acls_pb2.DeleteAclsRequest(filters=[EVERYTHING]))
    assert deleted.filter_results[0].error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert writer.all() == [b for b in before if b not in MANAGE]
    with (
        Admin(cluster.brokers[1].address) as admin,
        pytest.raises(errors.ClusterAuthorizationFailedError),
    ):
        admin.create_acls([acl(TOPIC, "x", Op.READ)])


def test_cli_add_list_remove(
    secured: tuple[Cluster, AclWriter], capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, writer = secured
    writer.add(*MANAGE)
    # Every CLI call below needs ALTER or DESCRIBE on the broker it reaches, and the two
    # are separate writes, each followed by its own notification: a broker that had
    # seen ALTER (the add succeeded) could still refuse the list that follows.  DESCRIBE
    # was added after ALTER and a broker re-reads the resource when notified, so once a
    # broker allows DescribeAcls it has both.
    for b in cluster.brokers.values():
        eventually(
            lambda a=b.address: describe_acls_error(a),  # type: ignore[misc]
            lambda e: e == ErrorCode.NONE,
            what=f"DescribeAcls allowed on {b.address}",
        )
    topic = name("cli-")
    eventually(
        lambda: main(
            ["acls", "add", "--bootstrap", cluster.bootstrap, "--allow-principal", "User:carol",
             "--operation", "Read", "--operation", "Describe", "--topic", topic]
        ),
        lambda code: code == 0,
        what="acls add through a broker",
    )  # fmt: skip
    capsys.readouterr()
    assert main(["acls", "list", "--bootstrap", cluster.bootstrap, "--topic", topic,
                 "--output", "json"]) == 0  # fmt: skip
    listed = json.loads(capsys.readouterr().out)
    assert sorted(a["operation"] for a in listed) == ["DESCRIBE", "READ"]
    assert {a["principal"] for a in listed} == {"User:carol"}
    assert main(["acls", "remove", "--bootstrap", cluster.bootstrap, "--topic", topic,
                 "--operation", "Read"]) == 0  # fmt: skip
    assert "operation=READ" in capsys.readouterr().out
    assert main(["acls", "list", "--bootstrap", cluster.bootstrap, "--topic", topic]) == 0
    text = capsys.readouterr().out
    assert "operation=DESCRIBE" in text and "operation=READ" not in text
    # Straight in ZooKeeper, as before a cluster's first start.
    zk = f"{cluster.zookeeper_connect}"
    assert main(["acls", "add", "--zookeeper", zk, "--deny-principal", "User:mallory",
                 "--topic", topic, "--resource-pattern-type", "prefixed"]) == 0  # fmt: skip
    assert acl(TOPIC, topic, Op.ALL, principal="User:mallory", pattern=PatternType.PREFIXED,
               perm=AclPermissionType.DENY) in writer.all()  # fmt: skip


def test_security_disabled_and_zookeeper_acls(
    zookeeper: ZooKeeperServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    overrides = {
        "zookeeper.set.acl": "true",
        "zookeeper.digest.username": "headwater",
        "zookeeper.digest.password": "zk-s3cret",
    }
    with Cluster(
        brokers=1, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as cluster:
        with Admin(cluster.bootstrap) as admin:
            with pytest.raises(errors.SecurityDisabledError):
                admin.create_acls([acl(TOPIC, "t", Op.READ)])
            with pytest.raises(errors.SecurityDisabledError):
                admin.describe_acls(AclBindingFilter.any())
            admin.create_topics([NewTopic("zk-acl-topic", 1, 1)])
        stranger = session.connect(cluster.zookeeper_connect)
        try:
            assert stranger.exists("/brokers/topics/zk-acl-topic") is not None  # world-readable
            with pytest.raises(NoAuthError):
                stranger.set("/brokers/topics/zk-acl-topic", b"{}")
            with pytest.raises(NoAuthError):
                stranger.delete("/controller")
            with pytest.raises(NoAuthError):
                stranger.create("/admin/delete_topics/zk-acl-topic", b"")
        finally:
            session.close(stranger)
        # headwater acls --zookeeper needs the brokers' identity on such a cluster.
        add = ["acls", "add", "--zookeeper", cluster.zookeeper_connect,
               "--allow-principal", "User:a", "--topic", "zk-acl-topic"]  # fmt: skip
        assert main(add) == 1
        assert "--zookeeper-digest-username" in capsys.readouterr().err
        monkeypatch.setenv("HEADWATER_ZOOKEEPER_DIGEST_PASSWORD", "zk-s3cret")
        assert main([*add, "--zookeeper-digest-username", "headwater"]) == 0
        capsys.readouterr()
        listing = ["acls", "list", "--zookeeper", cluster.zookeeper_connect,
                   "--zookeeper-digest-username", "headwater", "--output", "json"]  # fmt: skip
        assert main(listing) == 0
        assert [a["principal"] for a in json.loads(capsys.readouterr().out)] == ["User:a"]
        log = cluster.brokers[0].log_tail(400)
        assert "zk-s3cret" not in log
