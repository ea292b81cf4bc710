"""Topic specs against actual topics (pure): parsing, actions, refusals, ownership."""

from __future__ import annotations

import pytest
from headwater_operator import topics
from headwater_operator.topics import ActualTopic, Claim, Reason, Refusal, TopicSpec


def actual(partitions: int = 3, replicas: int = 3, **dynamic: str) -> ActualTopic:
    return ActualTopic("orders", partitions, replicas, dict(dynamic), dict(dynamic))


def test_spec_defaults_topic_name_and_stringifies_integer_configs() -> None:
    spec = topics.parse_spec(
        "orders",
        {
            "partitions": 3,
            "replicas": 2,
            "config": {"retention.ms": 1000, "cleanup.policy": "compact"},
        },
    )
    assert spec == TopicSpec("orders", 3, 2, {"retention.ms": "1000", "cleanup.policy": "compact"})
    named = topics.parse_spec(
        "k8s-name", {"topicName": "Orders_v1", "partitions": 1, "replicas": 1}
    )
    assert isinstance(named, TopicSpec) and named.topic_name == "Orders_v1"


@pytest.mark.parametrize("value", [[1, 2], {"a": 1}, 1.5])
def test_spec_with_a_config_of_the_wrong_type_is_invalid_config(value: object) -> None:
    refusal = topics.parse_spec(
        "t", {"partitions": 1, "replicas": 1, "config": {"retention.ms": value}}
    )
    assert isinstance(refusal, Refusal) and refusal.reason == Reason.INVALID_CONFIG
    assert "retention.ms" in refusal.message


def test_missing_topic_is_created_with_spec() -> None:
    spec = TopicSpec("orders", 6, 3, {"retention.ms": "1"})
    assert topics.plan(spec, None, managed_name=None) == [
        topics.CreateTopic("orders", 6, 3, {"retention.ms": "1"})
    ]


def test_missing_partitions_and_replicas_take_the_cluster_default() -> None:
    (create,) = topics.plan(TopicSpec("t", None, None, {}), None, managed_name=None)  # type: ignore[misc]
    assert create == topics.CreateTopic("t", -1, -1, {})


def test_up_to_date_topic_needs_nothing() -> None:
    spec = TopicSpec("orders", 3, 3, {"retention.ms": "5"})
    assert topics.plan(spec, actual(**{"retention.ms": "5"}), managed_name="orders") == []


def test_partitions_grow_and_configs_are_set_and_reset() -> None:
    spec = TopicSpec("orders", 5, 3, {"retention.ms": "5", "cleanup.policy": "compact"})
    have = actual(3, 3, **{"retention.ms": "9", "segment.bytes": "100"})
    assert topics.plan(spec, have, managed_name="orders") == [
        topics.CreatePartitions("orders", 3, 5),
        topics.AlterConfigs(
            "orders", {"retention.ms": "5", "cleanup.policy": "compact"}, ("segment.bytes",)
        ),
    ]


@pytest.mark.parametrize(
    ("spec", "managed", "words"),
    [
        (TopicSpec("orders", 2, 3, {}), "orders", "cannot decrease from 3 to 2"),
        (TopicSpec("orders", 3, 2, {}), "orders", "replication factor cannot change from 3 to 2"),
        (TopicSpec("orders-v2", 3, 3, {}), "orders", "topicName cannot change"),
    ],
)
def test_unsupported_changes_are_refused(spec: TopicSpec, managed: str, words: str) -> None:
    refusal = topics.plan(spec, actual(), managed_name=managed)
    assert isinstance(refusal, Refusal)
    assert refusal.reason == Reason.NOT_SUPPORTED and words in refusal.message


def test_oldest_topic_owns_the_name() -> None:
    old = Claim("2026-01-01T00:00:00Z", "a", "first")
    new = Claim("2026-01-02T00:00:00Z", "a", "second")
    assert topics.conflict(old, [old, new]) is None
    refusal = topics.conflict(new, [old, new])
    assert refusal is not None and refusal.reason == Reason.RESOURCE_CONFLICT
    assert "a/first" in refusal.message
    # Same creation second: namespace then name break the tie, deterministically.
    twin = Claim(old.created, "a", "alpha")
    assert topics.owner([old, twin]) == twin
