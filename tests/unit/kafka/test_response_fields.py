"""Every response the Kafka listener builds has, at every version it serves, the fields
that version requires.

The handlers build responses with :func:`headwater.kafka.protocol.build`, passing the
fields of every version and keeping those each version has; a field a version requires
and no handler passes would fail only when a client asks for that version.  This reads
the handlers' ``build(module.<Type>, field=...)`` calls (their source, by ``ast``) and
checks them against every response type of every version in ``SUPPORTED``.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from collections import defaultdict

import pytest
from headwater.kafka import (
    acl_apis,
    admin_apis,
    apis,
    cluster_apis,
    coordinators,
    group_apis,
    protocol,
    quota_apis,
    txn_apis,
    user_apis,
)


def _passed_fields() -> dict[str, set[str]]:
    """Entity type name -> the keyword names some ``build(module.<Name>, ...)`` passes."""
    passed: dict[str, set[str]] = defaultdict(set)
    for module in (
        apis,
        group_apis,
        admin_apis,
        acl_apis,
        cluster_apis,
        coordinators,
        txn_apis,
        user_apis,
        quota_apis,
        protocol,
    ):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "build"
                and node.args
                and isinstance(node.args[0], ast.Attribute)
            ):
                passed[node.args[0].attr].update(k.arg for k in node.keywords if k.arg)
    return passed


PASSED = _passed_fields()


def _versions() -> list[tuple[int, int]]:
    return [
        (key, version)
        for key, (low, high) in sorted(protocol.SUPPORTED.items())
        for version in range(low, high + 1)
    ]


@pytest.mark.parametrize(("api_key", "version"), _versions())
def test_required_fields_are_passed(api_key: int, version: int) -> None:
    module = protocol.response_module(api_key, version)
    top = protocol.load_response_schema(api_key, version).__name__
    for name, entity in vars(module).items():
        if not (dataclasses.is_dataclass(entity) and entity.__module__ == module.__name__):
            continue
        passed = PASSED.get(name, set())
        if name == top and name == "ApiVersionsResponse":
            passed = PASSED["ApiVersionsResponse"] | {"error_code", "api_keys", "throttle_time"}
        required = {
            f.name
            for f in dataclasses.fields(entity)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        built = name in PASSED or name == top
        if not built:
            continue  # a nested type no handler builds (left empty)
        missing = required - passed
        assert not missing, f"{protocol.API_NAMES[api_key]} v{version} {name}: {missing}"


def test_the_source_scan_finds_the_handlers_builds() -> None:
    assert {"MetadataResponseBroker", "FetchResponse", "JoinGroupResponse"} <= set(PASSED)
