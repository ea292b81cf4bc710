"""Scaling the brokers on a real Kubernetes through the chart and the operator (issue 17).

1. `helm install` (3 brokers), a Topic with 6 partitions x 2 replicas.
2. `helm upgrade --reuse-values --set brokers.replicas=4`: Helm changes only the
   ``headwater.io/desired-brokers`` annotation; the operator raises ``spec.replicas``,
   waits for broker 3 to be Ready and registered, rebalances onto it (throttled), and
   records ``Steady`` with the condition ``Scaled=True``.  Broker 3 then holds replicas.
3. `helm upgrade --set brokers.replicas=3`: Helm keeps the live ``spec.replicas`` (the
   template's ``lookup``), so the StatefulSet does not shrink; the operator refuses the
   scale-down (``ScaleDownRefused`` in the status and a Warning Event) because broker 3
   holds replicas.
4. ``headwater cluster drain 3`` from a pod: once broker 3 holds nothing the operator
   shrinks the StatefulSet to 3 and the pod goes.

Marker ``k8s`` (``make e2e-k8s``); not in the short selection (``K8S_SHORT`` in the
Makefile).  The tests depend on each other's state and run in file order.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.k8s import kube

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(3600)]

LOAD = "scaling-load"
STATE: dict[str, float] = {}


def figure(name: str, value: str) -> None:
    print(f"FIGURE {name}: {value}", file=sys.stderr, flush=True)
    with open(kube.REPO / ".tools" / "k8s" / "figures.txt", "a") as out:
        out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {name}: {value}\n")


@pytest.fixture(scope="module")
def release() -> Iterator[None]:
    reason = kube.missing()
    if reason is not None:
        print(f"k8s tier skipped: {reason}", file=sys.stderr)
        pytest.skip(reason)
    kube.uninstall()
    # The chart's defaults (TLS on): the new broker needs its certificate, the operator
    # its super-user client certificate, the drain pod the scenario's client User.
    kube.helm(
        "install", kube.RELEASE, str(kube.CHART), "--create-namespace",
        "-f", str(kube.HERE / "values-local.yaml"), "--wait", "--timeout", "10m",
    )  # fmt: skip
    try:
        yield
    finally:
        if os.environ.get("HEADWATER_K8S_KEEP") != "1":
            kube.uninstall()


def statefulset() -> dict[str, Any]:
    sts: dict[str, Any] = kube.kubectl_json("get", "statefulset", kube.BROKERS)
    return sts


def scaling_status() -> dict[str, Any]:
    raw = (statefulset()["metadata"].get("annotations") or {}).get("headwater.io/scaling-status")
    return json.loads(raw) if raw else {}


def scaled_to(n: int) -> bool:
    s = scaling_status()
    cond = next((c for c in s.get("conditions", ()) if c["type"] == "Scaled"), {})
    return bool(
        s.get("phase") == "Steady" and s.get("replicas") == n and cond.get("status") == "True"
    )


def replicas_on(broker: int) -> int:
    described = kube.cli(f"describe-{int(time.time() * 1000) % 10**9}", "topics", "describe", LOAD)
    return sum(1 for p in described["partitions"] if broker in p["replicas"])


def sts_events(reason: str) -> str:
    return kube.kubectl(
        "get", "events", "--field-selector",
        f"involvedObject.name={kube.BROKERS},reason={reason}", "-o", "json",
    )  # fmt: skip


def topic_ready() -> bool:
    obj = kube.kubectl_json("get", "topic", LOAD)
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def upgrade(*sets: str) -> None:
    args: list[str] = []
    for s in sets:
        args += ["--set", s]
    kube.helm("upgrade", kube.RELEASE, str(kube.CHART), "--reuse-values", *args)


def test_scale_up_rebalances_onto_the_new_broker(release: None) -> None:
    kube.wait_until(
        lambda: len(kube.pods("broker")) == 3 and all(kube.ready(p) for p in kube.pods("broker")),
        what="3 brokers Ready",
        timeout_s=600,
    )
    kube.install_workload()  # the ConfigMap the client pods mount
    kube.apply(
        {
            "apiVersion": "headwater.io/v1",
            "kind": "Topic",
            "metadata": {"name": LOAD, "namespace": kube.NAMESPACE},
            "spec": {"partitions": 6, "replicas": 2},
        }
    )
    kube.wait_until(topic_ready, what=f"Topic {LOAD} Ready", timeout_s=300)
    assert replicas_on(3) == 0
    started = time.time()
    upgrade("brokers.replicas=4")
    ann = statefulset()["metadata"]["annotations"]
    assert ann["headwater.io/desired-brokers"] == "4"
    kube.wait_until(lambda: scaled_to(4), what="the operator to scale up to 4", timeout_s=900)
    figure("scale 3 -> 4 brokers, rebalanced", f"{time.time() - started:.1f} s")
    assert statefulset()["spec"]["replicas"] == 4
    assert replicas_on(3) > 0
    assert '"Rebalancing"' in sts_events("Rebalancing")
    status = scaling_status()
    assert status["throttleBytesPerSecond"] > 0, status


def test_scale_down_is_refused_while_the_broker_holds_replicas(release: None) -> None:
    upgrade("brokers.replicas=3")
    # Helm kept the live count (lookup): the StatefulSet did not shrink behind the operator.
    assert statefulset()["spec"]["replicas"] == 4
    kube.wait_until(
        lambda: scaling_status().get("phase") == "ScaleDownRefused",
        what="the scale-down to be refused",
        timeout_s=300,
    )
    events = sts_events("ScaleDownRefused")
    assert '"Warning"' in events and "broker 3 holds" in events, events
    cond = next(c for c in scaling_status()["conditions"] if c["type"] == "Scaled")
    assert cond["status"] == "False" and cond["reason"] == "ScaleDownRefused", cond
    time.sleep(20)  # several operator checks later: still refused, nothing removed
    assert statefulset()["spec"]["replicas"] == 4
    assert f"{kube.BROKERS}-3" in [p["metadata"]["name"] for p in kube.pods("broker")]


def test_drained_broker_lets_the_statefulset_shrink(release: None) -> None:
    assert statefulset()["spec"]["replicas"] == 4  # the state the previous tests left
    started = time.time()
    # The CLI waits for the moves and prints them; only its exit status matters here.
    kube.run_pod(
        "drain-3",
        [
            "headwater",
            "cluster",
            "drain",
            "3",
            "--throttle",
            "10485760",
            "--timeout",
            "600",
            *(["--command-config", kube.CLIENT_PROPERTIES] if kube.TLS else []),
        ],
        timeout_s=700,
    )
    kube.wait_until(lambda: scaled_to(3), what="the operator to scale down to 3", timeout_s=600)
    figure("drain broker 3 then shrink to 3", f"{time.time() - started:.1f} s")
    assert statefulset()["spec"]["replicas"] == 3
    kube.wait_until(
        lambda: len(kube.pods("broker")) == 3, what="broker pod 3 to be gone", timeout_s=300
    )
    assert replicas_on(3) == 0
