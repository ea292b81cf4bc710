"""TopicAdmin.create_topics: names validated, defaults from num.partitions and
default.replication.factor, placement with the given randomness, manual assignments,
configs validated, validate_only writing nothing, and per-topic errors."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping

import pytest
from headwater import errors
from headwater.coordination.admin import NewTopic, TopicAdmin
from headwater.coordination.model import decode_topic_id
from headwater.coordination.settings import CoordinationSettings

from .fakes import FakeAdminZk
from .helpers import reg


def reject_bad_retention(config: Mapping[str, str]) -> None:
    if config.get("retention.ms", "0").startswith("-"):
        raise errors.InvalidConfigError("retention.ms must not be negative")
    if "bogus" in config:
        raise ValueError("unknown key bogus")


def admin(
    *, brokers: tuple[int, ...] = (1, 2, 3), **settings: object
) -> tuple[TopicAdmin, FakeAdminZk]:
    zk = FakeAdminZk()
    zk.brokers = {b: reg(b) for b in brokers}
    a = TopicAdmin(
        zk,  # type: ignore[arg-type]
        CoordinationSettings(**settings),  # type: ignore[arg-type]
        rng=random.Random(7),
        config_validator=reject_bad_retention,
    )
    return a, zk


def test_defaults_from_settings() -> None:
    a, zk = admin(num_partitions=3, default_replication_factor=2)
    assignment = a.create_topic(NewTopic("t"))
    assert assignment.num_partitions == 3 and assignment.replication_factor == 2
    assert zk.topics["t"] == dict(assignment.partitions)


def test_placement_is_reproducible_with_the_same_randomness() -> None:
    a1, _ = admin()
    a2, _ = admin()
    t = NewTopic("t", num_partitions=6, replication_factor=3)
    assert a1.create_topic(t).partitions == a2.create_topic(t).partitions


def test_each_creation_draws_a_new_id_into_the_znode() -> None:
    a, zk = admin()
    first = a.create_topic(NewTopic("t", num_partitions=1, replication_factor=1))
    assert first.topic_id and zk.topic_ids["t"] == first.topic_id
    assert decode_topic_id(first.topic_id) not in (None, uuid.UUID(int=0), uuid.UUID(int=1))
    del zk.topics["t"]  # the controller deleted it
    again = a.create_topic(NewTopic("t", num_partitions=1, replication_factor=1))
    assert again.topic_id not in ("", first.topic_id) and zk.topic_ids["t"] == again.topic_id
    [result] = a.create_topics([NewTopic("u", num_partitions=1, replication_factor=1)])
    assert result.topic_id == zk.topic_ids["u"]
    assert a.create_topic(NewTopic("v", 1, 1), validate_only=True).topic_id == ""


def test_manual_assignment() -> None:
    a, zk = admin()
    a.create_topic(NewTopic("t", assignments={0: [3, 1], 1: [1, 2]}))
    assert zk.topics["t"] == {0: (3, 1), 1: (1, 2)}


def test_manual_assignment_with_counts_is_refused() -> None:
    a, zk = admin()
    with pytest.raises(errors.InvalidRequestError):
        a.create_topic(NewTopic("t", num_partitions=1, assignments={0: [1]}))
    assert zk.topics == {}


def test_manual_assignment_on_unknown_broker_is_refused() -> None:
    a, _ = admin()
    with pytest.raises(errors.InvalidReplicaAssignmentError):
        a.create_topic(NewTopic("t", assignments={0: [9]}))


def test_replication_factor_above_brokers_is_refused() -> None:
    a, zk = admin(brokers=(1,))
    with pytest.raises(errors.InvalidReplicationFactorError):
        a.create_topic(NewTopic("t", num_partitions=1, replication_factor=2))
    assert zk.writes == []


@pytest.mark.parametrize("name", ["", "..", "a b", "x" * 250])
def test_illegal_names(name: str) -> None:
    a, _ = admin()
    with pytest.raises(errors.InvalidTopicError):
        a.create_topic(NewTopic(name, num_partitions=1, replication_factor=1))


def test_existing_colliding_and_deleting_topics_are_refused() -> None:
    a, zk = admin()
    a.create_topic(NewTopic("a.b", 1, 1))
    with pytest.raises(errors.TopicAlreadyExistsError):
        a.create_topic(NewTopic("a.b", 1, 1))
    with pytest.raises(errors.InvalidTopicError, match="collides"):
        a.create_topic(NewTopic("a_b", 1, 1))
    zk.deletions = ["gone"]
    with pytest.raises(errors.TopicAlreadyExistsError, match="marked for deletion"):
        a.create_topic(NewTopic("gone", 1, 1))


def test_config_is_validated_and_written_with_the_topic() -> None:
    a, zk = admin()
    with pytest.raises(errors.InvalidConfigError):
        a.create_topic(NewTopic("t", 1, 1, configs={"retention.ms": "-5"}))
    with pytest.raises(errors.InvalidConfigError, match="bogus"):
        a.create_topic(NewTopic("t", 1, 1, configs={"bogus": "1"}))
    assert zk.topics == {}
    a.create_topic(NewTopic("t", 1, 1, configs={"retention.ms": "5"}))
    assert zk.configs["t"] == {"retention.ms": "5"}


def test_validate_only_writes_nothing() -> None:
    a, zk = admin()
    assignment = a.create_topic(NewTopic("t", 2, 2), validate_only=True)
    assert assignment.num_partitions == 2
    assert zk.topics == {} and zk.writes == []


def test_errors_are_per_topic() -> None:
    a, zk = admin()
    results = a.create_topics(
        [
            NewTopic("ok", 2, 3),
            NewTopic("bad name", 1, 1),
            NewTopic("ok", 1, 1),
            NewTopic("big", 1, 5),
        ]
    )
    assert [(res.name, type(res.error).__name__) for res in results] == [
        ("ok", "NoneType"),
        ("bad name", "InvalidTopicError"),
        ("ok", "InvalidRequestError"),
        ("big", "InvalidReplicationFactorError"),
    ]
    assert (results[0].num_partitions, results[0].replication_factor) == (2, 3)
    assert list(zk.topics) == ["ok"]
