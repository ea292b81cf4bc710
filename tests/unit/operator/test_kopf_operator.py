"""The real kopf operator (its handlers, watches, finalizers and status patches) against kmock.

kmock emulates the Kubernetes API (lists, watch streams, merge patches,
finalizer-blocked deletion) but validates nothing, so every Topic sent and
every Topic the operator leaves behind is checked against the CRD's
openAPIV3Schema here, strictly (unknown fields are errors: kopf's own
bookkeeping must not land in ``status``, which the API server would prune).
The cluster side is the in-memory :class:`FakeTopicAdmin`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import kmock
import kopf
import pytest
import pytest_asyncio
from headwater.roll.engine import PartitionState
from headwater_operator import handlers
from headwater_operator.config import OperatorConfig
from headwater_operator.vault import OperatorVault
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import auth as kopf_auth
from kopf._cogs.structs.credentials import Vault

from tests.unit.deploy import crd as crds
from tests.unit.operator.fakes import FakeTopicAdmin, World

NS = "kafka"


class NamingEmulator(kmock.KubernetesEmulator):
    """kmock, plus the API server's ``generateName`` (kopf posts every Event with one)."""

    _names = itertools.count(1)

    async def _handle(self, request: Any) -> Any:
        data = request.data if isinstance(request.data, dict) else None
        meta = (data or {}).get("metadata")
        if isinstance(meta, dict) and meta.get("generateName") and not meta.get("name"):
            meta["name"] = f"{meta['generateName']}{next(self._names)}"
        return await super()._handle(request)


pytestmark = pytest.mark.kmock(cls=NamingEmulator)
TOPICS = f"/apis/headwater.io/v1/namespaces/{NS}/topics"


@pytest.fixture
def topic_crd() -> dict[str, Any]:
    found = crds.crd_for(crds.load_crds(), "headwater.io/v1", "Topic")
    assert found is not None
    return found


def topic(name: str, *, annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "headwater.io/v1",
        "kind": "Topic",
        "metadata": {
            "name": name,
            "namespace": NS,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "generation": 1,
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "annotations": annotations or {},
        },
        "spec": spec,
    }


async def wait_until(check: Callable[[], Any], what: str, *, timeout_s: float = 20.0) -> Any:
    """Poll ``check`` until it returns something truthy (a wait, not a timed assertion)."""
    for _ in range(int(timeout_s / 0.05)):
        value = check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Api:
    """The test's own Kubernetes client: validates Topics before sending them."""

    def __init__(self, server: kmock.KubernetesEmulator, crd: dict[str, Any]) -> None:
        self.server = server
        self.crd = crd

    def stored(self, name: str) -> dict[str, Any] | None:
        for (resource, namespace, obj_name), obj in self.server.objects.items():
            if resource.plural == "topics" and namespace == NS and obj_name == name:
                return None if obj.deleted else dict(obj.raw)
        return None

    async def create(self, body: dict[str, Any]) -> None:
        assert crds.cr_errors(self.crd, body, strict=True) == []
        async with aiohttp.ClientSession(base_url=str(self.server.url)) as session:
            resp = await session.post(TOPICS, json=body)
            assert resp.status < 300, await resp.text()

    async def delete(self, name: str) -> None:
        async with aiohttp.ClientSession(base_url=str(self.server.url)) as session:
            resp = await session.delete(f"{TOPICS}/{name}")
            assert resp.status < 300, await resp.text()

    def events(self) -> list[dict[str, Any]]:
        return [
            dict(obj.raw)
            for (resource, _ns, _name), obj in self.server.objects.items()
            if resource.plural == "events"
        ]


@pytest_asyncio.fixture
async def api(kmock: kmock.KubernetesEmulator, topic_crd: dict[str, Any]) -> Api:
    kmock.resources["headwater.io/v1/topics"] = kmock.ResourceInfo(
        kind="Topic",
        namespaced=True,
        verbs={"list", "watch", "get", "patch", "create", "delete"},
        subresources={"status"},
    )
    kmock.resources["v1/events"] = kmock.ResourceInfo(
        kind="Event", namespaced=True, verbs={"create"}
    )
    # kopf waits for these to be discoverable before it starts watching anything.
    kmock.resources["v1/namespaces"] = kmock.ResourceInfo(
        kind="Namespace", namespaced=False, verbs={"list", "watch"}
    )
    kmock.resources["apiextensions.k8s.io/v1/customresourcedefinitions"] = kmock.ResourceInfo(
        kind="CustomResourceDefinition", namespaced=False, verbs={"list", "watch"}
    )
    return Api(kmock, topic_crd)


@pytest.fixture
def admin() -> FakeTopicAdmin:
    return FakeTopicAdmin(brokers=3)


@contextlib.asynccontextmanager
async def running_operator(
    api: Api, config: OperatorConfig, *, vault: Vault | None = None, **factories: Any
) -> AsyncIterator[kopf.OperatorRegistry]:
    """The real operator (``handlers.register``) against kmock, stopped on exit."""
    registry = kopf.OperatorRegistry()
    handlers.register(registry, config, **factories)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return kopf.ConnectionInfo(server=str(api.server.url).rstrip("/"), insecure=True)

    @kopf.on.startup(registry=registry)
    def test_settings(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.scanning.disabled = True
        settings.watching.reconnect_backoff = 0.1

    stop = asyncio.Event()
    ready = asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            standalone=True,
            namespaces=[NS],
            stop_flag=stop,
            ready_flag=ready,
            vault=vault if vault is not None else OperatorVault(),
        )
    )
    await asyncio.wait_for(ready.wait(), 20)
    try:
        yield registry
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 20)


@pytest_asyncio.fixture
async def operator(api: Api, admin: FakeTopicAdmin) -> AsyncIterator[kopf.OperatorRegistry]:
    config = OperatorConfig(namespace=NS, resync_interval_s=3600)
    async with running_operator(api, config, topic_admin=lambda: admin) as registry:
        yield registry


@pytest.mark.asyncio
async def test_handlers_are_registered_for_topics(operator: kopf.OperatorRegistry) -> None:
    ids = {h.id for h in operator._changing.get_all_handlers()}
    assert {"reconcile", "delete-topic"} <= ids
    assert {h.id for h in operator._spawning.get_all_handlers()} == {"resync"}
    assert {h.id for h in operator._indexing.get_all_handlers()} == {"topic_claims"}


@pytest.mark.asyncio
async def test_topic_is_created_with_status_and_finalizer_then_deleted(
    operator: kopf.OperatorRegistry, api: Api, admin: FakeTopicAdmin, topic_crd: dict[str, Any]
) -> None:
    await api.create(topic("orders", partitions=3, replicas=2, config={"retention.ms": 60000}))

    def ready() -> dict[str, Any] | None:
        obj = api.stored("orders")
        conds = (obj or {}).get("status", {}).get("conditions") or []
        return obj if any(c["status"] == "True" for c in conds) else None

    obj = await wait_until(ready, "the Topic to be Ready")
    assert admin.topics["orders"].partitions == 3
    assert admin.topics["orders"].dynamic_config == {"retention.ms": "60000"}
    assert obj["status"]["topicName"] == "orders" and obj["status"]["partitions"] == 3
    assert "headwater.io/topic" in obj["metadata"]["finalizers"]
    assert crds.cr_errors(topic_crd, obj, strict=True) == []
    await wait_until(
        lambda: any(e.get("reason") == "Created" for e in api.events()), "a Created Event"
    )
    created = next(e for e in api.events() if e.get("reason") == "Created")
    assert created["type"] == "Normal" and "orders" in created["message"]
    assert created["involvedObject"]["name"] == "orders"

    await api.delete("orders")
    await wait_until(lambda: api.stored("orders") is None, "the Topic to be gone")
    assert "orders" not in admin.topics


@pytest.mark.asyncio
async def test_refusal_is_reported_in_status(
    operator: kopf.OperatorRegistry, api: Api, admin: FakeTopicAdmin, topic_crd: dict[str, Any]
) -> None:
    await api.create(topic("bad", partitions=1, replicas=1, config={"no.such": "x"}))

    def refused() -> dict[str, Any] | None:
        conds = ((api.stored("bad") or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["status"] == "False"), None)

    cond = await wait_until(refused, "the refusal")
    assert cond["reason"] == "InvalidConfig" and "no.such" in cond["message"]
    assert "bad" not in admin.topics
    obj = api.stored("bad")
    assert obj is not None and crds.cr_errors(topic_crd, obj, strict=True) == []


@pytest.mark.asyncio
async def test_detached_topic_gets_no_finalizer_and_no_topic(
    operator: kopf.OperatorRegistry, api: Api, admin: FakeTopicAdmin
) -> None:
    await api.create(topic("managed", partitions=1, replicas=1))
    await api.create(
        topic("detached", annotations={"headwater.io/managed": "false"}, partitions=1, replicas=1)
    )
    await wait_until(lambda: "managed" in admin.topics, "the managed topic")
    obj = api.stored("detached")
    assert obj is not None and not obj["metadata"].get("finalizers")
    assert "detached" not in admin.topics
    await api.delete("detached")
    await wait_until(lambda: api.stored("detached") is None, "the detached Topic to be gone")


def test_invalid_topics_are_refused_by_the_crd_schema(topic_crd: dict[str, Any]) -> None:
    assert crds.cr_errors(topic_crd, topic("x", partitions=0, replicas=1))
    assert crds.cr_errors(topic_crd, topic("x", partitions=1, replicas=40000))
    assert crds.cr_errors(topic_crd, topic("x", partitions=1, replicas=1, topicName="a b"))
    assert crds.cr_errors(topic_crd, topic("x", partitions=1, replicas=1, config={"a": [1]}))


@pytest.mark.asyncio
async def test_new_statefulset_revision_triggers_a_roll_with_events(api: Api) -> None:
    for plural, kind in (("apps/v1/statefulsets", "StatefulSet"), ("v1/pods", "Pod")):
        api.server.resources[plural] = kmock.ResourceInfo(
            kind=kind, namespaced=True, verbs={"list", "watch", "get", "patch"}
        )
    world = World(brokers=3, revision="rev-1")
    world.namespace = NS
    world.update_revision = "rev-2"
    world.partitions = [PartitionState("t", 0, (0, 1, 2), (0, 1, 2))]
    world.min_isr["t"] = 2
    config = OperatorConfig(
        namespace=NS, broker_statefulset=world.name, operation_timeout_s=30, resync_interval_s=3600
    )
    async with running_operator(
        api, config, topic_admin=FakeTopicAdmin, kube_api=lambda: world, cluster_probe=lambda: world
    ):
        sts = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": world.name, "namespace": NS, "uid": "sts", "resourceVersion": "1"},
            "status": {"updateRevision": "rev-2"},
        }
        async with aiohttp.ClientSession(base_url=str(api.server.url)) as session:
            resp = await session.post(f"/apis/apps/v1/namespaces/{NS}/statefulsets", json=sts)
            assert resp.status < 300
        await wait_until(
            lambda: any(e.get("reason") == "RollFinished" for e in api.events()),
            "the roll to finish",
        )
    assert sorted(world.deleted) == [f"{world.name}-{i}" for i in range(3)]
    reasons = [e.get("reason") for e in api.events()]
    assert reasons.count("Restarting") == 3
    assert world.sts_annotations["headwater.io/roll-state"] == "Finished"


def open_sessions(server: kmock.KubernetesEmulator) -> list[aiohttp.ClientSession]:
    """The aiohttp sessions still open, but kmock's own client."""
    gc.collect()
    return [
        obj
        for obj in gc.get_objects()
        if isinstance(obj, aiohttp.ClientSession) and not obj.closed and obj not in server.clients
    ]


@pytest.mark.asyncio
async def test_a_request_that_outlives_the_operator_opens_no_session(api: Api) -> None:
    # kopf's initial resource scan sends its requests from tasks of asyncio.as_completed,
    # which a stop during the scan does not cancel: they go on after kopf closed the vault.
    vault = OperatorVault()
    config = OperatorConfig(namespace=NS, resync_interval_s=3600)
    admin = FakeTopicAdmin(brokers=1)
    async with running_operator(api, config, vault=vault, topic_admin=lambda: admin):
        await api.create(topic("t", partitions=1, replicas=1))
        await wait_until(lambda: "t" in admin.topics, "the topic")  # the scan is long done
    assert open_sessions(api.server) == []
    token = kopf_auth.vault_var.set(vault)
    try:
        late = kopf_api.get(
            "/api", settings=kopf.OperatorSettings(), logger=logging.getLogger(__name__)
        )
        # With no credentials left it waits for a re-login, as kopf's own requests do,
        # until it is cancelled (kopf cancels its tasks that outlive the operator).
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(late, 1.0)
    finally:
        kopf_auth.vault_var.reset(token)
    assert open_sessions(api.server) == []
