"""Broker scaling end to end: the real kopf operator on kmock, real brokers underneath.

The operator runs as in production (``handlers.register``, its watches, its
:class:`~headwater_operator.scaling_kube.ClientScalingKubeApi` over the
official ``kubernetes`` client, pointed at kmock, and ``headwater.Admin``
against a real local cluster).  kmock has no StatefulSet controller, so the
test plays it (:class:`StatefulSetController`): when ``spec.replicas`` rises
it starts the next broker process and creates its pod, Ready once the broker
serves; when it falls it stops the highest broker gracefully and deletes its
pod.  The user's side is what ``helm upgrade --set brokers.replicas=N`` does
to the StatefulSet: the ``headwater.io/desired-brokers`` annotation changes.

Covered, in one cluster's life: scale up 3 -> 4 (the new broker gets replicas
through a throttled rebalance, the throttle is gone afterwards); scale down
4 -> 3 refused while broker 3 holds replicas (Warning Event, condition,
``spec.replicas`` untouched); the user drains broker 3 and the operator
shrinks; then the operator's own flow (``headwater.io/drain-on-scale-down``):
up to 4 again, down to 3 drained by the operator and shrunk.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import aiohttp
import kmock
import kubernetes
import pytest
from headwater import Admin
from headwater.testing import Cluster
from headwater.testing.cluster import is_healthy
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.values import TopicPartition
from headwater_operator import scaling_kube
from headwater_operator.config import OperatorConfig

from tests.unit.operator.test_kopf_operator import (  # noqa: F401  (fixtures used by name)
    NS,
    Api,
    NamingEmulator,
    api,
    running_operator,
    topic_crd,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.kmock(cls=NamingEmulator)]

STS = "hw-headwater-broker"
SELECTOR = {"app.kubernetes.io/component": "broker"}
THROTTLE = 5_000_000


def kube_client(server: kmock.KubernetesEmulator) -> Any:
    config = kubernetes.client.Configuration()
    config.host = str(server.url).rstrip("/")
    return kubernetes.client.ApiClient(config)


class StatefulSetController:
    """Plays Kubernetes' StatefulSet controller and kubelet for the broker StatefulSet."""

    def __init__(self, server: kmock.KubernetesEmulator, cluster: Cluster) -> None:
        client = kube_client(server)
        self.core = kubernetes.client.CoreV1Api(client)
        self.apps = kubernetes.client.AppsV1Api(client)
        self.cluster = cluster
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="fake-sts-controller", daemon=True)

    def pod(self, ordinal: int, *, ready: bool) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{STS}-{ordinal}",
                "namespace": NS,
                "uid": f"pod-{ordinal}-{time.monotonic_ns()}",
                "labels": {**SELECTOR, "controller-revision-hash": "rev-1"},
            },
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
        }

    def pods(self) -> dict[int, dict[str, Any]]:
        items = self.core.list_namespaced_pod(NS, _preload_content=False)
        out: dict[int, dict[str, Any]] = {}
        for p in json.loads(items.data)["items"]:
            out[int(p["metadata"]["name"].rsplit("-", 1)[1])] = p
        return out

    def _run(self) -> None:
        try:
            while not self.stop.wait(0.2):
                self.reconcile()
        except BaseException as exc:  # surfaced by the test
            self.errors.append(exc)

    def reconcile(self) -> None:
        sts = json.loads(
            self.apps.read_namespaced_stateful_set(STS, NS, _preload_content=False).data
        )
        replicas = int(sts["spec"]["replicas"])
        pods = self.pods()
        for ordinal in range(replicas):
            if ordinal not in pods:
                assert self.cluster.add_broker(wait=False) == ordinal
                self.core.create_namespaced_pod(NS, cast(Any, self.pod(ordinal, ready=False)))
            elif pods[ordinal]["status"]["conditions"][0]["status"] != "True" and is_healthy(
                self.cluster.brokers[ordinal].address
            ):
                self.core.patch_namespaced_pod(
                    f"{STS}-{ordinal}", NS, {"status": self.pod(ordinal, ready=True)["status"]}
                )
        for ordinal in sorted(pods, reverse=True):
            if ordinal >= replicas:
                self.cluster.remove_broker(ordinal)
                self.core.delete_namespaced_pod(f"{STS}-{ordinal}", NS)

    def __enter__(self) -> StatefulSetController:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.thread.join(60)


@pytest.fixture
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with Cluster(
        brokers=3,
        data_dir=tmp_path_factory.mktemp("scaling"),
        zookeeper=zookeeper.connect_string,
    ) as c:
        yield c


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[Admin]:
    with Admin(cluster.bootstrap, request_timeout_ms=10000, default_api_timeout_ms=15000) as a:
        yield a


def hosted(admin: Admin, broker: int) -> list[TopicPartition]:
    return sorted(
        (tp for tp, ids in admin.current_assignment().items() if broker in ids),
        key=lambda tp: (tp.topic, tp.partition),
    )


def throttled_brokers(admin: Admin) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for b in admin.describe_cluster().brokers:
        configs = admin.describe_broker_configs(b.broker_id)
        found = {
            k: str(e.value)
            for k, e in configs.items()
            if "throttled.rate" in k and not e.is_default
        }
        if found:
            out[b.broker_id] = found
    return out


@pytest.mark.asyncio
async def test_scale_up_rebalances_scale_down_is_refused_until_drained(
    api: Api,  # noqa: F811  (the imported fixture)
    cluster: Cluster,
    admin: Admin,
) -> None:
    for plural, kind in (("apps/v1/statefulsets", "StatefulSet"), ("v1/pods", "Pod")):
        api.server.resources[plural] = kmock.ResourceInfo(
            kind=kind, namespaced=True, verbs={"list", "watch", "get", "patch", "create", "delete"}
        )
    admin.create_topic("orders", num_partitions=8, replication_factor=2)
    admin.create_topic("audit", num_partitions=3, replication_factor=3)
    sts_path = f"/apis/apps/v1/namespaces/{NS}/statefulsets"
    async with aiohttp.ClientSession(base_url=str(api.server.url)) as session:
        resp = await session.post(
            sts_path,
            json={
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {
                    "name": STS,
                    "namespace": NS,
                    "uid": "sts-uid",
                    "annotations": {
                        scaling_kube.DESIRED_ANNOTATION: "3",
                        scaling_kube.DRAIN_ANNOTATION: "false",
                    },
                },
                "spec": {
                    "replicas": 3,
                    "serviceName": f"{STS}-headless",
                    "selector": {"matchLabels": SELECTOR},
                    "template": {
                        "metadata": {"labels": SELECTOR},
                        "spec": {"containers": [{"name": "broker", "image": "headwater"}]},
                    },
                },
                "status": {"updateRevision": "rev-1", "replicas": 3},
            },
        )
        assert resp.status < 300, await resp.text()

        async def annotate(**annotations: str) -> None:
            """What `helm upgrade --set brokers.replicas=N` changes on the StatefulSet."""
            resp = await session.patch(
                f"{sts_path}/{STS}",
                json={"metadata": {"annotations": annotations}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert resp.status < 300, await resp.text()

        def sts() -> dict[str, Any]:
            for (resource, namespace, name), obj in api.server.objects.items():
                if resource.plural == "statefulsets" and namespace == NS and name == STS:
                    found: dict[str, Any] = dict(obj.raw)
                    return found
            raise AssertionError("no StatefulSet")

        def status() -> dict[str, Any]:
            return scaling_kube.scaling_status(sts())

        def scaled_to(n: int) -> bool:
            s = status()
            cond: dict[str, Any] = next(
                (c for c in s.get("conditions", ()) if c["type"] == "Scaled"), {}
            )
            return (
                s.get("phase") == "Steady"
                and s.get("replicas") == n
                and cond.get("status") == "True"
            )

        def reasons() -> list[str]:
            return [str(e.get("reason")) for e in api.events()]

        def contains(reason: str) -> bool:
            return reason in reasons()

        config = OperatorConfig(
            bootstrap=cluster.bootstrap,
            namespace=NS,
            broker_statefulset=STS,
            resync_interval_s=3600,
            operation_timeout_s=60,
            rebalance_throttle_bytes_per_s=THROTTLE,
            scaling_check_interval_s=0.5,
        )
        with StatefulSetController(api.server, cluster) as controller:
            for ordinal in range(3):  # not through the sync client: kmock serves on this loop
                resp = await session.post(
                    f"/api/v1/namespaces/{NS}/pods", json=controller.pod(ordinal, ready=True)
                )
                assert resp.status < 300, await resp.text()
            async with running_operator(
                api,
                config,
                kube_api=lambda: scaling_kube.ClientScalingKubeApi(kube_client(api.server)),
            ):
                # -- scale up: 3 -> 4, rebalanced onto broker 3, throttle removed ---------------
                assert hosted(admin, 3) == []
                await annotate(**{scaling_kube.DESIRED_ANNOTATION: "4"})
                await wait_until(lambda: scaled_to(4), "scaled up to 4", timeout_s=120)
                assert sts()["spec"]["replicas"] == 4
                assert len(hosted(admin, 3)) >= 4, admin.current_assignment()
                assert throttled_brokers(admin) == {}
                assert admin.list_partition_reassignments() == {}
                for reason in ("ScalingUp", "Rebalancing", "RebalanceFinished"):
                    await wait_until(functools.partial(contains, reason), f"a {reason} Event")
                assert status()["throttleBytesPerSecond"] == THROTTLE

                # -- scale down refused while broker 3 holds replicas --------------------------
                await annotate(**{scaling_kube.DESIRED_ANNOTATION: "3"})
                await wait_until(
                    lambda: status().get("phase") == "ScaleDownRefused", "refused", timeout_s=60
                )
                await wait_until(lambda: "ScaleDownRefused" in reasons(), "the refusal Event")
                refusal = next(e for e in api.events() if e.get("reason") == "ScaleDownRefused")
                assert refusal["type"] == "Warning" and "broker 3 holds" in refusal["message"]
                assert "headwater cluster drain" in refusal["message"]
                cond = next(c for c in status()["conditions"] if c["type"] == "Scaled")
                assert cond["status"] == "False" and cond["reason"] == "ScaleDownRefused"
                await asyncio.sleep(2)  # several operator steps: still refused, nothing moved
                assert sts()["spec"]["replicas"] == 4 and cluster.brokers[3].running
                assert reasons().count("ScaleDownRefused") == 1

                # -- (a) the user drains broker 3; the operator then shrinks -------------------
                plan = admin.plan_drain(3)
                admin.execute_reassignment(plan, throttle_bytes_per_s=THROTTLE)
                await wait_until(
                    lambda: admin.verify_reassignment(plan).complete, "the drain", timeout_s=120
                )
                await wait_until(lambda: scaled_to(3), "scaled down to 3", timeout_s=120)
                assert sts()["spec"]["replicas"] == 3 and 3 not in cluster.brokers
                await wait_until(lambda: "ScalingDown" in reasons(), "a ScalingDown Event")

                # -- (b) the operator drains: up to 4, then down with drain-on-scale-down ------
                await annotate(**{scaling_kube.DESIRED_ANNOTATION: "4"})
                await wait_until(lambda: scaled_to(4), "scaled up to 4 again", timeout_s=120)
                assert hosted(admin, 3)
                await annotate(
                    **{
                        scaling_kube.DESIRED_ANNOTATION: "3",
                        scaling_kube.DRAIN_ANNOTATION: "true",
                    }
                )
                await wait_until(lambda: scaled_to(3), "drained and scaled down", timeout_s=180)
                await wait_until(lambda: "Draining" in reasons(), "a Draining Event")
                assert hosted(admin, 3) == [] and 3 not in cluster.brokers
                assert throttled_brokers(admin) == {}
                for tp, ids in admin.current_assignment().items():
                    assert set(ids) <= {0, 1, 2}, (tp, ids)
        assert controller.errors == []
