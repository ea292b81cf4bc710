"""Client quotas in a real ZooKeeper: Kafka's /config/users and /config/clients layout,
the change notification another broker's watcher follows, SCRAM credentials kept
beside quotas, and empty entities removed."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from headwater.coordination import model, session
from headwater.coordination.client_quotas import ClientQuotaStore, ClientQuotaWatcher
from headwater.coordination.config_changes import CONFIG_CHANGES
from headwater.coordination.scram_credentials import ScramCredentialStore
from headwater.quotas.entities import QuotaEntity, QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.security.scram import ScramCredential, ScramMechanism
from kazoo.client import KazooClient

E = QuotaEntity.of
P = QuotaKey.PRODUCER_BYTE_RATE


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


def test_kafkas_layout(client: KazooClient) -> None:
    store = ClientQuotaStore(client)
    store.alter(E(user="al/ice", client_id=None), {"producer_byte_rate": 1024.0})
    store.alter(E(client_id="app"), {"request_percentage": 50.0})
    store.alter(E(user=None), {"consumer_byte_rate": 2048.0})
    data, _ = client.get("/config/users/al%2Fice/clients/<default>")
    assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
    assert model.decode_config(client.get("/config/clients/app")[0]) == {
        "request_percentage": "50.0"
    }
    assert model.decode_config(client.get("/config/users/<default>")[0]) == {
        "consumer_byte_rate": "2048"
    }
    paths = [
        json.loads(client.get(f"{CONFIG_CHANGES}/{n}")[0])["entity_path"]
        for n in sorted(client.get_children(CONFIG_CHANGES))
    ]
    assert paths == ["users/al%2Fice/clients/<default>", "clients/app", "users/<default>"]
    assert store.read_all() == {
        E(user="al/ice", client_id=None): {P: 1024.0},
        E(client_id="app"): {QuotaKey.REQUEST_PERCENTAGE: 50.0},
        E(user=None): {QuotaKey.CONSUMER_BYTE_RATE: 2048.0},
    }


def test_scram_credentials_and_quotas_share_a_user_znode(client: KazooClient) -> None:
    scram = ScramCredentialStore(client)
    sha = ScramMechanism.SCRAM_SHA_512
    scram.alter(
        "bob",
        upsertions={sha: ScramCredential.from_password(sha, "pw", salt=b"s", iterations=4096)},
    )
    quotas = ClientQuotaStore(client)
    quotas.alter(E(user="bob"), {"producer_byte_rate": 100.0})
    assert set(scram.read("bob")) == {sha}
    quotas.alter(E(user="bob"), {"producer_byte_rate": None})
    assert set(scram.read("bob")) == {sha}
    assert quotas.read_all() == {}


def test_removing_the_last_key_deletes_the_entity(client: KazooClient) -> None:
    store = ClientQuotaStore(client)
    store.alter(E(client_id="c"), {"producer_byte_rate": 1.0, "consumer_byte_rate": 2.0})
    store.alter(E(client_id="c"), {"producer_byte_rate": None, "consumer_byte_rate": None})
    assert client.exists("/config/clients/c") is None


def test_another_brokers_watcher_follows_changes(
    client: KazooClient, other_client: KazooClient
) -> None:
    quotas = ClientQuotas()
    store = ClientQuotaStore(client)
    store.alter(E(user="u"), {"producer_byte_rate": 10.0})
    watcher = ClientQuotaWatcher(other_client, quotas)
    watcher.start()
    try:
        assert quotas.quotas == {E(user="u"): {P: 10.0}}
        store.alter(E(user="u", client_id="c"), {"producer_byte_rate": 20.0})
        assert wait_until(lambda: E(user="u", client_id="c") in quotas.quotas)
        store.alter(E(user="u"), {"producer_byte_rate": None})
        assert wait_until(lambda: E(user="u") not in quotas.quotas)
        assert quotas.quotas == {E(user="u", client_id="c"): {P: 20.0}}
    finally:
        watcher.stop()
