"""The User CRD is structural and refuses invalid Users before the operator sees them.

Good Users (SCRAM with ACLs of every resource type, TLS, no authentication) validate
against the CRD's openAPIV3Schema; bad ones (an unknown authentication type, an unknown
resource type, pattern or operation, no operations, an unknown permission, an unknown
field) are refused naming the field.  The operator refuses the rest with a condition
(tests/unit/operator/test_user_plan.py).  CEL rules are checked by the API server only.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.deploy import chart, crd


def user_crd() -> chart.Obj:
    found = crd.crd_for(crd.load_crds(), "headwater.io/v1", "User")
    assert found is not None
    return found


def user(**spec: Any) -> chart.Obj:
    return {
        "apiVersion": "headwater.io/v1",
        "kind": "User",
        "metadata": {"name": "alice", "namespace": "default"},
        "spec": spec,
    }


def test_user_crd_names_and_status() -> None:
    definition = user_crd()
    assert definition["metadata"]["name"] == "users.headwater.io"
    assert definition["spec"]["names"]["plural"] == "users"
    assert definition["spec"]["scope"] == "Namespaced"
    (version,) = definition["spec"]["versions"]
    assert version["subresources"] == {"status": {}}
    assert chart.k8s_errors(definition) == []
    assert crd.structural_problems(version["schema"]["openAPIV3Schema"]) == []
    # The chart installs it with the rest of crds/.
    assert chart.find(chart.render(), "CustomResourceDefinition", "users.headwater.io")


GOOD_ACLS = [
    {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]},
    {
        "resource": {"type": "group", "name": "app-", "patternType": "prefix"},
        "operations": ["Read"],
        "type": "allow",
    },
    {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"], "host": "*"},
    {
        "resource": {"type": "transactionalId", "name": "tx"},
        "operations": ["Write"],
        "type": "deny",
        "host": "10.0.0.1",
    },
]


@pytest.mark.parametrize(
    "spec",
    [
        {
            "authentication": {"type": "scram-sha-512"},
            "authorization": {"type": "simple", "acls": GOOD_ACLS},
        },
        {"authentication": {"type": "tls"}},
        {"authorization": {"type": "simple", "acls": []}},
        {},
        {"quotas": {"producerByteRate": 1048576, "consumerByteRate": 0, "requestPercentage": 55}},
        {"quotas": {"controllerMutationRate": 10}},
    ],
    ids=["scram-acls", "tls", "acls-only", "empty", "quotas", "mutation-rate-kept-for-refusal"],
)
def test_good_users_validate(spec: dict[str, Any]) -> None:
    assert crd.cr_errors(user_crd(), user(**spec), strict=True) == []


def bad_acl(**change: Any) -> dict[str, Any]:
    acl: dict[str, Any] = {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read"]}
    acl.update(change)
    return {"authorization": {"type": "simple", "acls": [acl]}}


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ({"authentication": {"type": "plain"}}, "authentication.type"),
        ({"authentication": {}}, "authentication"),
        ({"authorization": {"type": "opa"}}, "authorization.type"),
        (bad_acl(resource={"type": "user", "name": "x"}), "resource.type"),
        (bad_acl(resource={"type": "topic", "name": "x", "patternType": "glob"}), "patternType"),
        (bad_acl(resource={"type": "topic", "name": ""}), "resource.name"),
        (bad_acl(operations=[]), "operations"),
        (bad_acl(operations=["Fly"]), "operations.0"),
        (bad_acl(type="maybe"), "acls.0.type"),
        (bad_acl(colour="red"), "colour"),
        ({"authentication": {"type": "tls"}, "password": "x"}, "password"),
        ({"quotas": {"producerByteRate": -1}}, "producerByteRate"),
        ({"quotas": {"consumerByteRate": 1.5}}, "consumerByteRate"),
        ({"quotas": {"byteRate": 5}}, "byteRate"),
    ],
    ids=[
        "auth-type",
        "auth-no-type",
        "authz-type",
        "resource-type",
        "pattern",
        "empty-name",
        "no-operations",
        "operation",
        "permission",
        "unknown-acl-field",
        "unknown-field",
        "negative-quota",
        "fractional-byte-rate",
        "unknown-quota",
    ],
)
def test_bad_users_are_refused_naming_the_field(spec: dict[str, Any], named: str) -> None:
    errors = crd.cr_errors(user_crd(), user(**spec), strict=True)
    assert errors and any(named in e for e in errors), errors
