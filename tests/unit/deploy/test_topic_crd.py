"""The Topic CRD is a valid structural schema that accepts good Topics and refuses bad ones.

Each CRD in the chart's crds/ folder validates as a CustomResourceDefinition against the
Kubernetes schema and passes the structural-schema rules the API server enforces; the
Topic CRD has the names, version, status subresource and printer columns the operator and
users rely on; and sample Topic resources are validated with jsonschema against the CRD's
openAPIV3Schema: good ones pass, bad ones (no partitions, zero partitions, 40000 replicas,
an illegal topic name, wrong types, an unknown field) fail, naming the field.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.deploy import chart, crd


def topic_crd() -> chart.Obj:
    found = crd.crd_for(crd.load_crds(), "headwater.io/v1", "Topic")
    assert found is not None
    return found


def topic(**spec: Any) -> chart.Obj:
    return {
        "apiVersion": "headwater.io/v1",
        "kind": "Topic",
        "metadata": {"name": "orders", "namespace": "default"},
        "spec": spec,
    }


def test_crds_are_valid_and_structural() -> None:
    crds = crd.load_crds()
    assert {c["metadata"]["name"] for c in crds} == {
        "topics.headwater.io",
        "users.headwater.io",
        "kopfpeerings.kopf.dev",
        "clusterkopfpeerings.kopf.dev",
    }
    for definition in crds:
        assert chart.k8s_errors(definition) == []
        for version in definition["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            assert crd.structural_problems(schema) == [], definition["metadata"]["name"]


def test_structural_check_catches_violations() -> None:
    schema = copy.deepcopy(crd.version_schema(topic_crd(), "v1"))
    spec = schema["properties"]["spec"]
    del spec["properties"]["partitions"]["type"]
    spec["additionalProperties"] = {"type": "string"}
    spec["properties"]["tags"] = {"type": "array"}
    problems = crd.structural_problems(schema)
    assert any(".spec.partitions: has no type" in p for p in problems)
    assert any("properties and additionalProperties" in p for p in problems)
    assert any(".spec.tags: an array needs one items schema" in p for p in problems)


def test_topic_crd_names_and_columns() -> None:
    definition = topic_crd()
    spec = definition["spec"]
    assert definition["metadata"]["name"] == "topics.headwater.io"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["plural"] == "topics"
    assert spec["names"]["singular"] == "topic"
    assert spec["names"]["shortNames"] == ["hwt"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Partitions"] == ".spec.partitions"
    assert columns["Replicas"] == ".spec.replicas"
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Age"] == ".metadata.creationTimestamp"
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status) == {
        "conditions",
        "observedGeneration",
        "topicName",
        "partitions",
        "replicas",
    }
    condition = status["conditions"]["items"]["properties"]
    assert set(condition) == {"type", "status", "reason", "message", "lastTransitionTime"}


GOOD = {
    "minimal": topic(partitions=1, replicas=1),
    "named": topic(topicName="Orders_v2.eu-west", partitions=12, replicas=3),
    "config": topic(
        partitions=6,
        replicas=3,
        config={"retention.ms": 604800000, "cleanup.policy": "compact", "x": "true"},
    ),
    "longest-name": topic(topicName="a" * 249, partitions=1, replicas=32767),
}
BAD = {
    "no-partitions": (topic(replicas=1), "partitions"),
    "zero-partitions": (topic(partitions=0, replicas=1), "spec.partitions"),
    "too-many-replicas": (topic(partitions=1, replicas=40000), "spec.replicas"),
    "zero-replicas": (topic(partitions=1, replicas=0), "spec.replicas"),
    "slash-in-name": (topic(topicName="a/b", partitions=1, replicas=1), "spec.topicName"),
    "space-in-name": (topic(topicName="my topic", partitions=1, replicas=1), "spec.topicName"),
    "empty-name": (topic(topicName="", partitions=1, replicas=1), "spec.topicName"),
    "long-name": (topic(topicName="a" * 250, partitions=1, replicas=1), "spec.topicName"),
    "string-partitions": (topic(partitions="3", replicas=1), "spec.partitions"),
    "float-replicas": (topic(partitions=1, replicas=1.5), "spec.replicas"),
    "config-list": (topic(partitions=1, replicas=1, config=["a"]), "spec.config"),
    "config-bool": (topic(partitions=1, replicas=1, config={"x": True}), "spec.config.x"),
    "config-nested": (topic(partitions=1, replicas=1, config={"x": {"y": 1}}), "spec.config.x"),
    "no-spec": ({"apiVersion": "headwater.io/v1", "kind": "Topic", "metadata": {}}, "spec"),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_topics_pass(name: str) -> None:
    assert crd.cr_errors(topic_crd(), GOOD[name], strict=True) == []


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_topics_fail(name: str) -> None:
    obj, field = BAD[name]
    errors = crd.cr_errors(topic_crd(), obj)
    assert errors, f"{name} was accepted"
    assert any(e.startswith(field) or field in e for e in errors), errors


def test_unknown_spec_field_is_caught_in_strict_mode() -> None:
    obj = topic(partitions=1, replicas=1, partiton=3)
    assert any("partiton" in e for e in crd.cr_errors(topic_crd(), obj, strict=True))


def test_status_written_by_the_operator_validates() -> None:
    obj = topic(partitions=3, replicas=3)
    obj["status"] = {
        "observedGeneration": 2,
        "topicName": "orders",
        "partitions": 3,
        "replicas": 3,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Created",
                "message": "topic exists",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
    }
    assert crd.cr_errors(topic_crd(), obj, strict=True) == []
    obj["status"]["conditions"][0]["status"] = "Yes"
    assert crd.cr_errors(topic_crd(), obj) != []


def test_partitions_never_shrink_and_names_never_change() -> None:
    spec = crd.version_schema(topic_crd(), "v1")["properties"]["spec"]["properties"]
    rules = {
        name: [r["rule"] for r in p.get("x-kubernetes-validations", [])] for name, p in spec.items()
    }
    assert rules["partitions"] == ["self >= oldSelf"]
    assert rules["topicName"] == ["self == oldSelf"]
