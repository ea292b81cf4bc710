"""Topic lifecycle through the controller: creation gives partitions leaders and brokers
LeaderAndIsr/UpdateMetadata; partition increase; deletion with StopReplica; admin errors."""

from __future__ import annotations

import pytest
from headwater import errors
from headwater.coordination.admin import NewTopic

from .conftest import Cluster, wait_until

pytestmark = pytest.mark.e2e


def test_create_topic_elects_leaders_and_tells_brokers(cluster: Cluster) -> None:
    for b in (1, 2, 3):
        cluster.start(b)
    ctrl = cluster.controller()
    any_broker = cluster.brokers[1]
    assignment = any_broker.create_topic(
        NewTopic("orders", num_partitions=3, replication_factor=2, configs={"retention.ms": "1000"})
    )
    assert any_broker.wait_for_leaders(["orders"], timeout_s=15)
    states = any_broker.get_partition_states("orders")
    assert sorted(states) == [0, 1, 2]
    for p, state in states.items():
        replicas = assignment.partitions[p]
        assert state.leader == replicas[0]
        assert state.isr == replicas
        assert state.leader_epoch == 0
        assert state.controller_epoch == ctrl.controller.controller_epoch
    assert any_broker.get_topic_config("orders") == {"retention.ms": "1000"}
    for p, replicas in assignment.partitions.items():
        for r in replicas:
            wait_until(
                lambda r=r, p=p: any(
                    s.broker_id == r and any(st.key == ("orders", p) for st in s.states)
                    for s in cluster.channel.of("LeaderAndIsr")
                ),
                what=f"LeaderAndIsr for orders-{p} at broker {r}",
            )
    for b in (1, 2, 3):
        wait_until(
            lambda b=b: any(
                s.broker_id == b and any(st.topic == "orders" for st in s.states)
                for s in cluster.channel.of("UpdateMetadata")
            ),
            what=f"UpdateMetadata at broker {b}",
        )


def test_admin_errors_change_nothing(cluster: Cluster) -> None:
    b = cluster.start(1)
    cluster.start(2)
    cluster.controller()
    b.create_topic(NewTopic("a.b", num_partitions=1, replication_factor=1))
    with pytest.raises(errors.TopicAlreadyExistsError):
        b.create_topic(NewTopic("a.b", num_partitions=1, replication_factor=1))
    with pytest.raises(errors.InvalidTopicError, match="collides"):
        b.create_topic(NewTopic("a_b", num_partitions=1, replication_factor=1))
    with pytest.raises(errors.InvalidTopicError):
        b.create_topic(NewTopic("bad name!", num_partitions=1, replication_factor=1))
    with pytest.raises(errors.InvalidReplicationFactorError):
        b.create_topic(NewTopic("t", num_partitions=1, replication_factor=3))
    with pytest.raises(errors.InvalidPartitionsError):
        b.create_topic(NewTopic("t", num_partitions=0, replication_factor=1))
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        b.delete_topic("missing")
    with pytest.raises(errors.InvalidPartitionsError):
        b.create_partitions("a.b", 1)
    assert b.get_topics() == ["a.b"]
    results = b.create_topics(
        [NewTopic("v", num_partitions=2, replication_factor=2)], validate_only=True
    )
    assert results[0].error is None and results[0].num_partitions == 2
    assert b.get_topics() == ["a.b"]


def test_config_validator_and_alter_config(cluster: Cluster) -> None:
    b = cluster.start(1)

    def validator(config: object) -> None:
        assert isinstance(config, dict)
        for key in config:
            if key not in {"retention.ms", "cleanup.policy"}:
                raise errors.InvalidConfigError(f"Unknown topic config name: {key}")

    b.admin._validate_config = validator
    with pytest.raises(errors.InvalidConfigError):
        b.create_topic(NewTopic("c", 1, 1, configs={"nope": "1"}))
    b.create_topic(NewTopic("c", 1, 1, configs={"retention.ms": "5"}))
    seen: list[dict[str, str]] = []
    cancel = b.watch_topic_config("c", lambda _t, cfg: seen.append(cfg))
    assert b.alter_topic_config("c", {"cleanup.policy": "compact"}, ["retention.ms"]) == {
        "cleanup.policy": "compact"
    }
    wait_until(lambda: {"cleanup.policy": "compact"} in seen, what="config watch")
    cancel()


def test_partition_increase_and_deletion(cluster: Cluster) -> None:
    for b in (1, 2):
        cluster.start(b)
    cluster.controller()
    b1 = cluster.brokers[1]
    b1.create_topic(NewTopic("grow", num_partitions=2, replication_factor=2))
    assert b1.wait_for_leaders(["grow"], timeout_s=15)
    grown = b1.create_partitions("grow", 4)
    assert sorted(grown.partitions) == [0, 1, 2, 3]
    assert b1.wait_for_leaders(["grow"], timeout_s=15)
    assert sorted(b1.get_partition_states("grow")) == [0, 1, 2, 3]

    b1.delete_topic("grow")
    wait_until(lambda: "grow" not in b1.get_topics(), what="topic deletion")
    assert b1.get_topic_config("grow") == {}
    assert b1.store.get_topics_to_delete() == []
    stops = [s for s in cluster.channel.of("StopReplica") if s.delete]
    assert {s.broker_id for s in stops} == {1, 2}
    assert sorted({tp for s in stops for tp in s.partitions}) == [("grow", p) for p in range(4)]
    wait_until(
        lambda: any("grow" in s.deleted_topics for s in cluster.channel.of("UpdateMetadata"))
    )
    # The name is free again.
    b1.create_topic(NewTopic("grow", num_partitions=1, replication_factor=1))
    assert b1.wait_for_leaders(["grow"], timeout_s=15)
