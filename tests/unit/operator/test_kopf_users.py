"""The real kopf operator's User handlers against kmock: create, update, delete, refusals.

The operator (``handlers.register``, so the User handlers sit beside the Topic ones) runs
against kmock with the brokers' side in memory (:class:`FakeUserAdmin`), the Secrets in
memory (:class:`FakeSecrets`) and a real clients CA.  Every User sent is validated
against the CRD schema first (kmock validates nothing), and every User the operator
leaves behind is validated strictly (nothing kopf writes may land in ``status``).
Covered: a SCRAM user (Secret with password and sasl.jaas.config, the same password on
the brokers, ACLs, finalizer ``headwater.io/user``, Ready), ACLs changed by an update, a
TLS user (a certificate for CN=<user> signed by the clients CA), an invalid spec and a
super user's name refused with a condition and nothing created, someone else's Secret
left alone, and deletion removing ACLs, credential and Secret, kept blocked while the
brokers are down and finished once they are back.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import kopf
import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.x509.oid import NameOID
from headwater_operator.config import OperatorConfig
from headwater_operator.security_config import ClientSecurity
from headwater_operator.users import AclRule
from headwater_operator.users_kube import PemClientsCa

from tests.unit.deploy import crd as crds
from tests.unit.operator.test_kopf_operator import NamingEmulator, running_operator, wait_until
from tests.unit.operator.user_fakes import FakeSecrets, FakeUserAdmin, make_ca

NS = "kafka"
USERS = f"/apis/headwater.io/v1/namespaces/{NS}/users"
pytestmark = pytest.mark.kmock(cls=NamingEmulator)

READ_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "READ", "ALLOW")
DESCRIBE_ORDERS = AclRule("TOPIC", "orders", "LITERAL", "DESCRIBE", "ALLOW")
GROUP_PREFIX = AclRule("GROUP", "app-", "PREFIXED", "READ", "ALLOW")
DENY_SECRET = AclRule("TOPIC", "secret-", "PREFIXED", "ALL", "DENY")


def user_body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "headwater.io/v1",
        "kind": "User",
        "metadata": {
            "name": name,
            "namespace": NS,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
        },
        "spec": spec,
    }


def acls(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"type": "simple", "acls": list(entries)}


READ_ACL = {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]}
GROUP_ACL = {"resource": {"type": "group", "name": "app-", "patternType": "prefix"},
             "operations": ["Read"]}  # fmt: skip
DENY_ACL = {"resource": {"type": "topic", "name": "secret-", "patternType": "prefix"},
            "operations": ["All"], "type": "deny"}  # fmt: skip


class UserApi:
    def __init__(self, server: kmock.KubernetesEmulator, crd: dict[str, Any]) -> None:
        self.server = server
        self.crd = crd

    def stored(self, name: str) -> dict[str, Any] | None:
        for (resource, namespace, obj_name), obj in self.server.objects.items():
            if resource.plural == "users" and namespace == NS and obj_name == name:
                return None if obj.deleted else dict(obj.raw)
        return None

    async def _send(self, method: str, path: str, body: Any = None) -> None:
        async with aiohttp.ClientSession(base_url=str(self.server.url)) as session:
            headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
            resp = await session.request(method, path, json=body, headers=headers)
            assert resp.status < 300, await resp.text()

    async def create(self, body: dict[str, Any], *, validate: bool = True) -> None:
        if validate:
            assert crds.cr_errors(self.crd, body, strict=True) == []
        await self._send("POST", USERS, body)

    async def patch_spec(self, name: str, spec: dict[str, Any]) -> None:
        current = self.stored(name)
        assert current is not None
        new = {**current, "spec": spec}
        new["metadata"] = {**current["metadata"], "generation": 2}
        assert crds.cr_errors(self.crd, new, strict=True) == []
        await self._send("PATCH", f"{USERS}/{name}", {"spec": spec, "metadata": {"generation": 2}})

    async def delete(self, name: str) -> None:
        await self._send("DELETE", f"{USERS}/{name}")

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [
            dict(obj.raw)
            for (resource, _ns, _name), obj in self.server.objects.items()
            if resource.plural == "events" and obj.raw.get("reason") == reason
        ]

    def condition(self, name: str, generation: int = 1) -> dict[str, Any] | None:
        obj = self.stored(name) or {}
        status = obj.get("status") or {}
        if status.get("observedGeneration") != generation:
            return None
        for c in status.get("conditions") or []:
            if c["type"] == "Ready":
                return dict(c)
        return None


@pytest.fixture
def user_crd() -> dict[str, Any]:
    found = crds.crd_for(crds.load_crds(), "headwater.io/v1", "User")
    assert found is not None
    return found


@pytest_asyncio.fixture
async def api(kmock: kmock.KubernetesEmulator, user_crd: dict[str, Any]) -> UserApi:
    kmock.resources["headwater.io/v1/users"] = kmock.ResourceInfo(
        kind="User",
        namespaced=True,
        verbs={"list", "watch", "get", "patch", "create", "delete"},
        subresources={"status"},
    )
    kmock.resources["v1/events"] = kmock.ResourceInfo(
        kind="Event", namespaced=True, verbs={"create"}
    )
    kmock.resources["v1/namespaces"] = kmock.ResourceInfo(
        kind="Namespace", namespaced=False, verbs={"list", "watch"}
    )
    kmock.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = kmock.ResourceInfo(
        kind="CustomResourceDefinition", namespaced=False, verbs={"list", "watch"}
    )
    return UserApi(kmock, user_crd)


class World:
    def __init__(self, tmp: Path) -> None:
        self.admin = FakeUserAdmin()
        self.secrets = FakeSecrets()
        self.ca_cert = make_ca(tmp / "ca")
        self.ca = PemClientsCa(str(tmp / "ca"), trust_pem="BROKERS-CA", validity_days=30)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


@contextlib.asynccontextmanager
async def operator_for(api: UserApi, world: World) -> AsyncIterator[kopf.OperatorRegistry]:
    config = OperatorConfig(
        namespace=NS,
        resync_interval_s=3600,
        security=ClientSecurity(super_users=("User:hw-headwater-operator",)),
    )
    users = {
        "user_admin": lambda: world.admin,
        "secrets": lambda: world.secrets,
        "clients_ca": lambda: world.ca,
        "cleanup_retry_s": 0.2,
    }
    async with running_operator(api, config, users=users) as registry:  # type: ignore[arg-type]
        yield registry


async def ready(
    api: UserApi, name: str, *, status: str = "True", generation: int = 1
) -> dict[str, Any]:
    cond: dict[str, Any] = await wait_until(
        lambda: (c := api.condition(name, generation)) is not None and c["status"] == status and c,
        f"User {name} Ready={status}",
    )
    return cond


@pytest.mark.asyncio
async def test_scram_user_gets_a_secret_a_credential_acls_and_a_finalizer(
    api: UserApi, world: World, user_crd: dict[str, Any]
) -> None:
    async with operator_for(api, world):
        await api.create(
            user_body(
                "orders-app",
                authentication={"type": "scram-sha-512"},
                authorization=acls(READ_ACL, GROUP_ACL),
            )
        )
        cond = await ready(api, "orders-app")
        assert cond["reason"] == "Reconciled"
        labels, data, owner = world.secrets.secrets["orders-app"]
        assert labels == {"headwater.io/user": "orders-app"} and owner == "uid-orders-app"
        password = data["password"]
        assert len(password) >= 24
        assert f'username="orders-app" password="{password}"' in data["sasl.jaas.config"]
        assert world.admin.scram["orders-app"] == (password, 4096)
        assert world.admin.acls["User:orders-app"] == {READ_ORDERS, DESCRIBE_ORDERS, GROUP_PREFIX}
        obj = api.stored("orders-app")
        assert obj is not None
        assert "headwater.io/user" in obj["metadata"]["finalizers"]
        assert obj["status"]["username"] == "User:orders-app"
        assert obj["status"]["secret"] == "orders-app"
        assert crds.cr_errors(user_crd, obj, strict=True) == []

        # An update: the ACLs follow the spec; the password stays.
        await api.patch_spec(
            "orders-app",
            {"authentication": {"type": "scram-sha-512"}, "authorization": acls(DENY_ACL)},
        )
        await ready(api, "orders-app", generation=2)
        assert world.admin.acls["User:orders-app"] == {DENY_SECRET}
        assert world.secrets.secrets["orders-app"][1]["password"] == password

        await api.delete("orders-app")
        await wait_until(lambda: api.stored("orders-app") is None, "the User to be gone")
    assert world.admin.acls["User:orders-app"] == set()
    assert "orders-app" not in world.admin.scram
    assert "orders-app" not in world.secrets.secrets


@pytest.mark.asyncio
async def test_tls_user_gets_a_certificate_from_the_clients_ca(api: UserApi, world: World) -> None:
    async with operator_for(api, world):
        await api.create(user_body("billing", authentication={"type": "tls"}))
        await ready(api, "billing")
        _labels, data, _owner = world.secrets.secrets["billing"]
        cert = x509.load_pem_x509_certificate(data["user.crt"].encode())
        cert.verify_directly_issued_by(world.ca_cert)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "billing"
        assert data["ca.crt"] == "BROKERS-CA" and "PRIVATE KEY" in data["user.key"]
        assert world.admin.scram == {}

        # Switching to SCRAM replaces the certificate with a password.
        await api.patch_spec("billing", {"authentication": {"type": "scram-sha-512"}})
        await ready(api, "billing", generation=2)
        data = world.secrets.secrets["billing"][1]
        assert "user.crt" not in data and world.admin.scram["billing"][0] == data["password"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "spec", "reason", "words"),
    [
        ("bad-op", {"authorization": acls({"resource": {"type": "group", "name": "g"},
                                           "operations": ["Write"]})},
         "InvalidSpec", "does not apply to a group"),
        ("hw-headwater-operator", {"authentication": {"type": "scram-sha-512"}},
         "ReservedName", "super user"),
    ],
    ids=["invalid", "reserved"],
)  # fmt: skip
async def test_refused_users_change_nothing(
    api: UserApi, world: World, name: str, spec: dict[str, Any], reason: str, words: str
) -> None:
    async with operator_for(api, world):
        await api.create(user_body(name, **spec))
        cond = await ready(api, name, status="False")
        assert cond["reason"] == reason and words in cond["message"]
        await wait_until(lambda: api.events(reason), f"a {reason} Warning event")
        assert world.secrets.secrets == {} and world.admin.scram == {}
        assert not any(world.admin.acls.values())
        await api.delete(name)
        await wait_until(lambda: api.stored(name) is None, "the refused User to be gone")


@pytest.mark.asyncio
async def test_someone_elses_secret_is_left_alone(api: UserApi, world: World) -> None:
    world.secrets.secrets["db"] = ({}, {"password": "theirs"}, "other")
    async with operator_for(api, world):
        await api.create(user_body("db", authentication={"type": "scram-sha-512"}))
        cond = await ready(api, "db", status="False")
        assert cond["reason"] == "SecretConflict"
        assert world.secrets.secrets["db"] == ({}, {"password": "theirs"}, "other")
        assert world.admin.scram == {}
        await api.delete("db")
        await wait_until(lambda: api.stored("db") is None, "the User to be gone")
    assert world.secrets.secrets["db"] == ({}, {"password": "theirs"}, "other")


@pytest.mark.asyncio
async def test_deletion_waits_for_the_brokers(api: UserApi, world: World) -> None:
    async with operator_for(api, world):
        await api.create(
            user_body("late", authentication={"type": "scram-sha-512"},
                      authorization=acls(READ_ACL))
        )  # fmt: skip
        await ready(api, "late")
        world.admin.down = True
        await api.delete("late")
        await wait_until(lambda: api.events("CleanupFailed"), "a CleanupFailed event")
        obj = api.stored("late")
        assert obj is not None and "headwater.io/user" in obj["metadata"]["finalizers"]
        assert "late" in world.admin.scram  # nothing half removed is reported done
        world.admin.down = False
        await wait_until(lambda: api.stored("late") is None, "the User to be gone")
    assert "late" not in world.admin.scram and world.admin.acls["User:late"] == set()
    assert "late" not in world.secrets.secrets
