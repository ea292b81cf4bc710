"""``headwater users ... --zookeeper`` on a cluster whose brokers set ZooKeeper ACLs.

A real broker runs with ``zookeeper.set.acl=true`` and a digest identity, so its znodes
(``/config/users`` included: readable by that identity alone) refuse anyone else.  The
CLI, run as a process exactly as a user runs it:

* without an identity, or with a wrong password, is refused in one line naming the fix,
  exits 1 and writes nothing;
* with the brokers' identity (``--zookeeper-digest-username`` and the password from
  ``$HEADWATER_ZOOKEEPER_DIGEST_PASSWORD``, or both from ``--command-config``) sets,
  describes and deletes credentials; the broker's own cache follows (Admin's describe
  through the broker shows the user), and a credential the CLI created carries the
  sensitive znodes' ACL (the identity alone);
* a user name without a password is a usage error (exit 2); no password appears in any
  output or in the broker's log.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.client.admin.client import Admin
from headwater.coordination import session
from headwater.coordination.scram_credentials import ScramCredentialStore, user_path
from headwater.coordination.zk_security import ZkAuth
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.testing.cluster import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from kazoo.client import KazooClient
from kazoo.security import Permissions, make_digest_acl_credential

pytestmark = pytest.mark.e2e

ZK_USER = "headwater"
ZK_PASSWORD = "zk-digest-Pa55"
USER_PASSWORD = "alice-scram-Pa55"
ENV = "HEADWATER_ZOOKEEPER_DIGEST_PASSWORD"
SHA512 = ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    overrides = {
        "zookeeper.set.acl": "true",
        "zookeeper.digest.username": ZK_USER,
        "zookeeper.digest.password": ZK_PASSWORD,
    }
    data_dir = tmp_path_factory.mktemp("zk-acl-users")
    with Cluster(
        brokers=1, data_dir=data_dir, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as c:
        yield c


@pytest.fixture
def owner(cluster: Cluster) -> Iterator[KazooClient]:
    """A client with the brokers' identity, to look at what the CLI did."""
    client = session.connect(
        cluster.zookeeper_connect, auth=ZkAuth(ZK_USER, ZK_PASSWORD, set_acl=True)
    )
    yield client
    session.close(client)


def users(*args: str, env: dict[str, str] | None = None, stdin: str = "") -> (
    subprocess.CompletedProcess[str]
):  # fmt: skip
    base = {k: v for k, v in os.environ.items() if k != ENV}
    return subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", "users", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
        check=False,
    )


def one_line_refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "ZooKeeper refused access" in lines[0]
    assert "--zookeeper-digest-username" in lines[0] and ENV in lines[0]
    return lines[0]


def credential() -> ScramCredential:
    return ScramCredential.from_password(SHA512, "bob-pw", salt=b"salt", iterations=4096)


def wait_described(cluster: Cluster, user: str, present: bool) -> None:
    """The broker's credential cache follows ZooKeeper's notifications: bounded wait."""
    deadline = time.monotonic() + 30
    seen: object = None
    with Admin(cluster.bootstrap) as admin:
        for _ in range(300):
            seen = admin.describe_user_scram_credentials(None)
            if (user in seen) == present:
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
    raise AssertionError(f"broker's view of {user!r} (present={present}): {seen}")


def test_refused_without_the_brokers_identity(cluster: Cluster, owner: KazooClient) -> None:
    zk = cluster.zookeeper_connect
    assert owner.exists("/config/users") is not None  # the broker made it, with its ACL

    refused = users("scram-set", "mallory", "--zookeeper", zk, stdin=USER_PASSWORD + "\n")
    assert "without an identity" in one_line_refusal(refused)
    assert owner.exists(user_path("mallory")) is None

    one_line_refusal(users("describe", "--zookeeper", zk))
    # (ZooKeeper answers `exists` to anyone, so deleting a missing user says RESOURCE_NOT_FOUND;
    # an existing one is refused.)
    ScramCredentialStore(owner).alter("bob", upsertions={SHA512: credential()})
    try:
        one_line_refusal(users("describe", "bob", "--zookeeper", zk))
        one_line_refusal(users("scram-delete", "bob", "--zookeeper", zk))
        assert SHA512 in ScramCredentialStore(owner).read("bob")
    finally:
        ScramCredentialStore(owner).alter("bob", deletions=[SHA512])

    wrong = users(
        "scram-set", "mallory", "--zookeeper", zk, "--zookeeper-digest-username", ZK_USER,
        env={ENV: "guess"}, stdin=USER_PASSWORD + "\n",
    )  # fmt: skip
    assert f"as {ZK_USER!r}" in one_line_refusal(wrong)
    assert owner.exists(user_path("mallory")) is None
    assert "guess" not in wrong.stderr

    no_password = users("describe", "--zookeeper", zk, "--zookeeper-digest-username", ZK_USER)
    assert no_password.returncode == 2, no_password.stderr
    assert ENV in no_password.stderr and len(no_password.stderr.strip().splitlines()) == 1


def test_works_with_the_brokers_identity(
    cluster: Cluster, owner: KazooClient, tmp_path: Path
) -> None:
    zk = cluster.zookeeper_connect
    identity = ["--zookeeper", zk, "--zookeeper-digest-username", ZK_USER]
    done = users(
        "scram-set", "alice", *identity, "--iterations", "8192",
        env={ENV: ZK_PASSWORD}, stdin=USER_PASSWORD + "\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ScramCredentialStore(owner).read("alice")[SHA512].iterations == 8192
    # A sensitive znode: the identity alone, not even world READ.
    acls, _ = owner.get_acls(user_path("alice"))
    digest = make_digest_acl_credential(ZK_USER, ZK_PASSWORD)
    assert [(a.id.scheme, a.id.id, a.perms) for a in acls] == [("digest", digest, Permissions.ALL)]
    wait_described(cluster, "alice", present=True)

    # Everything from a Kafka-style properties file (no variable set).
    config = tmp_path / "zk.properties"
    config.write_text(
        f"zookeeper.digest.username={ZK_USER}\nzookeeper.digest.password={ZK_PASSWORD}\n"
    )
    described = users("describe", "--zookeeper", zk, "--command-config", str(config))
    assert described.returncode == 0, described.stderr
    assert described.stdout.split() == ["alice", "SCRAM-SHA-512", "iterations=8192"]

    gone = users("scram-delete", "alice", "--zookeeper", zk, "--command-config", str(config))
    assert gone.returncode == 0, gone.stderr
    assert ScramCredentialStore(owner).read("alice") == {}
    wait_described(cluster, "alice", present=False)

    for output in (done, described, gone):
        assert ZK_PASSWORD not in output.stdout + output.stderr
        assert USER_PASSWORD not in output.stdout + output.stderr
    log = cluster.brokers[0].log_path.read_text(errors="replace")
    assert ZK_PASSWORD not in log and USER_PASSWORD not in log
