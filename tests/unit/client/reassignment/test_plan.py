"""Plan files: Kafka's JSON read and written, and every bad plan refused with a clear error."""

from __future__ import annotations

import json

import pytest
from headwater import errors
from headwater.client.reassignment import (
    ReassignmentPlan,
    check_plan,
    parse_plan,
    parse_topics_to_move,
)
from headwater.values import TopicPartition


def _plan(*entries: dict[str, object]) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def test_kafka_plan_round_trips() -> None:
    text = _plan(
        {"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "a", "partition": 1, "replicas": [2, 3]},
    )
    plan = parse_plan(text)
    assert plan.targets == {TopicPartition("a", 0): (1, 2), TopicPartition("a", 1): (2, 3)}
    again = json.loads(plan.dumps())
    assert again["version"] == 1
    assert again["partitions"][1] == {
        "topic": "a",
        "partition": 1,
        "replicas": [2, 3],
        "log_dirs": ["any", "any"],
    }
    assert parse_plan(plan.dumps()) == parse_plan(plan.dumps())


def test_of_sorts_by_topic_then_partition() -> None:
    plan = ReassignmentPlan.of(
        {TopicPartition("b", 0): [1], TopicPartition("a", 10): [2], TopicPartition("a", 2): [3]}
    )
    assert [str(p.tp) for p in plan.partitions] == ["a-2", "a-10", "b-0"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not valid JSON"),
        ("[]", "JSON object"),
        ('{"version": 2, "partitions": []}', "version"),
        ('{"version": 1}', 'no "partitions"'),
        ('{"version": 1, "partitions": {}}', "must be a list"),
        ('{"version": 1, "partitions": []}', "cannot be empty"),
        (_plan({"topic": "a", "partition": 0}), "missing 'replicas'"),
        (_plan({"topic": "", "partition": 0, "replicas": [1]}), "topic"),
        (_plan({"topic": "a", "partition": -1, "replicas": [1]}), ">= 0"),
        (_plan({"topic": "a", "partition": "0", "replicas": [1]}), "integer"),
        (_plan({"topic": "a", "partition": 0, "replicas": [1, True]}), "integer"),
        (_plan({"topic": "a", "partition": 0, "replicas": []}), "empty replica list"),
        (_plan({"topic": "a", "partition": 0, "replicas": [1, 1]}), "duplicate entries: a-0"),
        (_plan({"topic": "a", "partition": 0, "replicas": [1, -2]}), "negative"),
        (_plan({"topic": "a", "partition": 0, "replicas": [1], "extra": 1}), "unknown field"),
        (
            _plan({"topic": "a", "partition": 0, "replicas": [1, 2], "log_dirs": ["any"]}),
            "must be equal",
        ),
        (
            _plan({"topic": "a", "partition": 0, "replicas": [1], "log_dirs": ["/data"]}),
            '"any"',
        ),
        (
            _plan(
                {"topic": "a", "partition": 0, "replicas": [1]},
                {"topic": "a", "partition": 0, "replicas": [2]},
            ),
            "duplicate topic partitions: a-0",
        ),
    ],
)
def test_bad_plan_files_are_refused(text: str, words: str) -> None:
    with pytest.raises(errors.InvalidReplicaAssignmentError, match=words.replace("(", r"\(")):
        parse_plan(text)


def _checked(plan_text: str) -> None:
    check_plan(parse_plan(plan_text), partition_counts={"a": 2, "b": 1}, broker_ids=[0, 1, 2])


def test_a_plan_matching_the_cluster_passes_even_with_a_new_replication_factor() -> None:
    _checked(
        _plan(
            {"topic": "a", "partition": 0, "replicas": [0, 1, 2]},
            {"topic": "a", "partition": 1, "replicas": [2]},
        )
    )


def test_unknown_topic_is_refused() -> None:
    with pytest.raises(errors.UnknownTopicOrPartitionError, match="Topic nope not found"):
        _checked(_plan({"topic": "nope", "partition": 0, "replicas": [0]}))


def test_partition_beyond_the_topic_is_refused() -> None:
    with pytest.raises(
        errors.UnknownTopicOrPartitionError, match=r"a-2 \(topic a has 2 partitions"
    ):
        _checked(_plan({"topic": "a", "partition": 2, "replicas": [0]}))


def test_unknown_broker_is_refused() -> None:
    with pytest.raises(errors.BrokerNotAvailableError, match=r"Unknown broker id\(s\): 7"):
        _checked(_plan({"topic": "a", "partition": 0, "replicas": [0, 7]}))


def test_topics_to_move_file() -> None:
    text = json.dumps({"version": 1, "topics": [{"topic": "a"}, {"topic": "b"}]})
    assert parse_topics_to_move(text).topics == ("a", "b")
    for bad in (
        "{}",
        '{"topics": []}',
        '{"topics": [{"topic": "a"}, {"topic": "a"}]}',
        "x",
        '{"topics": [{"name": "a"}]}',
    ):
        with pytest.raises(errors.InvalidReplicaAssignmentError):
            parse_topics_to_move(bad)
