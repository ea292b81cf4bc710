"""The chart turns ZooKeeper ACLs on (Kafka's ``zookeeper.set.acl``), without leaking the password.

By default (``zookeeper.acl.enabled``) server.properties has ``zookeeper.set.acl=true``
and ``zookeeper.digest.username``, never the password: the broker container takes it as
``HEADWATER_ZOOKEEPER_DIGEST_PASSWORD`` (the environment form of
``zookeeper.digest.password``) from a Secret, the chart's own (a random password, kept on
uninstall) or ``zookeeper.acl.existingSecret``.  The password is in no ConfigMap, no
command or args, no other container, and not in the pod template's checksum input.
A password in ``brokers.config`` (it would land in the ConfigMap) is refused.
``zookeeper.acl.enabled=false`` renders none of it; with ``zookeeper.external`` the brokers
still authenticate.  ZooKeeper's own pods are unchanged (its digest provider needs no
configuration), and its NetworkPolicy still admits only brokers and peers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.deploy import chart

SECRET = "hw-headwater-zookeeper-digest"
ENV = "HEADWATER_ZOOKEEPER_DIGEST_PASSWORD"


def props(values: dict[str, Any]) -> dict[str, str]:
    return chart.parse_properties(chart.broker_properties(chart.render(values)))


def password_env(objs: list[chart.Obj]) -> list[chart.Obj]:
    return [e for e in chart.broker_container(objs).get("env", []) if e["name"] == ENV]


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plaintext"])
def test_acls_are_on_by_default(tls: bool) -> None:
    objs = chart.render({"tls": {"enabled": tls}})
    p = chart.parse_properties(chart.broker_properties(objs))
    assert p["zookeeper.set.acl"] == "true"
    assert p["zookeeper.digest.username"] == "headwater"
    assert "zookeeper.digest.password" not in p
    (var,) = password_env(objs)
    assert var["valueFrom"] == {"secretKeyRef": {"name": SECRET, "key": "password"}}
    password = chart.secret_data(objs, SECRET)["password"]
    assert len(password) == 32 and password.isalnum()
    # What the broker will read: the password, from the Secret, by its config key's env name.
    env = chart.broker_env(objs, hostname="hw-headwater-broker-0")
    assert env[ENV] == password


def test_the_generated_secret_is_kept_and_fresh_per_render() -> None:
    objs = chart.render()
    secret = chart.one(objs, "Secret", SECRET)
    assert secret["type"] == "Opaque"
    # ZooKeeper's volumes outlive the release: a new password would lock brokers out.
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert secret["metadata"]["labels"]["app.kubernetes.io/instance"] == "hw"
    # `helm template` cannot look up the live Secret, so each render makes its own password
    # (lookup keeps the live one on upgrades; see the Kubernetes tier).
    other = chart.render({"brokers": {"config": {"num.partitions": 4}}})
    assert (
        chart.secret_data(other, SECRET)["password"] != chart.secret_data(objs, SECRET)["password"]
    )


def test_the_password_is_nowhere_but_its_secret() -> None:
    objs = chart.render()
    password = chart.secret_data(objs, SECRET)["password"]
    for obj in objs:
        if obj["kind"] == "Secret" and obj["metadata"]["name"] == SECRET:
            continue
        assert password not in json.dumps(obj), f"{obj['kind']}/{obj['metadata']['name']}"
    container = chart.broker_container(objs)
    assert not any("digest" in a for a in container["command"] + container["args"])
    # Only the broker container gets it: not the operator, not ZooKeeper.
    for workload, pod in chart.pod_templates(objs):
        for c in pod.get("containers", []) + pod.get("initContainers", []):
            names = {e["name"] for e in c.get("env", [])}
            has = ENV in names
            assert has == (c["name"] == "broker"), f"{workload['metadata']['name']}/{c['name']}"


def test_existing_secret() -> None:
    objs = chart.render({"zookeeper": {"acl": {"existingSecret": "zk-creds", "username": "hw"}}})
    assert chart.find(objs, "Secret", SECRET) == []
    (var,) = password_env(objs)
    assert var["valueFrom"]["secretKeyRef"] == {"name": "zk-creds", "key": "password"}
    assert (
        chart.parse_properties(chart.broker_properties(objs))["zookeeper.digest.username"] == "hw"
    )
    env = chart.broker_env(
        objs, hostname="hw-headwater-broker-0", secrets={"zk-creds": {"password": "pw"}}
    )
    assert env[ENV] == "pw"


def test_switched_off() -> None:
    objs = chart.render({"zookeeper": {"acl": {"enabled": False}}})
    p = chart.parse_properties(chart.broker_properties(objs))
    assert not [k for k in p if k.startswith(("zookeeper.set.acl", "zookeeper.digest"))]
    assert password_env(objs) == []
    assert chart.find(objs, "Secret", SECRET) == []


def test_external_zookeeper_keeps_acls() -> None:
    objs = chart.render({"zookeeper": {"external": "zk.example:2181/hw"}})
    assert chart.parse_properties(chart.broker_properties(objs))["zookeeper.set.acl"] == "true"
    assert len(password_env(objs)) == 1
    chart.one(objs, "Secret", SECRET)


def test_user_config_may_override_the_username() -> None:
    """brokers.config wins over computed keys, as for every other key."""
    p = props({"brokers": {"config": {"zookeeper.digest.username": "legacy"}}})
    assert p["zookeeper.digest.username"] == "legacy"


def test_the_username_rolls_the_brokers() -> None:
    """It is in server.properties, so in the checksum; the password is not."""

    def checksum(values: dict[str, Any]) -> str:
        sts = chart.broker_statefulset(chart.render(values))
        value: str = sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    assert checksum({}) != checksum({"zookeeper": {"acl": {"username": "other"}}})
    # Two renders differ in their generated password, not in the checksum.
    assert checksum({}) == checksum({"zookeeper": {"acl": {"enabled": True}}})


def test_zookeeper_pods_and_policies_are_unchanged() -> None:
    on, off = chart.render(), chart.render({"zookeeper": {"acl": {"enabled": False}}})
    for kind in ("StatefulSet", "NetworkPolicy"):
        assert chart.component(on, kind, "zookeeper") == chart.component(off, kind, "zookeeper")


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"zookeeper": {"acl": {"enabled": "yes"}}}, "acl/enabled"),
        ({"zookeeper": {"acl": {"username": "a:b"}}}, "acl/username"),
        ({"zookeeper": {"acl": {"username": ""}}}, "acl/username"),
        ({"zookeeper": {"acl": {"password": "x"}}}, "password"),
    ],
    ids=["bool", "colon", "empty", "no-password-value"],
)
def test_schema_refuses_bad_values(values: dict[str, Any], named: str) -> None:
    assert named in chart.template_error(values)


@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_a_password_in_broker_config_is_refused(enabled: bool) -> None:
    values = {
        "zookeeper": {"acl": {"enabled": enabled}},
        "brokers": {"config": {"zookeeper.digest.password": "in-a-configmap"}},
    }
    error = chart.template_error(values)
    assert "zookeeper.acl.existingSecret" in error
    assert "in-a-configmap" not in error


@pytest.mark.parametrize(
    "values",
    [{}, {"zookeeper": {"acl": {"existingSecret": "zk-creds"}}}],
    ids=["generated", "existing"],
)
def test_objects_validate(values: dict[str, Any]) -> None:
    problems: list[str] = []
    for obj in chart.render(values):
        if chart.knows_kind(obj):
            label = f"{obj['kind']}/{obj['metadata']['name']}"
            problems += [f"{label}: {e}" for e in chart.k8s_errors(obj)]
    assert problems == []
