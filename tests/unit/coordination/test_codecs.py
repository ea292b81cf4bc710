"""JSON codecs of the ZooKeeper values (Kafka ZK-mode shapes), zookeeper.connect parsing,
and settings from Kafka-named properties."""

from __future__ import annotations

import json

import pytest
from headwater import errors
from headwater.coordination import model
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr
from headwater.coordination.session import ZkConnectString
from headwater.coordination.settings import CoordinationSettings


def test_broker_registration_round_trip_and_shape() -> None:
    reg = BrokerRegistration(3, "10.0.0.1", 9092, rack="r1", version="0.1", protocol_version="1")
    data = model.encode_broker(reg)
    raw = json.loads(data)
    assert raw["host"] == "10.0.0.1" and raw["port"] == 9092 and raw["rack"] == "r1"
    assert raw["listeners"] == ["PLAINTEXT://10.0.0.1:9092"]
    back = model.decode_broker(3, data, epoch=42)
    assert back == BrokerRegistration(3, "10.0.0.1", 9092, "r1", "0.1", "1", epoch=42)


def test_leader_and_isr_round_trip() -> None:
    lai = LeaderAndIsr(leader=1, leader_epoch=2, isr=(1, 3), controller_epoch=5)
    data = model.encode_leader_and_isr(lai)
    assert json.loads(data) == {
        "version": 1,
        "leader": 1,
        "leader_epoch": 2,
        "isr": [1, 3],
        "controller_epoch": 5,
    }
    assert model.decode_leader_and_isr(data, zk_version=9) == LeaderAndIsr(1, 2, (1, 3), 5, 9)


def test_assignment_config_and_lists() -> None:
    data = model.encode_assignment({1: [2, 3], 0: [3, 2]})
    assert json.loads(data)["partitions"] == {"0": [3, 2], "1": [2, 3]}
    a = model.decode_assignment("t", data)
    assert a.partitions == {0: (3, 2), 1: (2, 3)} and a.replication_factor == 2
    assert model.decode_config(model.encode_config({"retention.ms": "1"})) == {"retention.ms": "1"}
    assert model.decode_config(b"") == {}
    tps = [("a", 0), ("b", 2)]
    assert model.decode_partitions_list(model.encode_partitions_list(tps)) == tps
    assert model.decode_controller(model.encode_controller(4, 1)) == 4
    assert model.decode_int(model.encode_int(12)) == 12
    assert model.decode_cluster_id(model.encode_cluster_id("abc")) == "abc"


def test_corrupt_znodes_raise() -> None:
    with pytest.raises(errors.UnknownServerError):
        model.decode_leader_and_isr(b"{not json", zk_version=0)
    with pytest.raises(errors.UnknownServerError):
        model.decode_int(b"x")


def test_connect_string() -> None:
    assert ZkConnectString.parse("h:1,h:2/kafka/x") == ZkConnectString("h:1,h:2", "/kafka/x")
    assert ZkConnectString.parse("h:1") == ZkConnectString("h:1", "/headwater")
    assert ZkConnectString.parse("h:1/") == ZkConnectString("h:1", "")
    with pytest.raises(ValueError):
        ZkConnectString.parse("/chroot")


def test_settings_from_properties() -> None:
    s = CoordinationSettings.from_properties(
        {
            "zookeeper.connect": "z:1/c",
            "num.partitions": "3",
            "unclean.leader.election.enable": "true",
            "log.dirs": "/x",
        }
    )
    assert (s.zookeeper_connect, s.num_partitions, s.unclean_leader_election_enable) == (
        "z:1/c",
        3,
        True,
    )
