"""The console acts as its principal: the brokers' ACLs decide what it lists and changes.

ANONYMOUS may describe the cluster, create topics, and describe and read the topics named
``visible-*``; it may not delete or write them.  The console lists only what it may
describe, and every refusal is the broker's, shown as such.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.client import Admin
from headwater.console.server import RunningConsole
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import PatternType, ResourceType
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.console.web import WebClient, serve_console
from tests.e2e.security.acl_helpers import (
    INTER_BROKER,
    AclWriter,
    acl,
    eventually,
    secured_cluster,
)

pytestmark = pytest.mark.e2e

CLUSTER, TOPIC = ResourceType.CLUSTER, ResourceType.TOPIC
GRANTS = (
    acl(CLUSTER, "kafka-cluster", Op.DESCRIBE),
    acl(CLUSTER, "kafka-cluster", Op.CREATE),
    acl(TOPIC, "visible-", Op.DESCRIBE, pattern=PatternType.PREFIXED),
    acl(TOPIC, "visible-", Op.READ, pattern=PatternType.PREFIXED),
)


@pytest.fixture(scope="module")
def secured(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Cluster, AclWriter]]:
    data_dir: Path = tmp_path_factory.mktemp("console-acls")
    with secured_cluster(
        zookeeper.connect_string, data_dir, initial=(INTER_BROKER, *GRANTS)
    ) as pair:
        yield pair


@pytest.fixture(scope="module")
def console(secured: tuple[Cluster, AclWriter]) -> Iterator[RunningConsole]:
    with serve_console(secured[0].bootstrap) as running:
        yield running


def test_the_console_sees_and_changes_only_what_its_acls_allow(
    secured: tuple[Cluster, AclWriter], console: RunningConsole
) -> None:
    cluster, _ = secured
    web = WebClient(console.url)
    visible, hidden = f"visible-{uuid.uuid4().hex[:8]}", f"hidden-{uuid.uuid4().hex[:8]}"
    for name in (visible, hidden):
        page = web.post("/topics", {"name": name, "partitions": "1", "replication_factor": "1"})
        assert page.message() == f"Created topic {name}.", page.message()
    with Admin(cluster.bootstrap) as admin:
        for _ in range(200):
            if visible in admin.list_topics():
                break
            time.sleep(0.05)

    page = web.get("/topics")
    assert page.has(visible)
    assert not page.has(hidden)
    page = web.get(f"/topics/{hidden}")
    assert page.status == 403
    assert page.message().startswith("Refused by the cluster's ACLs: TOPIC_AUTHORIZATION_FAILED")

    page = web.get(f"/topics/{visible}")
    assert page.status == 200
    assert page.has("Configs not shown: TOPIC_AUTHORIZATION_FAILED")
    page = web.post(f"/topics/{visible}/delete", {"confirm": visible})
    assert page.status == 403
    assert page.message().startswith("Refused by the cluster's ACLs: TOPIC_AUTHORIZATION_FAILED")
    page = web.post(f"/topics/{visible}/messages", {"value": "v"})
    assert page.status == 403
    assert "TOPIC_AUTHORIZATION_FAILED" in page.message()
    page = web.get(f"/topics/{visible}/messages")
    assert page.status == 200  # READ is granted: an empty partition
    assert page.has("0 records from offset 0")
    with Admin(cluster.bootstrap) as admin:
        assert visible in admin.list_topics()

    page = web.get("/acls")
    assert page.status == 200
    assert page.has(
        "<tr><td>TOPIC</td><td>visible-</td><td>PREFIXED</td><td>User:ANONYMOUS</td>"
        "<td>*</td><td>READ</td><td>ALLOW</td><td><form"
    )
    assert page.has("No SCRAM users.")


NEW_ACL = {
    "resource_type": "GROUP",
    "resource_name": "console-made",
    "pattern_type": "LITERAL",
    "principal": "User:carol",
    "host": "*",
    "operation": "READ",
    "permission": "ALLOW",
}
NEW_ACL_ROW = (
    "<td>GROUP</td><td>console-made</td><td>LITERAL</td><td>User:carol</td>"
    "<td>*</td><td>READ</td><td>ALLOW</td>"
)


def test_acls_and_users_change_only_with_alter_on_the_cluster(
    secured: tuple[Cluster, AclWriter], console: RunningConsole
) -> None:
    cluster, writer = secured
    web = WebClient(console.url)
    user = {"user": "carol", "mechanism": "SCRAM-SHA-512", "password": "carols-password"}

    # Without ALTER on the cluster, the broker refuses each change and the page says so.
    for path, form in (("/acls", NEW_ACL), ("/users", user)):
        page = web.post(path, form)
        assert page.status == 403, (path, page.message())
        assert page.message().startswith(
            "Refused by the cluster's ACLs: CLUSTER_AUTHORIZATION_FAILED"
        ), page.message()
    page = web.get("/acls")
    assert not page.has(NEW_ACL_ROW)
    assert page.has("No SCRAM users.")
    assert "carols-password" not in page.text

    # A read-only console refuses before asking the cluster.
    with serve_console(cluster.bootstrap, read_only=True) as read_only:
        ro = WebClient(read_only.url)
        assert 'id="create-acl"' not in ro.get("/acls").text
        page = ro.post("/acls", NEW_ACL)
        assert page.status == 403
        assert page.message() == "The console is read-only: it changes nothing."

    alter = acl(CLUSTER, "kafka-cluster", Op.ALTER)
    writer.add(alter)
    try:
        page = eventually(
            lambda: web.post("/acls", NEW_ACL), lambda p: p.status == 200, what="create ACL"
        )
        assert page.message() == (
            "Created ACL: ALLOW User:carol from * READ on GROUP:LITERAL:console-made."
        )
        assert page.has(NEW_ACL_ROW)
        page = web.post("/users", user)
        assert page.message() == "Set the SCRAM-SHA-512 credential of user carol.", page.message()
        assert page.has("<td>carol</td><td>SCRAM-SHA-512 (4096 iterations)</td>")
        assert "carols-password" not in page.text

        page = web.post("/acls/delete", NEW_ACL)
        assert page.message().startswith("Deleted ACL: ALLOW User:carol"), page.message()
        assert not page.has(NEW_ACL_ROW)
        page = web.post("/acls/delete", NEW_ACL)
        assert page.status == 409
        assert "RESOURCE_NOT_FOUND" in page.message()
        page = web.post("/users/delete", {"user": "carol", "mechanism": "SCRAM-SHA-512"})
        assert page.message() == "Deleted the SCRAM-SHA-512 credential of user carol."
        assert page.has("No SCRAM users.")
        page = web.post("/acls", {**NEW_ACL, "host": "example.com"})
        assert page.status == 400
        assert page.message().startswith("host: host must be '*' or an IP address")
    finally:
        writer.remove(alter)
    assert not [b for b in writer.all() if b.pattern.name == "console-made"]
