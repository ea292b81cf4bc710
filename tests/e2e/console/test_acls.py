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
from tests.e2e.security.acl_helpers import INTER_BROKER, AclWriter, acl, secured_cluster

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
        "<td>*</td><td>READ</td><td>ALLOW</td></tr>"
    )
    assert page.has("No SCRAM users.")
