"""Headwater Console from the chart on a real Kubernetes (``console.enabled``).

1. `helm install` with the local values (TLS on: clients present certificates), then a
   User ``e2e-console`` allowed to describe the cluster, topics and groups; the operator
   writes its Secret.
2. `helm upgrade --reuse-values --set console.enabled=true,console.userSecret=e2e-console`:
   the console's Deployment becomes Ready (it connected: `headwater console` describes
   the cluster before it listens).
3. A pod of the namespace opens the console's Service: the cluster page names the
   brokers, the console is read-only (the default), and a change is refused.

Marker ``k8s`` (``make e2e-k8s``); not in the short selection (``K8S_SHORT`` in the
Makefile).  The tests depend on each other's state and run in file order.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.e2e.k8s import kube

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(1800)]

USER = "e2e-console"
URL = f"http://{kube.RELEASE}-headwater-console.{kube.NAMESPACE}.svc:8080"
FETCH = """
import sys, urllib.error, urllib.request
for path in sys.argv[1:]:
    try:
        with urllib.request.urlopen(URL + path, timeout=30) as resp:
            status, body = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read().decode()
    print(f"=== {path} {status}")
    print(body)
""".replace("URL", repr(URL))


@pytest.fixture(scope="module")
def release() -> Iterator[None]:
    reason = kube.missing()
    if reason is not None:
        print(f"k8s tier skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    kube.uninstall()
    kube.helm(
        "install", kube.RELEASE, str(kube.CHART), "--create-namespace",
        "-f", str(kube.HERE / "values-local.yaml"), "--wait", "--timeout", "10m",
    )  # fmt: skip
    try:
        yield
    finally:
        if os.environ.get("HEADWATER_K8S_KEEP") != "1":
            kube.uninstall()


def test_console_deployment_connects_as_its_user(release: None) -> None:
    kube.install_workload()
    console_set = "console.enabled=true"
    if kube.TLS:
        describe = [
            {"resource": {"type": "cluster"}, "operations": ["Describe"]},
            {"resource": {"type": "topic", "name": "*"}, "operations": ["Describe"]},
            {"resource": {"type": "group", "name": "*"}, "operations": ["Describe"]},
        ]
        kube.apply({
            "apiVersion": "headwater.io/v1",
            "kind": "User",
            "metadata": {"name": USER, "namespace": kube.NAMESPACE},
            "spec": {"authentication": {"type": "tls"},
                     "authorization": {"type": "simple", "acls": describe}},
        })  # fmt: skip
        kube.wait_until(
            lambda: kube.kubectl("get", "secret", USER, "--ignore-not-found"),
            what=f"the Secret of User {USER}",
            timeout_s=180,
        )
        console_set += f",console.userSecret={USER}"
    kube.helm(
        "upgrade", kube.RELEASE, str(kube.CHART), "--reuse-values",
        "--set", console_set, "--wait", "--timeout", "5m",
    )  # fmt: skip
    kube.wait_until(
        lambda: [p for p in kube.pods("console") if kube.ready(p)],
        what="the console pod Ready",
        timeout_s=300,
    )


def test_console_pages_from_inside_the_namespace(release: None) -> None:
    log = kube.run_pod("console-fetch", ["python", "-c", FETCH, "/cluster", "/topics"])
    cluster, topics = log.split("=== /topics ")
    assert "=== /cluster 200" in cluster, cluster[-2000:]
    assert 'id="read-only"' in cluster  # console.readOnly defaults to true
    assert "hw-headwater-broker-0" in cluster, cluster[-2000:]
    assert topics.startswith("200"), topics[:2000]
