"""The SCRAM credential RPCs under Kafka's authorizer: describing needs DESCRIBE on the
CLUSTER and altering needs ALTER on the CLUSTER (CLUSTER_AUTHORIZATION_FAILED otherwise,
nothing written), and both work once the ACL is granted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import ScramUpsertion
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.security.acls import AclOperation, ResourceType
from headwater.testing.cluster import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.security.acl_helpers import AclWriter, acl, eventually, secured_cluster

DESCRIBE = acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE)
ALTER = acl(ResourceType.CLUSTER, "kafka-cluster", AclOperation.ALTER)


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer) -> Iterator[tuple[Cluster, AclWriter]]:
    with secured_cluster(zookeeper.connect_string, tmp_path) as c:
        yield c


def stored_users(cluster: Cluster) -> list[str]:
    client = session.connect(cluster.zookeeper_connect)
    try:
        return ScramCredentialStore(client).list_users()
    finally:
        session.close(client)


def test_credential_rpcs_need_their_cluster_acls(cluster: tuple[Cluster, AclWriter]) -> None:
    c, writer = cluster
    upsertion = ScramUpsertion("alice", "SCRAM-SHA-512", 4096, "acl-Secret-5")
    with Admin(c.bootstrap, request_timeout_ms=10000, default_api_timeout_ms=20000) as admin:
        with pytest.raises(errors.ClusterAuthorizationFailedError, match="DESCRIBE"):
            admin.describe_user_scram_credentials()
        with pytest.raises(errors.ClusterAuthorizationFailedError, match="ALTER"):
            admin.alter_user_scram_credentials([upsertion])
        assert stored_users(c) == []

        writer.add(DESCRIBE)

        def describe() -> object:
            try:
                return admin.describe_user_scram_credentials()
            except errors.ClusterAuthorizationFailedError as exc:
                return exc

        assert eventually(describe, lambda r: r == {}, what="describe with DESCRIBE") == {}
        with pytest.raises(errors.ClusterAuthorizationFailedError):
            admin.alter_user_scram_credentials([upsertion])

        writer.add(ALTER)

        def alter() -> object:
            try:
                return admin.alter_user_scram_credentials([upsertion])
            except errors.ClusterAuthorizationFailedError as exc:
                return exc

        eventually(alter, lambda r: r == {"alice": None}, what="alter with ALTER")
    assert stored_users(c) == ["alice"]
