"""TopicAdmin: partition increases (placement continuing from the topic's first leader,
manual assignments, only increases, retried on a concurrent change), config changes and
topic deletion (delete.topic.enable)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from headwater import errors
from headwater.coordination.admin import NewTopic, TopicAdmin
from headwater.coordination.settings import CoordinationSettings

from .fakes import FakeAdminZk
from .helpers import reg


def admin(**settings: Any) -> tuple[TopicAdmin, FakeAdminZk]:
    zk = FakeAdminZk()
    zk.brokers = {b: reg(b) for b in (1, 2, 3)}
    a = TopicAdmin(zk, CoordinationSettings(**settings), rng=random.Random(3))  # type: ignore[arg-type]
    a.create_topic(NewTopic("t", assignments={0: [2, 3], 1: [3, 1]}))
    return a, zk


def test_increase_places_new_partitions_after_the_first_leader() -> None:
    a, zk = admin()
    tid = zk.topic_ids["t"]
    grown = a.create_partitions("t", 4)
    assert grown.num_partitions == 4
    assert tid and zk.topic_ids["t"] == tid == grown.topic_id  # adding partitions keeps the id
    assert zk.topics["t"][0] == (2, 3) and zk.topics["t"][1] == (3, 1)
    assert [len(r) for r in zk.topics["t"].values()] == [2, 2, 2, 2]
    # Placement continues from the first partition's leader (broker 2, index 1) with that
    # index as both start and shift, as Kafka does: no randomness involved.
    assert (zk.topics["t"][2], zk.topics["t"][3]) == ((1, 3), (2, 3))


def test_increase_with_manual_assignment() -> None:
    a, zk = admin()
    a.create_partitions("t", 3, assignments={2: [1, 2]})
    assert zk.topics["t"][2] == (1, 2)


def test_manual_assignment_must_match_the_increase() -> None:
    a, _ = admin()
    with pytest.raises(errors.InvalidReplicaAssignmentError):
        a.create_partitions("t", 4, assignments={2: [1, 2]})
    with pytest.raises(errors.InvalidReplicaAssignmentError):
        a.create_partitions("t", 3, assignments={5: [1, 2]})


@pytest.mark.parametrize("total", [1, 2])
def test_only_increases(total: int) -> None:
    a, zk = admin()
    with pytest.raises(errors.InvalidPartitionsError):
        a.create_partitions("t", total)
    assert len(zk.topics["t"]) == 2


def test_unknown_or_deleting_topic() -> None:
    a, zk = admin()
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        a.create_partitions("x", 3)
    zk.deletions = ["t"]
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        a.create_partitions("t", 3)


def test_validate_only_increase_writes_nothing() -> None:
    a, zk = admin()
    assert a.create_partitions("t", 5, validate_only=True).num_partitions == 5
    assert len(zk.topics["t"]) == 2


class Racing(FakeAdminZk):
    """Another admin changes the assignment between our read and our write ``races`` times."""

    races = 0

    def set_assignment(
        self, topic: str, partitions: Any, *, expected_version: int, topic_id: str
    ) -> bool:
        if self.races > 0:
            self.races -= 1
            self.assignment_versions[topic] = self.assignment_versions.get(topic, 0) + 1
        return super().set_assignment(
            topic, partitions, expected_version=expected_version, topic_id=topic_id
        )


def racing(races: int) -> tuple[TopicAdmin, Racing]:
    zk = Racing()
    zk.races = races
    zk.brokers = {b: reg(b) for b in (1, 2, 3)}
    a = TopicAdmin(zk, CoordinationSettings(), rng=random.Random(3))  # type: ignore[arg-type]
    a.create_topic(NewTopic("t", assignments={0: [1, 2]}))
    return a, zk


def test_a_concurrent_change_is_retried() -> None:
    a, zk = racing(2)
    assert a.create_partitions("t", 2).num_partitions == 2
    assert len(zk.topics["t"]) == 2


def test_a_topic_that_keeps_changing_times_out() -> None:
    a, zk = racing(3)
    with pytest.raises(errors.RequestTimedOutError):
        a.create_partitions("t", 2)
    assert len(zk.topics["t"]) == 1


def test_alter_config_sets_and_deletes_keys() -> None:
    a, zk = admin()
    zk.configs["t"] = {"retention.ms": "1", "cleanup.policy": "delete"}
    out = a.alter_topic_config("t", set_={"retention.ms": "2"}, delete=["cleanup.policy", "nope"])
    assert out == {"retention.ms": "2"} and zk.configs["t"] == out


def test_alter_config_validate_only_writes_nothing() -> None:
    a, zk = admin()
    zk.configs["t"] = {"retention.ms": "1"}
    out = a.alter_topic_config("t", set_={"retention.ms": "2"}, validate_only=True)
    assert out == {"retention.ms": "2"} and zk.configs["t"] == {"retention.ms": "1"}


def test_alter_config_of_unknown_topic() -> None:
    a, _ = admin()
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        a.alter_topic_config("x", set_={})


def test_alter_config_is_validated() -> None:
    zk = FakeAdminZk()
    zk.brokers = {1: reg(1)}

    def validator(config: Any) -> None:
        raise KeyError("no such key")

    a = TopicAdmin(zk, CoordinationSettings(), rng=random.Random(1), config_validator=validator)  # type: ignore[arg-type]
    zk.topics["t"] = {0: (1,)}
    with pytest.raises(errors.InvalidConfigError):
        a.alter_topic_config("t", set_={"x": "1"})
    assert "t" not in zk.configs


def test_delete_marks_the_topic() -> None:
    a, zk = admin()
    a.delete_topic("t")
    assert zk.deletions == ["t"]
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        a.delete_topic("x")


def test_delete_can_be_disabled() -> None:
    a, zk = admin(delete_topic_enable=False)
    with pytest.raises(errors.PolicyViolationError):
        a.delete_topic("t")
    assert zk.deletions == []
