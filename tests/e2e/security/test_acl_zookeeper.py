"""ACL storage in a real ZooKeeper: Kafka's layout and JSON, conditional concurrent updates,
change notifications that reach another broker's watcher, and znode ACLs
(``zookeeper.set.acl``) that keep an unauthenticated client from writing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from headwater import errors
from headwater.coordination import session
from headwater.coordination.acls import AclWatcher, AclZkStore
from headwater.coordination.zk_security import ZkAuth
from headwater.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

ALICE_READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
BOB_DENY = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY)
ORDERS = ResourcePattern(ResourceType.TOPIC, "orders")
ORD_PREFIX = ResourcePattern(ResourceType.TOPIC, "ord", PatternType.PREFIXED)


@pytest.fixture
def client(zk_connect: str) -> Iterator[KazooClient]:
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


def test_kafka_layout_and_json(client: KazooClient) -> None:
    store = AclZkStore(client)
    store.ensure_paths()
    store.update(ORDERS, lambda es: es | {ALICE_READ})
    store.update(ORD_PREFIX, lambda es: es | {BOB_DENY})
    data, _ = client.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
        ],
    }
    data, _ = client.get("/kafka-acl-extended/prefixed/Topic/ord")
    assert json.loads(data)["acls"][0]["permissionType"] == "Deny"
    (literal,) = client.get_children("/kafka-acl-changes")
    assert literal.startswith("acl_changes_")
    assert client.get(f"/kafka-acl-changes/{literal}")[0] == b"Topic:orders"
    (extended,) = client.get_children("/kafka-acl-extended-changes")
    assert json.loads(client.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {
        "version": 1,
        "resourceType": "Topic",
        "name": "ord",
        "patternType": "PREFIXED",
    }
    assert store.load_all() == {ORDERS: {ALICE_READ}, ORD_PREFIX: {BOB_DENY}}
    # Removing the last entry removes the znode.
    store.update(ORDERS, lambda es: frozenset())
    assert client.exists("/kafka-acl/Topic/orders") is None
    assert store.load_all() == {ORD_PREFIX: {BOB_DENY}}


def test_an_unchanged_update_writes_nothing(client: KazooClient) -> None:
    store = AclZkStore(client)
    store.ensure_paths()
    store.update(ORDERS, lambda es: es | {ALICE_READ})
    before = client.get_children("/kafka-acl-changes")
    store.update(ORDERS, lambda es: es | {ALICE_READ})
    assert client.get_children("/kafka-acl-changes") == before


def test_a_name_with_a_slash_is_refused(client: KazooClient) -> None:
    store = AclZkStore(client)
    store.ensure_paths()
    with pytest.raises(errors.InvalidRequestError, match="'/'"):
        store.update(ResourcePattern(ResourceType.GROUP, "a/b"), lambda es: es | {ALICE_READ})
    assert store.load_all() == {}


def test_concurrent_updates_lose_nothing(zk_connect: str, client: KazooClient) -> None:
    AclZkStore(client).ensure_paths()
    writers = [session.connect(zk_connect) for _ in range(4)]
    entries = [
        AccessControlEntry(f"User:u{i}", "*", AclOperation.READ, AclPermissionType.ALLOW)
        for i in range(40)
    ]
    failures: list[BaseException] = []

    def write(i: int) -> None:
        store = AclZkStore(writers[i % 4])
        try:
            for e in entries[i::4]:
                store.update(ORDERS, lambda es, e=e: es | {e})  # type: ignore[misc]
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for w in writers:
        session.close(w)
    assert not failures
    assert AclZkStore(client).get(ORDERS)[0] == frozenset(entries)


def test_a_watcher_follows_changes_made_by_another_client(
    zk_connect: str, client: KazooClient
) -> None:
    seen: list[Mapping[Any, Any]] = []
    other = session.connect(zk_connect)
    try:
        writer = AclZkStore(other)
        writer.ensure_paths()
        writer.update(ORDERS, lambda es: es | {ALICE_READ})
        watcher = AclWatcher(AclZkStore(client), seen.append)
        watcher.start()
        try:
            assert seen[-1] == {ORDERS: {ALICE_READ}}
            writer.update(ORD_PREFIX, lambda es: es | {BOB_DENY})
            assert wait_until(lambda: seen[-1] == {ORDERS: {ALICE_READ}, ORD_PREFIX: {BOB_DENY}})
            writer.update(ORDERS, lambda es: frozenset())
            assert wait_until(lambda: seen[-1] == {ORD_PREFIX: {BOB_DENY}})
        finally:
            watcher.stop()
    finally:
        session.close(other)


def test_znode_acls_keep_unauthenticated_clients_out(zookeeper: Any, zk_connect: str) -> None:
    auth = ZkAuth("headwater", "s3cret", set_acl=True)
    broker = session.connect(zk_connect, auth=auth)
    stranger = session.connect(zk_connect)
    try:
        store = AclZkStore(broker)
        store.ensure_paths()
        store.update(ORDERS, lambda es: es | {ALICE_READ})
        broker.ensure_path("/brokers/topics")
        broker.create("/brokers/topics/orders", b"{}")
        # Ordinary znodes: world-readable, not writable.
        assert stranger.get("/brokers/topics/orders")[0] == b"{}"
        with pytest.raises(NoAuthError):
            stranger.set("/brokers/topics/orders", b"x")
        with pytest.raises(NoAuthError):
            stranger.create("/brokers/topics/evil", b"")
        with pytest.raises(NoAuthError):
            stranger.delete("/brokers/topics/orders")
        # ACLs: neither readable nor writable.
        with pytest.raises(NoAuthError):
            stranger.get("/kafka-acl/Topic/orders")
        with pytest.raises(NoAuthError):
            AclZkStore(stranger).update(ORDERS, lambda es: es | {BOB_DENY})
        # Another client with the same identity may do everything.
        twin = session.connect(zk_connect, auth=ZkAuth("headwater", "s3cret", set_acl=True))
        try:
            AclZkStore(twin).update(ORDERS, lambda es: es | {BOB_DENY})
        finally:
            session.close(twin)
        # A wrong password is not the same identity.
        intruder = session.connect(zk_connect, auth=ZkAuth("headwater", "guess", set_acl=True))
        try:
            with pytest.raises(NoAuthError):
                intruder.set("/brokers/topics/orders", b"x")
        finally:
            session.close(intruder)
        assert store.get(ORDERS)[0] == {ALICE_READ, BOB_DENY}
        assert broker.get("/brokers/topics/orders")[0] == b"{}"
    finally:
        session.close(stranger)
        session.close(broker)


def test_the_password_is_not_in_reprs() -> None:
    assert "s3cret" not in repr(ZkAuth("headwater", "s3cret", set_acl=True))


def test_a_watcher_catches_up_after_its_session_expires(
    zk_connect: str, client: KazooClient
) -> None:
    seen: list[Mapping[Any, Any]] = []
    other = session.connect(zk_connect)
    try:
        writer = AclZkStore(other)
        writer.ensure_paths()
        watcher = AclWatcher(AclZkStore(client), seen.append)
        watcher.start()
        try:
            session.expire_session(client)
            writer.update(ORDERS, lambda es: es | {ALICE_READ})
            assert wait_until(lambda: seen[-1] == {ORDERS: {ALICE_READ}})
            writer.update(ORD_PREFIX, lambda es: es | {BOB_DENY})
            assert wait_until(lambda: seen[-1] == {ORDERS: {ALICE_READ}, ORD_PREFIX: {BOB_DENY}})
        finally:
            watcher.stop()
    finally:
        session.close(other)
