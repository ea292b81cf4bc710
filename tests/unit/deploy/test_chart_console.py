"""The chart's optional Headwater Console (console.enabled): a Deployment and Service that
run `headwater console` against the release's bootstrap as a User like any client.

The container's start script is run for real (with `headwater` replaced by a stub that
prints its arguments and the User's Secret files in a temporary directory), and the
command config it writes is parsed by the client's own parser, so a script that writes a
config the console would refuse fails here.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from headwater.client.transport.security import from_java_properties

from tests.unit.deploy import chart

USER_DIR = "/etc/headwater/console-user"
CONSOLE = f"{chart.RELEASE}-headwater-console"


def console_values(**extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {"console": {"enabled": True, "userSecret": "console-user"}}
    for key, value in extra.items():
        if key == "console":
            values["console"].update(value)
        else:
            values[key] = value
    return values


def deployment(objs: list[chart.Obj]) -> chart.Obj:
    return chart.one(objs, "Deployment", CONSOLE)


def container(objs: list[chart.Obj]) -> chart.Obj:
    containers: list[chart.Obj] = deployment(objs)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def run_start_script(
    objs: list[chart.Obj], files: dict[str, str], tmp_path: Path
) -> tuple[list[str], dict[str, str]]:
    """Run the container's script with the Secret's ``files``: (headwater's args, the
    command config it was given, parsed)."""
    c = container(objs)
    assert c["command"] == ["sh", "-c"]
    user = tmp_path / "user"
    user.mkdir()
    for name, text in files.items():
        (user / name).write_text(text)
    root = tmp_path / "root"
    root.mkdir()
    script = c["args"][0].replace("/tmp/", f"{root}/").replace(USER_DIR, str(user))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "headwater"
    stub.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        ["sh", "-c", script], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    args = done.stdout.splitlines()
    config = Path(args[args.index("--command-config") + 1])
    return args, chart.parse_properties(config.read_text())


def test_off_by_default() -> None:
    objs = chart.render()
    for kind in ("Deployment", "Service", "NetworkPolicy"):
        assert chart.component(objs, kind, "console") == []


def test_service_selects_the_console_pod_and_port() -> None:
    objs = chart.render(console_values(console={"port": 8181, "service": {"port": 80}}))
    (svc,) = chart.component(objs, "Service", "console")
    pod_labels = deployment(objs)["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 80 and port["targetPort"] == "http"
    assert container(objs)["ports"] == [{"name": "http", "containerPort": 8181}]


def test_tls_user_connects_with_its_certificate(tmp_path: Path) -> None:
    objs = chart.render(console_values())
    c = container(objs)
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["HEADWATER_BOOTSTRAP"] == (
        f"{chart.RELEASE}-headwater-bootstrap.{chart.NAMESPACE}.svc.cluster.local:9092"
    )
    volumes = deployment(objs)["spec"]["template"]["spec"]["volumes"]
    assert {"secretName": "console-user", "defaultMode": 0o400} in [
        v.get("secret") for v in volumes
    ]
    args, props = run_start_script(
        objs, {"ca.crt": "CA", "user.crt": "CERT\n", "user.key": "KEY\n"}, tmp_path
    )
    assert args[0] == "console"
    assert "--read-only" in args  # console.readOnly defaults to true
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert props["security.protocol"] == "SSL"
    keystore = Path(props["ssl.keystore.location"])
    assert keystore.read_text() == "KEY\nCERT\n"  # Kafka's PEM keystore: key, then chain
    security = from_java_properties(props)
    assert security.security_protocol == "SSL"
    assert security.ssl_cafile is not None and security.ssl_cafile.endswith("user/ca.crt")


def test_scram_user_password_stays_in_the_secret(tmp_path: Path) -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="console" password="s3cret";'
    )
    objs = chart.render(
        console_values(tls={"clientAuthentication": "scram-sha-512"}, console={"readOnly": False})
    )
    assert "s3cret" not in str(deployment(objs))
    args, props = run_start_script(objs, {"ca.crt": "CA", "sasl.jaas.config": jaas}, tmp_path)
    assert "--read-only" not in args
    security = from_java_properties(props)
    assert security.security_protocol == "SASL_SSL"
    assert security.sasl_mechanism == "SCRAM-SHA-512"
    assert (security.sasl_plain_username, security.sasl_plain_password) == ("console", "s3cret")


def test_plaintext_cluster_needs_no_user(tmp_path: Path) -> None:
    objs = chart.render({"tls": {"enabled": False}, "console": {"enabled": True}})
    assert all("secret" not in v for v in deployment(objs)["spec"]["template"]["spec"]["volumes"])
    _, props = run_start_script(objs, {}, tmp_path)
    assert from_java_properties(props).security_protocol == "PLAINTEXT"


def test_a_user_secret_is_required_when_clients_authenticate() -> None:
    err = chart.template_error({"console": {"enabled": True}})
    assert "console.userSecret" in err and "tls" in err


@pytest.mark.parametrize(
    "bad",
    [
        {"console": {"enabled": True, "userSecret": "u", "port": 0}},
        {"console": {"enabled": True, "userSecret": "u", "readonly": True}},
        {"console": {"enabled": "yes"}},
        {"console": {"service": {"type": "Ingress"}}},
        {"console": {"kubernetesAccess": "yes"}},
    ],
    ids=["port-zero", "unknown-key", "enabled-not-boolean", "service-type", "access-not-boolean"],
)
def test_schema_refuses_bad_values(bad: dict[str, Any]) -> None:
    assert "console" in chart.template_error(bad)


def test_resources_and_hardening() -> None:
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}}
    objs = chart.render(console_values(console={"resources": resources}))
    c = container(objs)
    assert c["resources"] == resources
    assert c["securityContext"]["readOnlyRootFilesystem"] is True


READ = {"get", "list", "watch"}


def test_the_console_reads_the_operators_progress_with_a_read_only_role() -> None:
    objs = chart.render(console_values())
    spec = deployment(objs)["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == CONSOLE
    assert spec["automountServiceAccountToken"] is True
    account = chart.one(objs, "ServiceAccount", CONSOLE)
    assert account["automountServiceAccountToken"] is False  # only the console pod mounts it
    brokers = chart.broker_statefulset(objs)["metadata"]["name"]
    env = {e["name"]: e["value"] for e in container(objs)["env"]}
    assert env["HEADWATER_CONSOLE_BROKER_STATEFULSET"] == brokers
    assert (
        env["HEADWATER_CONSOLE_K8S_NAMESPACE"]
        == chart.one(objs, "Role", CONSOLE)["metadata"]["namespace"]
    )
    rules = chart.one(objs, "Role", CONSOLE)["rules"]
    assert {(g, r) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]} == {
        ("apps", "statefulsets"),
        ("", "pods"),
    }
    for rule in rules:
        assert set(rule["verbs"]) <= READ, rule
        if rule["resources"] == ["statefulsets"]:
            assert rule["resourceNames"] == [brokers]
    binding = chart.one(objs, "RoleBinding", CONSOLE)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": CONSOLE,
    }
    assert [s["name"] for s in binding["subjects"]] == [CONSOLE]
    bound = [
        o
        for kind in ("RoleBinding", "ClusterRoleBinding")
        for o in chart.find(objs, kind)
        if any(s.get("name") == CONSOLE for s in o.get("subjects") or ())
    ]
    assert bound == [binding]  # nothing else is granted to the console


def test_without_kubernetes_access_no_token_and_no_role() -> None:
    objs = chart.render(console_values(console={"kubernetesAccess": False}))
    spec = deployment(objs)["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in spec
    assert not chart.find(objs, "Role", CONSOLE)
    assert not chart.find(objs, "ServiceAccount", CONSOLE)
    assert "HEADWATER_CONSOLE_BROKER_STATEFULSET" not in str(container(objs)["env"])


def test_network_policies_let_the_console_reach_the_brokers() -> None:
    only_app = [{"podSelector": {"matchLabels": {"app": "x"}}}]
    objs = chart.render(console_values(networkPolicy={"clientFrom": only_app}))
    pod_labels = deployment(objs)["spec"]["template"]["metadata"]["labels"]
    broker_policy = chart.one(objs, "NetworkPolicy", f"{chart.RELEASE}-headwater-broker")
    client_rule = next(
        r
        for r in broker_policy["spec"]["ingress"]
        if {"port": 9092, "protocol": "TCP"} in r.get("ports", [])
    )
    selectors = [p["podSelector"]["matchLabels"] for p in client_rule["from"]]
    assert {"app": "x"} in selectors
    assert any(s.items() <= pod_labels.items() and len(s) > 1 for s in selectors)
    (own,) = chart.component(objs, "NetworkPolicy", "console")
    assert own["spec"]["ingress"][0]["ports"] == [{"port": 8080, "protocol": "TCP"}]

    # Without console.enabled the brokers' client port is not opened to it.
    objs = chart.render({"networkPolicy": {"clientFrom": only_app}})
    broker_policy = chart.one(objs, "NetworkPolicy", f"{chart.RELEASE}-headwater-broker")
    assert "console" not in str(broker_policy)
