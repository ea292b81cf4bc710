"""The chart's values reach the objects that use them, and bad values are refused.

server.properties holds brokers.config (Kafka names, numbers printed as integers) plus the
keys the chart computes; the pod template's checksum is the hash of exactly that text, so
it changes when the broker configuration changes and not otherwise; zookeeper.external
removes our ensemble and becomes the brokers' zookeeper.connect; the broker container's
command, environment and mounts fit together (the config file it is told to read is the
one mounted, every ${VAR} in the config is in its environment); and values the schema or
the templates reject fail `helm template` with a message naming the value.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import yaml

from tests.unit.deploy import chart

PLAINTEXT = {"tls": {"enabled": False}}
"""The chart's plaintext path (one PLAINTEXT listener); TLS: test_chart_tls.py."""


def checksum(values: dict[str, Any]) -> str:
    sts = chart.broker_statefulset(chart.render(values))
    value: str = sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    return value


def test_properties_hold_broker_config() -> None:
    config = {
        "log.retention.ms": 3600000,
        "log.segment.bytes": 1073741824,
        "unclean.leader.election.enable": True,
        "compression.type": "zstd",
        "inter.broker.protocol.version": "2",
        "num.partitions": 12,
    }
    props = chart.parse_properties(
        chart.broker_properties(chart.render({"brokers": {"config": config}}))
    )
    assert props["log.retention.ms"] == "3600000"
    assert props["log.segment.bytes"] == "1073741824"
    assert props["unclean.leader.election.enable"] == "true"
    assert props["compression.type"] == "zstd"
    assert props["inter.broker.protocol.version"] == "2"
    assert props["num.partitions"] == "12"
    # Defaults the user did not override are still there.
    assert props["min.insync.replicas"] == "2"
    assert props["default.replication.factor"] == "3"


TRANSACTION_DEFAULTS = {
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.max.timeout.ms": "900000",
}
"""Kafka's defaults of the transaction-log settings, which the chart states as values."""


def test_properties_hold_transaction_log_defaults() -> None:
    props = chart.parse_properties(chart.broker_properties(chart.render({})))
    assert {k: props.get(k) for k in TRANSACTION_DEFAULTS} == TRANSACTION_DEFAULTS


def test_transaction_log_settings_are_values() -> None:
    config = {
        "transaction.state.log.num.partitions": 10,
        "transaction.state.log.replication.factor": 2,
        "transaction.state.log.min.isr": 1,
        "transaction.max.timeout.ms": 600000,
    }
    objs = chart.render({"brokers": {"config": config}})
    props = chart.parse_properties(chart.broker_properties(objs))
    assert {k: props[k] for k in config} == {k: str(v) for k, v in config.items()}
    assert checksum({"brokers": {"config": config}}) != checksum({})


def test_properties_hold_computed_keys() -> None:
    objs = chart.render(PLAINTEXT)
    props = chart.parse_properties(chart.broker_properties(objs))
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9092"
    assert props["log.dirs"] == "/var/lib/headwater/data"
    assert props["metrics.port"] == "9404"
    assert "broker.id" not in props
    zk = [
        f"hw-headwater-zookeeper-{i}.hw-headwater-zookeeper-headless.headwater.svc.cluster.local:2181"
        for i in range(3)
    ]
    assert props["zookeeper.connect"] == ",".join(zk) + "/headwater"
    env = chart.broker_env(objs, hostname="hw-headwater-broker-2")
    assert chart.expand_env(props["advertised.listeners"], env) == (
        "PLAINTEXT://hw-headwater-broker-2.hw-headwater-broker-headless.headwater.svc.cluster.local:9092"
    )
    # The advertised host is a pod of the headless Service of the broker StatefulSet.
    sts = chart.broker_statefulset(objs)
    assert sts["spec"]["serviceName"] == "hw-headwater-broker-headless"
    chart.one(objs, "Service", "hw-headwater-broker-headless")


def test_user_config_overrides_computed_keys() -> None:
    values = {"brokers": {"config": {"log.dirs": "/var/lib/headwater/logs"}}}
    props = chart.parse_properties(chart.broker_properties(chart.render(values)))
    assert props["log.dirs"] == "/var/lib/headwater/logs"


def test_checksum_is_the_hash_of_the_properties() -> None:
    objs = chart.render()
    text = chart.broker_properties(objs)
    assert checksum({}) == hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "values",
    [
        {"brokers": {"config": {"log.retention.ms": 1}}},
        {"brokers": {"config": {"inter.broker.protocol.version": "2"}}},
        {"brokers": {"config": {"broker.rack": "a"}}},
        {"zookeeper": {"external": "zk:2181"}},
        {"metrics": {"brokerPort": 9500}},
    ],
    ids=["retention", "protocol", "new-key", "zookeeper", "metrics-port"],
)
def test_checksum_changes_with_broker_config(values: dict[str, Any]) -> None:
    assert checksum(values) != checksum({})


@pytest.mark.parametrize(
    "values",
    [
        {"brokers": {"replicas": 5}},
        {"brokers": {"image": {"tag": "0.2.0"}}},
        {"brokers": {"resources": {"requests": {"cpu": "1"}}}},
        {"operator": {"replicas": 2}},
        {"metrics": {"serviceMonitor": {"enabled": True}}},
    ],
    ids=["replicas", "image", "resources", "operator", "service-monitor"],
)
def test_checksum_ignores_other_values(values: dict[str, Any]) -> None:
    assert checksum(values) == checksum({})


def test_external_zookeeper_replaces_the_ensemble() -> None:
    objs = chart.render({"zookeeper": {"external": "zk-a:2181,zk-b:2181"}})
    assert chart.component(objs, "StatefulSet", "zookeeper") == []
    assert chart.component(objs, "Service", "zookeeper") == []
    assert chart.component(objs, "PodDisruptionBudget", "zookeeper") == []
    props = chart.parse_properties(chart.broker_properties(objs))
    assert props["zookeeper.connect"] == "zk-a:2181,zk-b:2181/headwater"
    chrooted = chart.render({"zookeeper": {"external": "zk:2181/other"}})
    assert (
        chart.parse_properties(chart.broker_properties(chrooted))["zookeeper.connect"]
        == "zk:2181/other"
    )


def test_zookeeper_ensemble_matches_its_connect_string() -> None:
    objs = chart.render({"zookeeper": {"replicas": 5}})
    (sts,) = chart.component(objs, "StatefulSet", "zookeeper")
    assert sts["spec"]["replicas"] == 5
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    servers = env["ZOO_SERVERS"].split()
    assert len(servers) == 5
    assert servers[0] == (
        "server.1=hw-headwater-zookeeper-0.hw-headwater-zookeeper-headless.headwater.svc.cluster.local:2888:3888;2181"
    )
    # myid = ordinal + 1, matching server.N above.
    assert "ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 ))" in container["args"][0]
    connect = chart.parse_properties(chart.broker_properties(objs))["zookeeper.connect"]
    hosts = connect.removesuffix("/headwater").split(",")
    assert [h.rsplit(":", 1)[0] for h in hosts] == [s.split("=")[1].split(":")[0] for s in servers]
    headless = chart.one(objs, "Service", sts["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True


def test_broker_container_reads_the_mounted_config() -> None:
    objs = chart.render(PLAINTEXT)
    container = chart.broker_container(objs)
    assert container["command"] == ["headwater"]
    assert container["args"] == [
        "broker",
        "--config",
        "/etc/headwater/server.properties",
        "--broker-id-from-hostname",
    ]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts["/etc/headwater"] == "config"
    assert mounts["/tmp"] == "tmp"
    props = chart.parse_properties(chart.broker_properties(objs))
    data_mount = next(p for p, n in mounts.items() if n == "data")
    assert props["log.dirs"].startswith(data_mount + "/")
    # Every ${VAR} the config uses is in the container's environment.
    env = chart.broker_env(objs, hostname="hw-headwater-broker-0")
    for value in props.values():
        chart.expand_env(value, env)  # raises KeyError on a missing variable
    # Ports: the listener and metrics ports of the config are the container's named ports.
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert props["listeners"].endswith(f":{ports['client']}")
    assert props["metrics.port"] == str(ports["metrics"])
    assert container["readinessProbe"]["grpc"]["port"] == ports["client"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_broker_statefulset_shape() -> None:
    sts = chart.broker_statefulset(chart.render())
    spec = sts["spec"]
    assert spec["updateStrategy"] == {"type": "OnDelete"}
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 120
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert [c["metadata"]["name"] for c in spec["volumeClaimTemplates"]] == ["data"]
    assert pod["affinity"]["podAntiAffinity"]
    assert {c["topologyKey"] for c in pod["topologySpreadConstraints"]} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    }
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9404"


def test_operator_knows_where_the_brokers_are() -> None:
    objs = chart.render(PLAINTEXT)
    (deployment,) = chart.component(objs, "Deployment", "operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    bootstrap = chart.one(objs, "Service", "hw-headwater-bootstrap")
    port = bootstrap["spec"]["ports"][0]["port"]
    assert (
        env["HEADWATER_BOOTSTRAP"] == f"hw-headwater-bootstrap.headwater.svc.cluster.local:{port}"
    )
    chart.one(objs, "StatefulSet", env["HEADWATER_BROKER_STATEFULSET"])
    assert "--standalone" in container["args"]
    assert deployment["spec"]["strategy"]["type"] == "Recreate"


def test_operator_replicas_use_peering() -> None:
    objs = chart.render({"operator": {"replicas": 2}})
    (deployment,) = chart.component(objs, "Deployment", "operator")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (peering,) = chart.find(objs, "KopfPeering")
    assert f"--peering={peering['metadata']['name']}" in container["args"]
    assert "--standalone" not in container["args"]
    role = chart.one(objs, "Role", "hw-headwater-operator")
    rules = {
        (g, r): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert {"get", "list", "watch", "patch"} <= rules[("kopf.dev", "kopfpeerings")]
    assert rules[("", "pods")] == {"get", "list", "watch", "delete"}
    # patch: roll progress annotations and clearing the manual trigger; never update/delete.
    assert rules[("apps", "statefulsets")] == {"get", "list", "watch", "patch"}
    assert rules[("", "events")] == {"create"}
    assert {"get", "list", "watch", "patch"} <= rules[("headwater.io", "topics")]
    assert "patch" in rules[("headwater.io", "topics/status")]
    # Least privilege: nothing reads secrets or writes configmaps.
    assert ("", "secrets") not in rules
    assert ("", "configmaps") not in rules
    assert "delete" not in rules[("headwater.io", "topics")]


def template_annotations(values: dict[str, Any]) -> dict[str, str]:
    sts = chart.broker_statefulset(chart.render(values))
    annotations: dict[str, str] = sts["spec"]["template"]["metadata"]["annotations"]
    return annotations


@pytest.mark.parametrize(
    ("values", "version"),
    [
        ({}, "0.1.0"),
        ({"image": {"tag": "0.3.0"}}, "0.3.0"),
        ({"image": {"tag": "0.3.0"}, "brokers": {"image": {"tag": "v0.4.1"}}}, "0.4.1"),
        ({"brokers": {"image": {"tag": "1.0.0rc1"}}}, "1.0.0rc1"),
        ({"brokers": {"image": {"tag": "latest"}}}, None),
        ({"brokers": {"image": {"tag": "0.4.1-debug"}}}, None),
    ],
    ids=["app-version", "image-tag", "broker-tag", "pre-release", "latest", "suffix"],
)
def test_pod_template_carries_the_broker_version(
    values: dict[str, Any], version: str | None
) -> None:
    """The roll waits for each broker to come back on this version; non-release tags omit it."""
    assert template_annotations(values).get("headwater.io/version") == version


@pytest.mark.parametrize(
    ("pinned", "annotation"),
    [(None, None), ("2", "2"), (3, "3"), (2.1, "2.1")],
    ids=["unset", "string", "int", "float"],
)
def test_pod_template_carries_the_pinned_protocol(pinned: Any, annotation: str | None) -> None:
    """The roll refuses protocol raises over older software, and downgrades, from this."""
    config = {} if pinned is None else {"inter.broker.protocol.version": pinned}
    annotations = template_annotations({"brokers": {"config": config}})
    assert annotations.get("headwater.io/inter-broker-protocol-version") == annotation
    if pinned is not None:
        props = chart.parse_properties(
            chart.broker_properties(chart.render({"brokers": {"config": config}}))
        )
        assert props["inter.broker.protocol.version"] == annotation


def test_rack_awareness_wiring() -> None:
    objs = chart.render({"brokers": {"rack": {"enabled": True}}})
    pod = chart.broker_statefulset(objs)["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    init_env = {e["name"]: e.get("value") for e in init["env"]}
    assert init_env["RACK_TARGET"] == "/etc/headwater/server.properties"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["config"]
    script = chart.one(objs, "ConfigMap", volumes["rack-script"]["configMap"]["name"])
    assert "def node_zone" in script["data"]["broker-rack.py"]
    # Only the init container sees an API token; the broker is allowed only `get nodes`.
    assert pod["automountServiceAccountToken"] is False
    assert all("api-token" not in str(c["volumeMounts"]) for c in pod["containers"])
    (role,) = chart.component(objs, "ClusterRole", "broker")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    assert chart.component(chart.render(), "ClusterRole", "broker") == []


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"brokers": {"replicas": "three"}}, "brokers/replicas"),
        ({"brokers": {"replicas": 0}}, "brokers/replicas"),
        ({"zookeeper": {"replicas": 2}}, "zookeeper/replicas"),
        ({"brokers": {"config": {"min.insync.replicas": 0}}}, "min.insync.replicas"),
        ({"brokers": {"config": {"log.retention.ms": "a week"}}}, "log.retention.ms"),
        ({"brokers": {"config": {"Bad Key": 1}}}, "Bad Key"),
        ({"brokers": {"replicaz": 3}}, "replicaz"),
        ({"zookeeper": {"external": "not a connect string"}}, "zookeeper/external"),
        ({"metrics": {"serviceMonitor": {"enabled": "yes"}}}, "serviceMonitor/enabled"),
        (
            {"brokers": {"config": {"transaction.state.log.num.partitions": 0}}},
            "transaction.state.log.num.partitions",
        ),
        (
            {"brokers": {"config": {"transaction.state.log.replication.factor": "three"}}},
            "transaction.state.log.replication.factor",
        ),
        (
            {"brokers": {"config": {"transaction.state.log.min.isr": 0}}},
            "transaction.state.log.min.isr",
        ),
        (
            {"brokers": {"config": {"transaction.max.timeout.ms": "15 minutes"}}},
            "transaction.max.timeout.ms",
        ),
    ],
    ids=[
        "type",
        "minimum",
        "even-ensemble",
        "isr",
        "config-type",
        "config-key",
        "typo",
        "external",
        "bool",
        "txn-partitions",
        "txn-rf-type",
        "txn-isr",
        "txn-timeout-type",
    ],
)
def test_schema_refuses_bad_values(values: dict[str, Any], named: str) -> None:
    assert named in chart.template_error(values)
    lint = chart.run_helm("lint", values)
    assert lint.returncode != 0
    assert named in lint.stdout + lint.stderr


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"brokers": {"replicas": 1}}, "default.replication.factor"),
        (
            {"brokers": {"config": {"min.insync.replicas": 3, "default.replication.factor": 2}}},
            "min.insync.replicas",
        ),
        ({"brokers": {"config": {"broker.id": 7}}}, "broker.id"),
    ],
    ids=["rf-above-brokers", "isr-above-rf", "broker-id"],
)
def test_templates_refuse_impossible_clusters(values: dict[str, Any], named: str) -> None:
    assert named in chart.template_error(values)


def test_readme_lists_every_value() -> None:
    readme = (chart.CHART_DIR / "README.md").read_text(encoding="utf-8")
    values = yaml.safe_load((chart.CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    leaves = ("config", "resources", "podSecurityContext", "nodeSelector", "labels")

    def paths(node: dict[str, Any], prefix: str = "") -> list[str]:
        out = []
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, dict) and value and key not in leaves:
                out += paths(value, path)
            else:
                out.append(path)
        return out

    missing = [p for p in paths(values) if f"| `{p}` |" not in readme]
    assert missing == []
    for key in values["brokers"]["config"]:
        assert f"| `{key}` |" in readme
