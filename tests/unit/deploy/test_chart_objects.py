"""Every object the chart renders is one Kubernetes would accept.

`helm lint` passes, and for the default values and several variants (external ZooKeeper,
one broker, ServiceMonitor on, custom broker config, rack awareness, several operator
replicas) every rendered object validates against the Kubernetes OpenAPI schema of its
kind (strict: an unknown or misplaced field is an error), custom resources against their
CRD, and the ServiceMonitor (whose CRD we don't ship) by what it must select.  A check
that the validator itself refuses broken objects keeps these tests from passing vacuously.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.deploy import chart, crd

ONE_BROKER = {
    "brokers": {
        "replicas": 1,
        "config": {"default.replication.factor": 1, "min.insync.replicas": 1},
    },
    "zookeeper": {"replicas": 1},
}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "external-zookeeper": {"zookeeper": {"external": "zk-a:2181,zk-b:2181"}},
    "one-broker": ONE_BROKER,
    "service-monitor": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"a": "b"}}}},
    "custom-config": {
        "brokers": {
            "config": {"log.retention.ms": 3600000, "compression.type": "zstd"},
            "extraEnv": [{"name": "HEADWATER_MIN_INSYNC_REPLICAS", "value": "1"}],
        }
    },
    "rack-aware": {"brokers": {"rack": {"enabled": True}, "antiAffinity": "hard"}},
    "operator-ha": {"operator": {"replicas": 2}, "zookeeper": {"antiAffinity": "hard"}},
    "no-operator": {"operator": {"enabled": False}},
    "console": {"console": {"enabled": True, "userSecret": "console-user"}},
    "console-scram": {
        "tls": {"clientAuthentication": "scram-sha-512"},
        "console": {"enabled": True, "userSecret": "console-user", "readOnly": False},
        "networkPolicy": {"clientFrom": [{"podSelector": {"matchLabels": {"app": "x"}}}]},
    },
}


@pytest.mark.parametrize("values", [{}, ONE_BROKER], ids=["default", "one-broker"])
def test_helm_lint_passes(values: dict[str, Any]) -> None:
    done = chart.run_helm("lint", values, "--strict")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_object_validates(name: str) -> None:
    objs = chart.render(VARIANTS[name])
    crds = crd.load_crds()
    problems: list[str] = []
    for obj in objs:
        label = f"{obj['kind']}/{obj['metadata']['name']}"
        if chart.knows_kind(obj):
            problems += [f"{label}: {e}" for e in chart.k8s_errors(obj)]
        elif obj["kind"] == "ServiceMonitor":
            problems += [f"{label}: {e}" for e in service_monitor_problems(obj, objs)]
        else:
            definition = crd.crd_for(crds, obj["apiVersion"], obj["kind"])
            assert definition is not None, f"{label}: neither a built-in kind nor one of our CRDs"
            problems += [f"{label}: {e}" for e in crd.cr_errors(definition, obj, strict=True)]
    assert problems == []


def test_every_object_is_namespaced_to_the_release() -> None:
    cluster_scoped = {"CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}
    for obj in chart.render({"brokers": {"rack": {"enabled": True}}}):
        if obj["kind"] in cluster_scoped:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] == chart.NAMESPACE, obj["metadata"]["name"]


def test_validator_refuses_broken_objects() -> None:
    sts = chart.broker_statefulset(chart.render())
    typo = copy.deepcopy(sts)
    typo["spec"]["replica"] = 3
    wrong_type = copy.deepcopy(sts)
    wrong_type["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "x"
    assert chart.k8s_errors(sts) == []
    assert chart.k8s_errors(typo) != []
    assert chart.k8s_errors(wrong_type) != []


def service_monitor_problems(monitor: chart.Obj, objs: list[chart.Obj]) -> list[str]:
    """A ServiceMonitor must select Services that have the port its endpoints name."""
    spec = monitor["spec"]
    wanted = spec["selector"]["matchLabels"]
    services = [
        s
        for s in chart.find(objs, "Service")
        if wanted.items() <= s["metadata"].get("labels", {}).items()
    ]
    if not services:
        return ["selects no Service"]
    problems = []
    for endpoint in spec["endpoints"]:
        for service in services:
            ports = {p["name"] for p in service["spec"]["ports"]}
            if endpoint["port"] not in ports:
                problems.append(f"{service['metadata']['name']} has no port {endpoint['port']}")
    if spec["namespaceSelector"]["matchNames"] != [chart.NAMESPACE]:
        problems.append("namespaceSelector is not the release namespace")
    return problems


def test_service_monitor_scrapes_brokers_and_operator() -> None:
    objs = chart.render(VARIANTS["service-monitor"])
    (monitor,) = chart.find(objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["a"] == "b"
    assert service_monitor_problems(monitor, objs) == []
    selected = {
        s["metadata"]["name"]
        for s in chart.find(objs, "Service")
        if s["metadata"]["labels"].get("headwater.io/metrics") == "true"
    }
    assert selected == {"hw-headwater-broker-headless", "hw-headwater-operator-metrics"}
    assert chart.find(chart.render(), "ServiceMonitor") == []
