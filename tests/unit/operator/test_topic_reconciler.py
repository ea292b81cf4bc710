"""The Topic reconciler end to end against a cluster, with Kubernetes kept in memory.

Every case of the issue: create, adopt, grow, set and reset configs, revert
out-of-band changes at resync, and each refusal (NotSupported, InvalidConfig,
ResourceConflict, BrokerError) leaving the topic exactly as it was, with the
Ready condition carrying the reason.  Here the cluster is the in-memory
:class:`FakeTopicAdmin`; tests/e2e/operator runs the same cases on a real cluster
by overriding the ``topic_admin`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from headwater_operator.topic_reconciler import TopicAdmin

from tests.unit.operator.fakes import FakeTopicAdmin
from tests.unit.operator.topic_world import TopicWorld


@pytest.fixture
def topic_admin() -> TopicAdmin:
    return FakeTopicAdmin(brokers=3)


Drift = Callable[[str, dict[str, str]], None]
"""Sets topic configs behind the operator's back (as `headwater topics alter` would)."""


@pytest.fixture
def drift(topic_admin: TopicAdmin) -> Drift:
    assert isinstance(topic_admin, FakeTopicAdmin)
    return lambda name, configs: topic_admin.out_of_band(name, dynamic_config=configs)


@pytest.fixture
def world(topic_admin: TopicAdmin) -> TopicWorld:
    return TopicWorld(topic_admin)


def spec(partitions: int = 2, replicas: int = 1, **config: str | int) -> dict[str, object]:
    out: dict[str, object] = {"partitions": partitions, "replicas": replicas}
    if config:
        out["config"] = dict(config)
    return out


def test_create_sets_ready_status_and_an_event(world: TopicWorld) -> None:
    world.apply("op-orders", spec(3, 1, **{"retention.ms": 60000}))
    out = world.reconcile("op-orders")
    assert out.refusal is None
    actual = world.admin.describe("op-orders")
    assert actual is not None and (actual.partitions, actual.replicas) == (3, 1)
    assert actual.config["retention.ms"] == "60000"
    status = world.resources["op-orders"]["status"]
    assert (
        status["topicName"] == "op-orders" and status["partitions"] == 3 and status["replicas"] == 1
    )
    assert status["observedGeneration"] == 1
    assert world.ready("op-orders")["status"] == "True"
    assert [e.reason for e in world.events["op-orders"]] == ["Created"]


def test_topic_name_overrides_the_resource_name(world: TopicWorld) -> None:
    world.apply("op-named", {**spec(1, 1), "topicName": "Op_Named.v1"})
    world.reconcile("op-named")
    assert world.admin.describe("Op_Named.v1") is not None
    assert world.resources["op-named"]["status"]["topicName"] == "Op_Named.v1"


def test_existing_topic_is_adopted_and_brought_in_line(world: TopicWorld) -> None:
    world.apply("op-adopt", spec(1, 1))
    world.reconcile("op-adopt")
    world.resources.pop("op-adopt")  # the topic exists, no resource manages it
    world.apply("op-adopt", spec(2, 1, **{"cleanup.policy": "compact"}))
    out = world.reconcile("op-adopt")
    assert out.refusal is None
    assert [e.reason for e in out.events] == ["Adopted", "PartitionsIncreased", "ConfigChanged"]
    actual = world.admin.describe("op-adopt")
    assert actual is not None and actual.partitions == 2
    assert actual.dynamic_config == {"cleanup.policy": "compact"}


def test_update_grows_partitions_and_sets_and_resets_configs(world: TopicWorld) -> None:
    world.apply("op-grow", spec(1, 1, **{"retention.ms": 1000}))
    world.reconcile("op-grow")
    world.apply("op-grow", spec(3, 1, **{"cleanup.policy": "compact"}))
    out = world.reconcile("op-grow")
    assert out.refusal is None
    actual = world.admin.describe("op-grow")
    assert actual is not None and actual.partitions == 3
    assert actual.dynamic_config == {"cleanup.policy": "compact"}  # retention.ms reset
    assert world.resources["op-grow"]["status"]["observedGeneration"] == 2
    assert world.resources["op-grow"]["status"]["partitions"] == 3


def test_resync_reverts_out_of_band_config_changes_and_is_quiet_otherwise(
    world: TopicWorld, drift: Drift
) -> None:
    world.apply("op-drift", spec(1, 1, **{"retention.ms": 1000}))
    world.reconcile("op-drift")
    assert world.reconcile("op-drift").actions == []  # nothing drifted: nothing done
    drift("op-drift", {"retention.ms": "5", "cleanup.policy": "compact"})
    out = world.reconcile("op-drift")
    assert [e.reason for e in out.events] == ["ConfigChanged"]
    actual = world.admin.describe("op-drift")
    assert actual is not None and actual.dynamic_config == {"retention.ms": "1000"}


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (spec(1, 1), "cannot decrease"),
        (spec(2, 2), "replication factor cannot change"),
        ({**spec(2, 1), "topicName": "op-renamed"}, "topicName cannot change"),
    ],
    ids=["partition-decrease", "rf-change", "rename"],
)
def test_unsupported_changes_are_refused_and_change_nothing(
    world: TopicWorld, change: dict[str, object], words: str
) -> None:
    world.apply("op-refuse", spec(2, 1, **{"retention.ms": 1000}))
    world.reconcile("op-refuse")
    before = world.admin.describe("op-refuse")
    world.apply("op-refuse", {**change, "config": {"retention.ms": 2000}})
    out = world.reconcile("op-refuse")
    assert out.refusal is not None and out.actions == []
    assert world.admin.describe("op-refuse") == before
    assert world.admin.describe("op-renamed") is None
    ready = world.ready("op-refuse")
    assert (ready["status"], ready["reason"]) == ("False", "NotSupported")
    assert words in ready["message"]
    assert [e.type for e in out.events] == ["Warning"]
    assert world.resources["op-refuse"]["status"]["topicName"] == "op-refuse"
    # The same refusal at the next resync posts no second Event.
    assert world.reconcile("op-refuse").events == []


def test_unknown_config_is_invalid_config_and_changes_nothing(world: TopicWorld) -> None:
    world.apply("op-badcfg", spec(1, 1))
    world.reconcile("op-badcfg")
    before = world.admin.describe("op-badcfg")
    world.apply("op-badcfg", spec(3, 1, **{"no.such.config": "1"}))
    out = world.reconcile("op-badcfg")
    assert out.refusal is not None and out.actions == []
    assert world.ready("op-badcfg")["reason"] == "InvalidConfig"
    assert "no.such.config" in world.ready("op-badcfg")["message"]
    assert world.admin.describe("op-badcfg") == before  # partitions not grown either


def test_invalid_config_on_create_creates_nothing(world: TopicWorld) -> None:
    world.apply("op-badnew", spec(1, 1, **{"retention.ms": "soon"}))
    world.reconcile("op-badnew")
    assert world.ready("op-badnew")["reason"] == "InvalidConfig"
    assert world.admin.describe("op-badnew") is None


def test_second_topic_for_one_name_is_a_conflict_and_the_oldest_wins(world: TopicWorld) -> None:
    world.apply("op-first", {**spec(1, 1), "topicName": "op-shared"})
    world.reconcile("op-first")
    world.apply("op-second", {**spec(2, 1), "topicName": "op-shared"})
    out = world.reconcile("op-second")
    assert out.refusal is not None and world.ready("op-second")["reason"] == "ResourceConflict"
    assert "default/op-first" in world.ready("op-second")["message"]
    actual = world.admin.describe("op-shared")
    assert actual is not None and actual.partitions == 1
    # Deleting the loser leaves the topic; deleting the owner deletes it.
    world.delete("op-second")
    assert world.admin.describe("op-shared") is not None
    world.delete("op-first")
    assert world.admin.describe("op-shared") is None


def test_broker_refusal_is_broker_error_with_the_brokers_message(world: TopicWorld) -> None:
    world.apply("op-rf", spec(1, 99))
    world.reconcile("op-rf")
    ready = world.ready("op-rf")
    assert (ready["status"], ready["reason"]) == ("False", "BrokerError")
    assert "INVALID_REPLICATION_FACTOR" in ready["message"]
    assert world.admin.describe("op-rf") is None


def test_delete_deletes_the_topic(world: TopicWorld) -> None:
    world.apply("op-gone", spec(1, 1))
    world.reconcile("op-gone")
    events = world.delete("op-gone")
    assert [e.reason for e in events] == ["Deleted"]
    assert world.admin.describe("op-gone") is None


def test_unreachable_cluster_is_a_retriable_broker_error() -> None:
    admin = FakeTopicAdmin()
    world = TopicWorld(admin)
    admin.down = True
    world.apply("op-down", spec(1, 1))
    out = world.reconcile("op-down")
    assert out.retriable and world.ready("op-down")["reason"] == "BrokerError"
    admin.down = False
    assert world.reconcile("op-down").refusal is None
    assert world.ready("op-down")["status"] == "True"
