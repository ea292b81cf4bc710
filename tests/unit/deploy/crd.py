"""Offline checks of CustomResourceDefinitions and of custom resources against them.

The API server refuses a CRD whose schema is not *structural* and validates every custom
resource against it; neither happens without a cluster.  `structural_problems` applies the
structural rules of apiextensions.k8s.io/v1 that matter for hand-written schemas, and
`cr_errors` validates a custom resource with jsonschema after translating the Kubernetes
extensions (x-kubernetes-int-or-string, nullable) that plain JSON Schema lacks.  CEL rules
(x-kubernetes-validations) are not evaluated here: they need the API server.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.unit.deploy import chart

Schema = dict[str, Any]

# Keywords the API server refuses in a v1 CRD schema.
_FORBIDDEN = (
    "$ref",
    "$schema",
    "definitions",
    "dependencies",
    "patternProperties",
    "additionalItems",
    "id",
)
# Inside allOf/anyOf/oneOf/not only value validations may appear.
_NOT_IN_JUNCTORS = (
    "type",
    "additionalProperties",
    "description",
    "default",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-int-or-string",
)


def crd_files() -> list[Path]:
    return sorted((chart.CHART_DIR / "crds").glob("*.yaml"))


def load_crds() -> list[chart.Obj]:
    docs: list[chart.Obj] = []
    for path in crd_files():
        docs += [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    return docs


def crd_for(crds: list[chart.Obj], api_version: str, kind: str) -> chart.Obj | None:
    group, _, version = api_version.rpartition("/")
    for crd in crds:
        spec = crd["spec"]
        names_match = spec["group"] == group and spec["names"]["kind"] == kind
        if names_match and any(v["name"] == version for v in spec["versions"]):
            return crd
    return None


def version_schema(crd: chart.Obj, version: str) -> Schema:
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: Schema = v["schema"]["openAPIV3Schema"]
    return schema


def structural_problems(schema: Schema, path: str = "") -> list[str]:
    """Why ``schema`` is not a structural apiextensions.k8s.io/v1 schema ([] if it is)."""
    problems: list[str] = []
    where = path or "<root>"
    for key in _FORBIDDEN:
        if key in schema:
            problems.append(f"{where}: {key} is not allowed")
    if schema.get("uniqueItems") is True:
        problems.append(f"{where}: uniqueItems: true is not allowed")
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") is True
    if "type" not in schema and not (int_or_string or preserve):
        problems.append(f"{where}: has no type")
    if int_or_string and "type" in schema:
        problems.append(f"{where}: x-kubernetes-int-or-string must not have a type")
    if "properties" in schema and "additionalProperties" in schema:
        problems.append(f"{where}: properties and additionalProperties together")
    if schema.get("additionalProperties") is False:
        problems.append(f"{where}: additionalProperties must not be false")
    if schema.get("type") == "array":
        items = schema.get("items")
        if not isinstance(items, dict):
            problems.append(f"{where}: an array needs one items schema")
    if schema.get("x-kubernetes-list-type") == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        required = set(schema.get("items", {}).get("required", []))
        if not keys or not set(keys) <= required:
            problems.append(f"{where}: list-type map needs required list-map-keys")
    for key in schema.get("required", []):
        if "properties" in schema and key not in schema["properties"]:
            problems.append(f"{where}: required {key} is not a property")
    if not path and "metadata" in schema.get("properties", {}):
        meta = schema["properties"]["metadata"]
        extra = set(meta.get("properties", {})) - {"name", "generateName"}
        if meta.get("type") != "object" or extra:
            problems.append("metadata: may only be an object restricting name/generateName")
    for junctor in ("allOf", "anyOf", "oneOf", "not"):
        branches = schema.get(junctor)
        if branches is None:
            continue
        for branch in branches if isinstance(branches, list) else [branches]:
            bad = [k for k in _NOT_IN_JUNCTORS if k in branch]
            if bad:
                problems.append(f"{where}.{junctor}: may not set {', '.join(bad)}")
    for name, sub in schema.get("properties", {}).items():
        problems += structural_problems(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        problems += structural_problems(schema["additionalProperties"], f"{path}.*")
    if isinstance(schema.get("items"), dict):
        problems += structural_problems(schema["items"], f"{path}[]")
    return problems


def to_jsonschema(schema: Schema) -> Schema:
    """The OpenAPI v3 schema as plain JSON Schema, Kubernetes extensions translated."""
    out = copy.deepcopy(schema)
    if out.pop("x-kubernetes-int-or-string", False):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in out:
        out["properties"] = {k: to_jsonschema(v) for k, v in out["properties"].items()}
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = to_jsonschema(out["additionalProperties"])
    if isinstance(out.get("items"), dict):
        out["items"] = to_jsonschema(out["items"])
    # Unknown fields are pruned by the API server, not refused; a test that wants to
    # catch typos says so (see cr_errors(strict=True)).
    return out


def _strict(schema: Schema) -> Schema:
    out = copy.deepcopy(schema)
    closable = out.get("type") == "object" and out.get("properties")
    open_ended = "additionalProperties" in out or out.get("x-kubernetes-preserve-unknown-fields")
    if closable and not open_ended:
        out["additionalProperties"] = False
    if "properties" in out:
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    return out


def cr_errors(crd: chart.Obj, obj: chart.Obj, *, strict: bool = False) -> list[str]:
    """Violations of ``obj`` against its CRD version's schema (strict: unknown fields too)."""
    version = obj["apiVersion"].rpartition("/")[2]
    schema = to_jsonschema(version_schema(crd, version))
    if strict:
        schema = _strict(schema)
        # Every object has these; metadata is validated by the API server itself.
        schema["properties"].update(
            apiVersion={"type": "string"}, kind={"type": "string"}, metadata={"type": "object"}
        )
    validator = jsonschema.Draft7Validator(schema)
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in validator.iter_errors(obj)
    ]
