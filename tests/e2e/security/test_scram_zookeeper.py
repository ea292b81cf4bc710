"""SCRAM credentials in a real ZooKeeper: Kafka's /config/users layout and JSON, the
/config/changes notification another broker's cache follows (set, change, delete),
refusals that write nothing, other user configs kept, and the CLI's --zookeeper path
writing no password anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from headwater import errors
from headwater.coordination import model, session
from headwater.coordination.config_changes import CONFIG_CHANGES
from headwater.coordination.scram_credentials import (
    ScramCredentialCache,
    ScramCredentialStore,
    user_path,
)
from headwater.security.scram import ScramCredential, ScramMechanism
from kazoo.client import KazooClient

SHA512 = ScramMechanism.SCRAM_SHA_512
SHA256 = ScramMechanism.SCRAM_SHA_256


@pytest.fixture
def client(zk_connect: str) -> Iterator[KazooClient]:
    c = session.connect(zk_connect)
    yield c
    session.close(c)


@pytest.fixture
def other_client(zk_connect: str) -> Iterator[KazooClient]:
    c = session.connect(zk_connect)
    yield c
    session.close(c)


def wait_until(predicate: Any, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def credential(password: str, iterations: int = 4096) -> ScramCredential:
    return ScramCredential.from_password(SHA512, password, salt=b"salt", iterations=iterations)


def test_kafkas_layout_and_notification(client: KazooClient) -> None:
    store = ScramCredentialStore(client)
    store.alter("alice", upsertions={SHA512: credential("pw")})
    data, _ = client.get("/config/users/alice")
    doc = json.loads(data)
    assert doc["version"] == 1
    text = doc["config"]["SCRAM-SHA-512"]
    assert text.startswith("salt=c2FsdA==,stored_key=") and text.endswith(",iterations=4096")
    assert ScramCredential.from_config(text) == credential("pw")
    changes = client.get_children(CONFIG_CHANGES)
    assert len(changes) == 1 and changes[0].startswith("config_change_")
    note, _ = client.get(f"{CONFIG_CHANGES}/{changes[0]}")
    assert json.loads(note) == {"version": 2, "entity_path": "users/alice"}


def test_user_names_are_sanitized_like_kafka(client: KazooClient) -> None:
    store = ScramCredentialStore(client)
    store.alter("CN=a/b*", upsertions={SHA512: credential("pw")})
    assert user_path("CN=a/b*") == "/config/users/CN%3Da%2Fb%2A"
    assert client.exists("/config/users/CN%3Da%2Fb%2A") is not None
    assert store.list_users() == ["CN=a/b*"]
    assert store.read("CN=a/b*") == {SHA512: credential("pw")}


def test_other_user_configs_are_kept(client: KazooClient) -> None:
    client.create(
        user_path("bob"), model.encode_config({"producer_byte_rate": "1024"}), makepath=True
    )
    store = ScramCredentialStore(client)
    store.alter("bob", upsertions={SHA256: credential("x")})
    store.alter("bob", deletions=[SHA256])
    data, _ = client.get(user_path("bob"))
    assert model.decode_config(data) == {"producer_byte_rate": "1024"}


def test_deleting_a_missing_credential_writes_nothing(client: KazooClient) -> None:
    store = ScramCredentialStore(client)
    store.alter("carol", upsertions={SHA512: credential("pw")})
    before = (client.get(user_path("carol"))[1].version, client.get_children(CONFIG_CHANGES))
    with pytest.raises(errors.ResourceNotFoundError, match="SCRAM-SHA-256"):
        store.alter("carol", deletions=[SHA256])
    with pytest.raises(errors.ResourceNotFoundError):
        store.alter("nobody", deletions=[SHA512])
    assert (client.get(user_path("carol"))[1].version, client.get_children(CONFIG_CHANGES)) == (
        before
    )
    assert client.exists(user_path("nobody")) is None


def test_another_brokers_cache_follows_set_change_and_delete(
    client: KazooClient, other_client: KazooClient
) -> None:
    store = ScramCredentialStore(client)
    store.alter("early", upsertions={SHA512: credential("before-start")})
    removed: list[tuple[str, ScramMechanism]] = []
    cache = ScramCredentialCache(other_client, on_removed=lambda user, m: removed.append((user, m)))
    cache.start()
    try:
        assert cache.get("early", SHA512) == credential("before-start")
        assert cache.get("alice", SHA512) is None
        store.alter("alice", upsertions={SHA512: credential("one")})
        assert wait_until(lambda: cache.get("alice", SHA512) == credential("one"))
        store.alter("alice", upsertions={SHA512: credential("two", 8192)})
        assert wait_until(lambda: cache.get("alice", SHA512) == credential("two", 8192))
        store.alter("alice", deletions=[SHA512])
        assert wait_until(lambda: cache.get("alice", SHA512) is None)
        assert removed == [("alice", SHA512)]
        assert "alice" not in cache.users()
    finally:
        cache.stop()


def test_cli_bootstrap_writes_zookeeper_without_the_password(
    client: KazooClient, zk_connect: str, tmp_path: Any
) -> None:
    password = "cli-secret-Pa55"

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "headwater.cli.main", "users", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = cli(
        "scram-set",
        "admin",
        "--zookeeper",
        zk_connect,
        "--iterations",
        "8192",
        stdin=password + "\n",
    )
    assert done.returncode == 0, done.stderr
    assert password not in done.stdout + done.stderr
    creds = ScramCredentialStore(client).read("admin")
    assert creds[SHA512].iterations == 8192
    assert password.encode() not in client.get(user_path("admin"))[0]

    described = cli("describe", "--zookeeper", zk_connect, "--output", "json")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout) == [
        {"user": "admin", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]}
    ]
    assert "salt" not in described.stdout and "key" not in described.stdout

    pw_file = tmp_path / "pw"
    pw_file.write_text(password + "\n")
    few = cli(
        "scram-set",
        "ops",
        "--zookeeper",
        zk_connect,
        "--iterations",
        "100",
        "--password-file",
        str(pw_file),
    )
    assert few.returncode != 0 and "too few iterations" in few.stderr
    assert client.exists(user_path("ops")) is None

    missing = cli("scram-delete", "ops", "--zookeeper", zk_connect)
    assert missing.returncode != 0 and "RESOURCE_NOT_FOUND" in missing.stderr

    gone = cli("scram-delete", "admin", "--zookeeper", zk_connect)
    assert gone.returncode == 0, gone.stderr
    assert ScramCredentialStore(client).read("admin") == {}
