"""kubectl, helm and pod helpers for the Kubernetes tier (tests/e2e/k8s).

The cluster is the one ``KUBECONFIG`` names, by default the local one of ``make k8s-up``
(``.tools/k8s/state/kubeconfig``); its nodes must have the images of ``make k8s-images``
(the tier never pulls).  Every command is echoed, bounded by a timeout, and raises with
its output when it fails.  :func:`missing` says why the tier cannot run here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.unit.deploy import chart

REPO = chart.REPO
HERE = Path(__file__).resolve().parent
CHART = REPO / "deploy" / "helm" / "headwater"
KUBECONFIG = os.environ.get("KUBECONFIG") or str(REPO / ".tools" / "k8s" / "state" / "kubeconfig")
NAMESPACE = "headwater"
RELEASE = "hw"
BROKERS = f"{RELEASE}-headwater-broker"
BOOTSTRAP = f"{RELEASE}-headwater-bootstrap.{NAMESPACE}.svc:9092"
IMAGE_1, IMAGE_2 = "headwater:e2e-1", "headwater:e2e-2"
SPARK_IMAGE = "headwater-spark:e2e"
WORKLOAD_CONFIGMAP = "k8s-e2e-workload"


def _chart_tls() -> bool:
    """Whether the release has TLS: the chart's default unless values-local.yaml says."""
    default = yaml.safe_load((CHART / "values.yaml").read_text()).get("tls", {}).get("enabled")
    local = yaml.safe_load((HERE / "values-local.yaml").read_text()).get("tls", {}).get("enabled")
    return bool(default if local is None else local)


TLS = _chart_tls()
"""With TLS, client pods authenticate as the User :data:`CLIENT_USER` (a client
certificate issued by the operator, ACLs for everything the scenario does)."""
CLIENT_USER = "e2e-client"
CLIENT_CERT_DIR = "/etc/headwater/client-cert"
CLIENT_PROPERTIES = "/etc/headwater/client/client.properties"
CLIENT_CONFIGMAP = "k8s-e2e-client"


def tool(name: str) -> str | None:
    """``name`` from the local cluster's build (.tools/k8s/v*/bin), else from PATH."""
    for built in sorted((REPO / ".tools" / "k8s").glob(f"v*/bin/{name}")):
        return str(built)
    return shutil.which(name)


def missing() -> str | None:
    """Why the tier cannot run here, or None."""
    if not os.path.exists(KUBECONFIG):
        return f"no cluster: {KUBECONFIG} does not exist (run `make k8s-up`)"
    if tool("kubectl") is None:
        return "kubectl not found (run `make k8s-up`, which builds it)"
    if chart.helm_binary() is None:
        return "helm not found on PATH nor at .tools/bin/helm (run `make system-deps`)"
    done = subprocess.run(
        [str(tool("kubectl")), "--kubeconfig", KUBECONFIG, "get", "--raw", "/readyz"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if done.returncode != 0:
        return f"the cluster in {KUBECONFIG} does not answer: {done.stderr.strip()[:200]}"
    return None


def run(
    argv: Sequence[str],
    *,
    timeout_s: float = 600,
    stdin: str | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    print("+", " ".join(argv)[:400], file=sys.stderr, flush=True)
    done = subprocess.run(
        list(argv),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={**os.environ, "KUBECONFIG": KUBECONFIG, **(env or {})},
    )
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    return done


def kubectl(
    *args: str, timeout_s: float = 300, stdin: str | None = None, check: bool = True
) -> str:
    kubectl_bin = tool("kubectl")
    assert kubectl_bin is not None
    return run(
        [kubectl_bin, "-n", NAMESPACE, *args], timeout_s=timeout_s, stdin=stdin, check=check
    ).stdout


def kubectl_json(*args: str) -> Any:
    return json.loads(kubectl(*args, "-o", "json"))


def apply(obj: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump(obj))


def helm(*args: str, timeout_s: float = 900) -> str:
    helm_bin = chart.helm_binary()
    assert helm_bin is not None
    return run([helm_bin, "-n", NAMESPACE, *args], timeout_s=timeout_s).stdout


def uninstall() -> None:
    """Remove the release and its namespace: Topics first, while the operator still runs to
    release their finalizers (a Topic left behind would hold the namespace in Terminating),
    then the release, then the namespace."""
    kubectl_bin, helm_bin = tool("kubectl"), chart.helm_binary()
    assert kubectl_bin is not None and helm_bin is not None
    run([kubectl_bin, "-n", NAMESPACE, "delete", "users", "--all", "--timeout=120s"],
        check=False)  # fmt: skip
    for name in run([kubectl_bin, "-n", NAMESPACE, "get", "users", "-o", "name"],
                    check=False).stdout.split():  # fmt: skip
        run([kubectl_bin, "-n", NAMESPACE, "patch", name, "--type=merge",
             "-p", '{"metadata":{"finalizers":null}}'], check=False)  # fmt: skip
    gone = run([kubectl_bin, "-n", NAMESPACE, "delete", "topics", "--all", "--timeout=120s"],
               check=False)  # fmt: skip
    if gone.returncode != 0 and "the server doesn't have a resource type" not in gone.stderr:
        for name in run([kubectl_bin, "-n", NAMESPACE, "get", "topics", "-o", "name"],
                        check=False).stdout.split():  # fmt: skip
            run([kubectl_bin, "-n", NAMESPACE, "patch", name, "--type=merge",
                 "-p", '{"metadata":{"finalizers":null}}'], check=False)  # fmt: skip
    run([helm_bin, "-n", NAMESPACE, "uninstall", RELEASE, "--wait"], check=False)
    run([kubectl_bin, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true"],
        timeout_s=300)  # fmt: skip


def diagnose() -> str:
    """What a failed wait needs to be understood afterwards: the nodes' conditions, the
    namespace's objects and events, and for each pod that is not Ready its description and
    the tail of its containers' logs (the previous run's too)."""
    kubectl_bin = tool("kubectl")
    if kubectl_bin is None:
        return "kubectl not found"
    parts: list[str] = []

    def show(*args: str, namespaced: bool = True, tail: int = 6000) -> None:
        argv = [kubectl_bin, *(["-n", NAMESPACE] if namespaced else []), *args]
        parts.append("$ kubectl " + " ".join(argv[1:]))
        try:
            done = run(argv, timeout_s=60, check=False)
        except subprocess.TimeoutExpired:
            parts.append("(timed out)")
            return
        parts.append((done.stdout + done.stderr)[-tail:])

    show("describe", "nodes", namespaced=False, tail=4000)
    show("get", "all,pvc", "-o", "wide")
    show("get", "events", "--sort-by=.lastTimestamp", tail=8000)
    try:
        items = kubectl_json("get", "pods")["items"]
    except (AssertionError, subprocess.TimeoutExpired, ValueError):
        items = []
    for pod in items:
        if ready(pod) or pod.get("status", {}).get("phase") == "Succeeded":
            continue
        name = pod["metadata"]["name"]
        show("describe", "pod", name, tail=3000)
        show("logs", name, "--all-containers", "--tail=60")
        show("logs", name, "--all-containers", "--previous", "--tail=60")
    return "\n".join(parts)


def wait_until(check: Callable[[], Any], *, what: str, timeout_s: float, every_s: float = 1) -> Any:
    """Poll ``check`` until it returns something truthy; a bounded wait, not a timing test."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def pods(component: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = kubectl_json(
        "get", "pods", "-l", f"app.kubernetes.io/component={component}"
    )["items"]
    return sorted(found, key=lambda p: p["metadata"]["name"])


# -- client pods ---------------------------------------------------------------------------


def _pod(name: str, image: str, command: list[str], *, workload: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "Never",
        "command": command,
        "env": [{"name": "HEADWATER_BOOTSTRAP", "value": BOOTSTRAP}],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
    }
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
        "containers": [container],
    }
    if workload:
        container["volumeMounts"] = [{"name": "workload", "mountPath": "/work"}]
        spec["volumes"] = [{"name": "workload", "configMap": {"name": WORKLOAD_CONFIGMAP}}]
    if TLS:
        container["env"] += [
            {"name": "HEADWATER_SECURITY_PROTOCOL", "value": "SSL"},
            {"name": "HEADWATER_SSL_CAFILE", "value": f"{CLIENT_CERT_DIR}/ca.crt"},
            {"name": "HEADWATER_SSL_CERTFILE", "value": f"{CLIENT_CERT_DIR}/user.crt"},
            {"name": "HEADWATER_SSL_KEYFILE", "value": f"{CLIENT_CERT_DIR}/user.key"},
        ]
        container.setdefault("volumeMounts", []).extend([
            {"name": "client-cert", "mountPath": CLIENT_CERT_DIR, "readOnly": True},
            {"name": "client-props", "mountPath": CLIENT_PROPERTIES.rsplit("/", 1)[0],
             "readOnly": True},
        ])  # fmt: skip
        spec.setdefault("volumes", []).extend([
            {"name": "client-cert", "secret": {"secretName": CLIENT_USER}},
            {"name": "client-props", "configMap": {"name": CLIENT_CONFIGMAP}},
        ])  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"headwater-e2e": "client"}},
        "spec": spec,
    }


def run_pod(name: str, command: list[str], *, image: str = IMAGE_1, timeout_s: float = 300) -> str:
    """Run ``command`` in a one-off pod to completion; its log.  Fails if it exits non-zero."""
    kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true")
    apply(_pod(name, image, command, workload=True))
    phase = wait_until(
        lambda: (
            kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}") in ("Succeeded", "Failed")
            and kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}")
        ),
        what=f"pod {name} to finish",
        timeout_s=timeout_s,
    )
    log = kubectl("logs", name)
    kubectl("delete", "pod", name, "--wait=false")
    assert phase == "Succeeded", f"pod {name} failed:\n{log[-4000:]}"
    return log


def cli(name: str, *args: str, image: str = IMAGE_1) -> Any:
    """``headwater ARGS --output json`` in a pod; the parsed JSON."""
    security = ["--command-config", CLIENT_PROPERTIES] if TLS else []
    out = run_pod(name, ["headwater", *args, *security, "--output", "json"], image=image)
    start = min((i for i in (out.find("{"), out.find("[")) if i >= 0), default=0)
    return json.loads(out[start:])


def install_workload() -> None:
    """The ConfigMap with workload.py, which client pods mount at /work."""
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": WORKLOAD_CONFIGMAP, "namespace": NAMESPACE},
        "data": {"workload.py": (HERE / "workload.py").read_text()},
    }
    apply(configmap)
    if TLS:
        install_client_user()


ACLS_FOR_EVERYTHING: list[dict[str, Any]] = [
    {"resource": {"type": kind, "name": "*"}, "operations": ["All"]}
    for kind in ("topic", "group", "transactionalId")
] + [{"resource": {"type": "cluster"}, "operations": ["All"]}]


def install_user(name: str, acls: list[dict[str, Any]]) -> None:
    """A User (a client certificate in the Secret ``name``, and ``acls``), waited Ready."""
    apply({
        "apiVersion": "headwater.io/v1",
        "kind": "User",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"authentication": {"type": "tls"},
                 "authorization": {"type": "simple", "acls": acls}},
    })  # fmt: skip

    def ready() -> bool:
        obj = kubectl_json("get", "user", name)
        conditions = (obj.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    wait_until(ready, what=f"User {name} Ready", timeout_s=180)
    wait_until(
        lambda: bool(kubectl("get", "secret", name, "--ignore-not-found", "-o", "name")),
        what=f"User {name}'s Secret",
        timeout_s=60,
    )


def install_client_user() -> None:
    """The scenario's clients' User (a client certificate, ACLs for all it does) and the
    Kafka client properties its pods use with ``headwater --command-config``."""
    install_user(CLIENT_USER, ACLS_FOR_EVERYTHING)
    properties = (
        "security.protocol=SSL\n"
        f"ssl.truststore.location={CLIENT_CERT_DIR}/ca.crt\n"
        f"ssl.keystore.location={CLIENT_CERT_DIR}/user-keystore.pem\n"
    )
    apply({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CLIENT_CONFIGMAP, "namespace": NAMESPACE},
        "data": {"client.properties": properties},
    })  # fmt: skip


class Workload:
    """A long-running workload.py pod, stopped on request, whose summary is read back."""

    def __init__(self, name: str, *args: str, image: str = IMAGE_1) -> None:
        self.name = name
        kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true")
        apply(_pod(name, image, ["python", "/work/workload.py", *args], workload=True))
        wait_until(
            lambda: kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}") == "Running",
            what=f"workload pod {name} running",
            timeout_s=120,
        )

    def log(self) -> str:
        return kubectl("logs", self.name, check=False)

    def stop(self, *, timeout_s: float = 240) -> dict[str, Any]:
        kubectl("exec", self.name, "--", "touch", "/tmp/stop")
        wait_until(
            lambda: (
                kubectl("get", "pod", self.name, "-o", "jsonpath={.status.phase}")
                in ("Succeeded", "Failed")
            ),
            what=f"workload pod {self.name} to finish",
            timeout_s=timeout_s,
        )
        log = self.log()
        lines = [line for line in log.splitlines() if line.startswith("SUMMARY ")]
        assert lines, f"{self.name} printed no summary:\n{log[-4000:]}"
        kubectl("delete", "pod", self.name, "--wait=false")
        summary: dict[str, Any] = json.loads(lines[-1].removeprefix("SUMMARY "))
        return summary


def expand(ranges: list[list[int]]) -> set[int]:
    return {n for lo, hi in ranges for n in range(lo, hi + 1)}
