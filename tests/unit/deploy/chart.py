"""Render the Helm chart and pick it apart: the one place tests touch `helm`.

Kubernetes cannot run on our machines, so the chart's tests render it with `helm template`
and check what comes out.  This module is shared by them and meant for reuse by tests that
go further, e.g. one that takes the broker container's command, arguments, environment
and server.properties exactly as rendered and starts real broker processes with them::

    objs = chart.render({"brokers": {"replicas": 1}})
    container = chart.broker_container(objs)        # command/args/env of the pod spec
    props = chart.broker_properties(objs)            # server.properties text
    env = chart.broker_env(objs, hostname="hw-headwater-broker-0", namespace="default")

`helm` is found on PATH or at .tools/bin/helm (scripts/install-system-deps.sh builds it).
Without it the tests skip, saying why, except under CI (env CI set), where they fail.

It also validates objects offline: built-in kinds against the Kubernetes OpenAPI schemas
shipped by the kubernetes-validate package (strict: unknown fields are errors), custom
resources against the openAPIV3Schema of their CustomResourceDefinition.
"""

from __future__ import annotations

import base64
import copy
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import yaml

REPO = Path(__file__).resolve().parents[3]
CHART_DIR = REPO / "deploy" / "helm" / "headwater"
RELEASE = "hw"
NAMESPACE = "headwater"
# A recent release whose schemas kubernetes-validate ships (grpc probes are GA since 1.27).
KUBE_VERSION = "1.33.0"
HELM_TIMEOUT_S = 60

Obj = dict[str, Any]
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ----------------------------------------------------------------------------- helm


def helm_binary() -> str | None:
    """Path of `helm`: PATH first, then the repository's .tools/bin."""
    found = shutil.which("helm")
    if found:
        return found
    local = REPO / ".tools" / "bin" / "helm"
    return str(local) if os.access(local, os.X_OK) else None


def require_helm() -> str:
    """`helm`'s path; skips the test without it, or fails it under CI."""
    helm = helm_binary()
    if helm is None:
        reason = "helm not found on PATH nor at .tools/bin/helm (run `make system-deps`)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return helm


def run_helm(
    command: str, values: Mapping[str, Any] | None = None, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Run `helm <command>` on the chart with ``values`` as a values file (types kept)."""
    helm = require_helm()
    with tempfile.TemporaryDirectory(prefix="hw-chart-") as tmp:
        values_file = Path(tmp) / "values.yaml"
        values_file.write_text(yaml.safe_dump(dict(values or {})), encoding="utf-8")
        args = [helm, command]
        if command == "template":
            args += [RELEASE, str(CHART_DIR), "--namespace", NAMESPACE, "--include-crds"]
        else:
            args += [str(CHART_DIR)]
        args += ["--kube-version", KUBE_VERSION, "-f", str(values_file), *extra]
        return subprocess.run(
            args, capture_output=True, text=True, timeout=HELM_TIMEOUT_S, check=False
        )


@functools.lru_cache(maxsize=64)
def _template(values_json: str) -> str:
    done = run_helm("template", json.loads(values_json))
    if done.returncode != 0:
        raise AssertionError(f"helm template failed:\n{done.stderr}")
    return done.stdout


def render(values: Mapping[str, Any] | None = None) -> list[Obj]:
    """Every object `helm template` renders (CRDs included) for ``values``, parsed."""
    text = _template(json.dumps(values or {}, sort_keys=True))
    return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc]


def template_error(values: Mapping[str, Any]) -> str:
    """stderr of a `helm template` that must fail; raises if it succeeds."""
    done = run_helm("template", values)
    if done.returncode == 0:
        raise AssertionError(f"helm template accepted values it should refuse: {values}")
    return done.stderr


# ------------------------------------------------------------------------ accessors


def find(objs: list[Obj], kind: str, name: str | None = None) -> list[Obj]:
    """Objects of ``kind`` (and ``name``, if given)."""
    return [
        o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objs: list[Obj], kind: str, name: str) -> Obj:
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def component(objs: list[Obj], kind: str, name: str) -> list[Obj]:
    """Objects of ``kind`` labelled app.kubernetes.io/component=``name``."""
    return [
        o
        for o in find(objs, kind)
        if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == name
    ]


def broker_statefulset(objs: list[Obj]) -> Obj:
    (sts,) = component(objs, "StatefulSet", "broker")
    return sts


def broker_container(objs: list[Obj]) -> Obj:
    """The broker container of the broker pod template (command, args, env, ports...)."""
    pod = broker_statefulset(objs)["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "broker"]
    return copy.deepcopy(container)


def broker_properties(objs: list[Obj]) -> str:
    """server.properties as rendered into the ConfigMap the broker pods mount."""
    pod = broker_statefulset(objs)["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    # With rack awareness the ConfigMap is the init container's template.
    source = volumes.get("config-template") or volumes["config"]
    cm = one(objs, "ConfigMap", source["configMap"]["name"])
    text: str = cm["data"]["server.properties"]
    return text


def parse_properties(text: str) -> dict[str, str]:
    """A simple Java-properties reader (key=value lines, # and ! comments)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {raw!r}"
        out[key.strip()] = value.strip()
    return out


def secret_data(objs: list[Obj], name: str) -> dict[str, str]:
    """The decoded ``data`` of the Secret ``name`` the chart renders."""
    secret = one(objs, "Secret", name)
    return {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}


def broker_env(
    objs: list[Obj],
    *,
    hostname: str,
    namespace: str = NAMESPACE,
    pod_ip: str = "127.0.0.1",
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, str]:
    """The broker container's environment with downward-API fields resolved as a kubelet
    would, and ``secretKeyRef`` values from ``secrets`` (name -> decoded data) or else from the
    Secrets the chart renders."""
    fields = {
        "metadata.namespace": namespace,
        "metadata.name": hostname,
        "status.podIP": pod_ip,
        "spec.nodeName": "local-node",
    }
    env = {"HOSTNAME": hostname}
    for var in broker_container(objs).get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        elif "secretKeyRef" in var["valueFrom"]:
            ref = var["valueFrom"]["secretKeyRef"]
            given = (secrets or {}).get(ref["name"])
            data = given if given is not None else secret_data(objs, ref["name"])
            env[var["name"]] = data[ref["key"]]
        else:
            env[var["name"]] = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def expand_env(value: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` references replaced from ``env`` (as the broker does when it reads config)."""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env[m.group(1)], value)


def pod_templates(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(workload, pod spec) for every StatefulSet and Deployment."""
    for o in objs:
        if o["kind"] in ("StatefulSet", "Deployment"):
            yield o, o["spec"]["template"]["spec"]


# ---------------------------------------------------------------------- validation


def _schema_dir() -> Path:
    spec = importlib.util.find_spec("kubernetes_validate")
    assert spec is not None and spec.submodule_search_locations, "kubernetes-validate missing"
    base = Path(next(iter(spec.submodule_search_locations))) / "kubernetes-json-schema"
    return base / f"v{KUBE_VERSION}-local-strict"


@functools.cache
def _definitions() -> referencing.Registry[Any]:
    defs = json.loads((_schema_dir() / "_definitions.json").read_text(encoding="utf-8"))
    resource: referencing.Resource[Any] = referencing.Resource.from_contents(defs)
    # The per-kind schemas refer to "/api/_definitions.json#/$defs/...", resolved against
    # their own $id; the definitions carry the matching $id.
    registry: referencing.Registry[Any] = resource @ referencing.Registry()
    return registry


@functools.cache
def _kind_validator(kind: str, api_version: str) -> jsonschema.protocols.Validator | None:
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = _schema_dir() / f"{kind.lower()}-{group_version}.json"
    if not path.exists():
        return None
    schema = json.loads(path.read_text(encoding="utf-8"))
    validator: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(
        schema, registry=_definitions()
    )
    return validator


def knows_kind(obj: Obj) -> bool:
    """Whether the Kubernetes schemas include ``obj``'s kind (not a custom resource)."""
    return _kind_validator(obj["kind"], obj["apiVersion"]) is not None


def k8s_errors(obj: Obj) -> list[str]:
    """Schema violations of a built-in kind, as 'path: message' strings."""
    validator = _kind_validator(obj["kind"], obj["apiVersion"])
    assert validator is not None, f"no Kubernetes schema for {obj['apiVersion']} {obj['kind']}"
    return [
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
