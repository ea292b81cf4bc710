"""Controller events are small values (RPC futures excluded from equality), and the
coordination settings read Kafka-named properties with their defaults."""

from __future__ import annotations

from concurrent.futures import Future

from headwater.coordination import events as ev
from headwater.coordination.settings import CoordinationSettings


def test_events_compare_by_value_not_by_future() -> None:
    assert ev.ControlledShutdown(1, 5, Future()) == ev.ControlledShutdown(1, 5, Future())
    assert ev.PreferredReplicaElection((("t", 0),)) == ev.PreferredReplicaElection(
        (("t", 0),), result=Future()
    )
    assert ev.PartitionModifications("a") != ev.PartitionModifications("b")
    assert ev.PreferredReplicaElection(from_zk=True) != ev.PreferredReplicaElection()


def test_preferred_election_defaults_to_every_partition() -> None:
    event = ev.PreferredReplicaElection()
    assert event.partitions is None and not event.from_zk and event.result is None


def test_settings_defaults() -> None:
    s = CoordinationSettings.from_properties({})
    assert s == CoordinationSettings()
    assert s.auto_leader_rebalance_enable and not s.unclean_leader_election_enable
    assert s.leader_imbalance_check_interval_s == 300.0


def test_settings_from_kafka_names() -> None:
    s = CoordinationSettings.from_properties(
        {
            "zookeeper.connect": "zk:2181/x",
            "zookeeper.session.timeout.ms": "6000",
            "zookeeper.connection.timeout.ms": "7000",
            "num.partitions": "4",
            "default.replication.factor": "3",
            "unclean.leader.election.enable": "TRUE",
            "auto.leader.rebalance.enable": "false",
            "leader.imbalance.check.interval.seconds": "12.5",
            "delete.topic.enable": "False",
            "log.dirs": "/ignored",
        }
    )
    assert s == CoordinationSettings(
        zookeeper_connect="zk:2181/x",
        zookeeper_session_timeout_ms=6000,
        zookeeper_connection_timeout_ms=7000,
        num_partitions=4,
        default_replication_factor=3,
        unclean_leader_election_enable=True,
        auto_leader_rebalance_enable=False,
        leader_imbalance_check_interval_s=12.5,
        delete_topic_enable=False,
    )
