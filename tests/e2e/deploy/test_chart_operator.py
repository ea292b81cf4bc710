"""The chart is real: its operator container, run as rendered, starts and reports its health.

`helm template` renders the operator Deployment; its command, args and env (downward-API
fields filled in) are run as a local process.  There is no Kubernetes here, and kopf refuses
to start without an API server ("Ran out of valid credentials"), so the API is kmock's
emulation, reached through a kubeconfig (``KUBECONFIG``, standing in for the service
account token a pod would have; the only variable added).  Addresses are localized as for
the brokers (tests/e2e/deploy/localize.py): the liveness URL's and metrics port's
host:port, and HEADWATER_BOOTSTRAP (no broker is needed to report health).  The test
checks the liveness endpoint the chart's livenessProbe calls answers with the operator's
probe results, and that the metrics port named in the pod serves Prometheus text.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import pytest
import yaml
from headwater.testing.zookeeper import free_port

from tests.e2e.deploy import localize
from tests.e2e.deploy.pods import LocalPod, image_environment
from tests.unit.deploy import chart

pytestmark = pytest.mark.e2e

POD_NAME = "hw-headwater-operator-5d9c7b6f4-x2x7q"


def operator_container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = chart.component(objs, "Deployment", "operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def resolved_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's env with downward-API fields filled in as a kubelet would."""
    fields = {"metadata.namespace": chart.NAMESPACE, "metadata.name": POD_NAME}
    env = {"HOSTNAME": POD_NAME}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def localized_args(args: list[str], *, liveness_port: int) -> list[str]:
    """Only the host:port of ``--liveness=URL`` changes."""
    out = []
    for arg in args:
        if arg.startswith("--liveness="):
            url = arg.split("=", 1)[1]
            arg = f"--liveness={localize.localize_url(url, port=liveness_port)}"
        out.append(arg)
    return out


def serve_kubernetes_api(server: kmock.KubernetesEmulator) -> None:
    """What the operator lists and watches in its namespace (kmock serves them empty)."""
    rw = {"list", "watch", "get", "patch", "create", "delete"}
    resources = {
        "headwater.io/v1/topics": kmock.ResourceInfo(
            kind="Topic", namespaced=True, verbs=rw, subresources={"status"}
        ),
        "v1/pods": kmock.ResourceInfo(kind="Pod", namespaced=True, verbs=rw),
        "apps/v1/statefulsets": kmock.ResourceInfo(kind="StatefulSet", namespaced=True, verbs=rw),
        "v1/events": kmock.ResourceInfo(kind="Event", namespaced=True, verbs={"create"}),
        "v1/namespaces": kmock.ResourceInfo(
            kind="Namespace", namespaced=False, verbs={"list", "watch"}
        ),
        "apiextensions.k8s.io/v1/customresourcedefinitions": kmock.ResourceInfo(
            kind="CustomResourceDefinition", namespaced=False, verbs={"list", "watch"}
        ),
    }
    for key, info in resources.items():
        server.resources[key] = info


def write_kubeconfig(path: Path, server_url: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kmock", "cluster": {"server": server_url}}],
                "users": [{"name": "operator", "user": {"token": "kmock"}}],
                "contexts": [
                    {
                        "name": "kmock",
                        "context": {
                            "cluster": "kmock",
                            "user": "operator",
                            "namespace": chart.NAMESPACE,
                        },
                    }
                ],
                "current-context": "kmock",
            }
        ),
        encoding="utf-8",
    )


async def get_text(session: aiohttp.ClientSession, url: str) -> tuple[int, str] | None:
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
            return resp.status, await resp.text()
    except (TimeoutError, aiohttp.ClientError):
        return None


@pytest.mark.asyncio
async def test_rendered_operator_starts_and_reports_health(
    kmock: kmock.KubernetesEmulator, tmp_path: Path
) -> None:
    chart.require_helm()
    container = operator_container(chart.render())
    serve_kubernetes_api(kmock)
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, str(kmock.url).rstrip("/"))

    liveness_port, metrics_port = free_port(), free_port()
    rendered_env = resolved_env(container)
    env = {
        **rendered_env,
        "HEADWATER_BOOTSTRAP": localize.localize_address(
            rendered_env["HEADWATER_BOOTSTRAP"], port=free_port()
        ),
        "HEADWATER_OPERATOR_METRICS_PORT": str(metrics_port),
        "KUBECONFIG": str(kubeconfig),
    }
    assert localize.changed_keys(rendered_env, env) == {
        "HEADWATER_BOOTSTRAP",
        "HEADWATER_OPERATOR_METRICS_PORT",
        "KUBECONFIG",
    }
    args = localized_args(container["args"], liveness_port=liveness_port)
    assert args[0] == "operator" and "--standalone" in args
    assert f"--namespace={chart.NAMESPACE}" in args
    (probe,) = [p for p in container["ports"] if p["name"] == "health"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert f"--liveness=http://0.0.0.0:{probe['containerPort']}/healthz" in container["args"]

    pod = LocalPod(
        "operator",
        argv=localize.local_command(container["command"]) + args,
        env=image_environment(env),
        log_path=tmp_path / "operator.log",
    )
    pod.start(tmp_path)
    try:
        deadline = time.monotonic() + 40
        health: tuple[int, str] | None = None
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline and pod.running:
                health = await get_text(session, f"http://127.0.0.1:{liveness_port}/healthz")
                if health is not None and health[0] == 200:
                    break
                await asyncio.sleep(0.2)
            log = pod.log_path.read_text(encoding="utf-8", errors="replace")
            assert "Ran out of valid credentials" not in log, (
                "`headwater operator` cannot log in to the API server (kubeconfig or in-cluster "
                "service account): its kopf.OperatorRegistry() has no login handler"
            )
            assert health is not None and health[0] == 200, pod.log_tail()
            metrics = await get_text(session, f"http://127.0.0.1:{metrics_port}/metrics")
        # kopf's liveness answer carries the results of the operator's probes.
        assert json.loads(health[1])["topics"] == 1, pod.log_tail()
        assert metrics is not None and metrics[0] == 200 and "# TYPE" in metrics[1]
        assert pod.running, pod.log_tail()
    finally:
        pod.stop(grace_s=10.0)
