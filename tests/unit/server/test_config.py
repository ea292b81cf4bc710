"""BrokerConfig: properties syntax, env vars, overrides, ${ENV} expansion, errors by key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from headwater.server.config import (
    SECRET_KEYS,
    BrokerConfig,
    ConfigError,
    config_from_properties,
    is_secret,
    load_config,
    parse_properties,
    validate_config,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_follow_kafka() -> None:
    config = BrokerConfig(broker_id=0)
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.message_max_bytes == 1048588
    assert config.replica_lag_time_max_ms == 30000
    assert config.replica_fetch_wait_max_ms == 500
    assert not config.unclean_leader_election_enable
    assert config.controlled_shutdown_enable
    assert config.retention_ms == 168 * 3600 * 1000
    assert config.zookeeper_chroot == "/headwater"


def test_properties_syntax() -> None:
    props = parse_properties(
        "# comment\n! also comment\n\nbroker.id=1\nlog.dirs : /a,/b\nnum.partitions 3\n"
        "listeners=PLAINTEXT://h:1\\\n  234\n"
    )
    assert props == {
        "broker.id": "1",
        "log.dirs": "/a,/b",
        "num.partitions": "3",
        "listeners": "PLAINTEXT://h:1234",
    }


def test_file_then_env_then_override(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.id=1\nnum.partitions=2\nmin.insync.replicas=2\n")
    config = load_config(
        config_file=path,
        environ={"HEADWATER_NUM_PARTITIONS": "4", "HEADWATER_BROKER_ID": "5"},
        overrides=["broker.id=7", "log.retention.ms=1000"],
    )
    assert config.broker_id == 7
    assert config.num_partitions == 4
    assert config.min_insync_replicas == 2
    assert config.retention_ms == 1000


def test_env_expansion_in_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "broker.id=0\nadvertised.listeners=PLAINTEXT://${HOSTNAME}.hw-brokers:9092\n",
    )
    config = load_config(config_file=path, environ={"HOSTNAME": "hw-broker-2"})
    assert config.advertised_listener.host == "hw-broker-2.hw-brokers"
    assert config.advertised_listener.port == 9092


def test_undefined_env_reference_names_key(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.id=0\nadvertised.listeners=PLAINTEXT://${NOPE}:1\n")
    with pytest.raises(ConfigError, match=r"advertised.listeners.*\$\{NOPE\}"):
        load_config(config_file=path, environ={})


def test_broker_id_from_hostname() -> None:
    config = load_config(environ={"HOSTNAME": "hw-broker-12"}, broker_id_from_hostname=True)
    assert config.broker_id == 12
    with pytest.raises(ConfigError, match="HOSTNAME"):
        load_config(environ={"HOSTNAME": "broker"}, broker_id_from_hostname=True)


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("no.such.key=1", "no.such.key"),
        ("num.partitions=many", "num.partitions.*integer"),
        ("unclean.leader.election.enable=yes", "unclean.leader.election.enable.*true or false"),
        ("listeners=http//x", "listeners"),
        ("listeners=SSL://h:1", "listeners.*SSL"),
        ("min.insync.replicas=0", "min.insync.replicas"),
        ("noequals", "key=value"),
    ],
)
def test_bad_values_name_the_key(override: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config(environ={}, overrides=["broker.id=0", override])


def test_unknown_env_key_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"num\.partition"):
        load_config(environ={"HEADWATER_BROKER_ID": "1", "HEADWATER_NUM_PARTITION": "2"})


def test_missing_broker_id() -> None:
    with pytest.raises(ConfigError, match=r"broker\.id"):
        load_config(environ={})


def test_chroot_and_log_config() -> None:
    config = load_config(
        environ={},
        overrides=["broker.id=0", "zookeeper.connect=zk1:2181,zk2:2181/team/hw"],
    )
    assert config.zookeeper_hosts == "zk1:2181,zk2:2181"
    assert config.zookeeper_chroot == "/team/hw"
    assert config.log_config_properties()["max.message.bytes"] == "1048588"
    assert config_from_properties(config.to_properties()) == config


@pytest.mark.parametrize(
    "name",
    ["HEADWATER_KEEP_SWITCH_INTERVAL", "HEADWATER_PURE_PYTHON_RECORDS", "HEADWATER_BOOTSTRAP"],
)
def test_process_and_client_env_names_are_not_broker_settings(name: str) -> None:
    config = load_config(environ={"HEADWATER_BROKER_ID": "3", name: "1"})
    assert config.broker_id == 3


def test_consumer_group_defaults_follow_kafka() -> None:
    config = BrokerConfig(broker_id=0)
    assert config.group_consumer_heartbeat_interval_ms == 5000
    assert config.group_consumer_session_timeout_ms == 45000
    assert config.group_consumer_min_session_timeout_ms == 45000
    assert config.group_consumer_max_session_timeout_ms == 60000
    assert config.group_consumer_min_heartbeat_interval_ms == 5000
    assert config.group_consumer_max_heartbeat_interval_ms == 15000
    assert config.consumer_assignors == ("uniform", "range")
    assert config.group_consumer_max_size == 2147483647
    assert config.group_consumer_migration_policy == "bidirectional"
    validate_config(config)


def test_consumer_group_settings_are_read() -> None:
    config = load_config(
        environ={},
        overrides=[
            "broker.id=0",
            "group.consumer.assignors=range, uniform",
            "group.consumer.min.session.timeout.ms=6000",
            "group.consumer.session.timeout.ms=6000",
            "group.consumer.min.heartbeat.interval.ms=500",
            "group.consumer.heartbeat.interval.ms=500",
            "group.consumer.migration.policy=UPGRADE",
        ],
    )
    assert config.consumer_assignors == ("range", "uniform")
    assert config.group_consumer_migration_policy == "UPGRADE"  # case-insensitive, as Kafka
    assert config.group_consumer_session_timeout_ms == 6000
    assert config.group_consumer_heartbeat_interval_ms == 500


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (["group.consumer.heartbeat.interval.ms=4000"], r"heartbeat\.interval\.ms.*within"),
        (["group.consumer.heartbeat.interval.ms=16000"], r"heartbeat\.interval\.ms.*within"),
        (["group.consumer.session.timeout.ms=44999"], r"session\.timeout\.ms.*within"),
        (["group.consumer.max.session.timeout.ms=1000"], r"max\.session\.timeout\.ms"),
        (["group.consumer.max.heartbeat.interval.ms=1000"], r"max\.heartbeat\.interval\.ms"),
        (["group.consumer.min.heartbeat.interval.ms=0"], r"min\.heartbeat\.interval\.ms"),
        (
            [
                "group.consumer.min.session.timeout.ms=5000",
                "group.consumer.session.timeout.ms=5000",
            ],
            r"heartbeat\.interval\.ms.*< group\.consumer\.session",
        ),
        (["group.consumer.assignors=sticky"], r"assignors.*sticky"),
        (["group.consumer.assignors="], r"assignors"),
        (["group.consumer.assignors=range,range"], r"assignors.*twice"),
        (["group.consumer.max.size=0"], r"group\.consumer\.max\.size"),
        (["group.consumer.max.size=x"], r"group\.consumer\.max\.size.*integer"),
        (["group.consumer.migration.policy=sideways"], r"migration\.policy.*bidirectional"),
    ],
)
def test_bad_consumer_group_settings_name_the_key(overrides: list[str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        load_config(environ={}, overrides=["broker.id=0", *overrides])


def test_repr_leaves_out_every_secret() -> None:
    config = config_from_properties(
        {
            "broker.id": "0",
            "zookeeper.digest.username": "brokers",
            "zookeeper.digest.password": "zk-s3cret",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----inline-key",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="broker" password="jaas-s3cret";'
            ),
        }
    )
    assert config.zookeeper_digest_password == "zk-s3cret"  # kept, only not shown
    shown = repr(config)
    assert "broker_id=0" in shown and "zookeeper_digest_username='brokers'" in shown
    for secret in ("zk-s3cret", "inline-key", "jaas-s3cret"):
        assert secret not in shown


def test_a_key_is_secret_when_its_declared_field_is() -> None:
    declared = {f.metadata["key"]: f for f in dataclasses.fields(BrokerConfig)}
    assert {key for key, f in declared.items() if not f.repr} == SECRET_KEYS
    assert "zookeeper.digest.password" in SECRET_KEYS
    assert "ssl.keystore.location" not in SECRET_KEYS
    for key in ("ssl.keystore.key", "ssl.key.password", "ssl.truststore.password"):
        assert is_secret(key) and is_secret(f"listener.name.client.{key}")
    assert is_secret("listener.name.internal.scram-sha-512.sasl.jaas.config")
    assert not is_secret("listener.name.client.ssl.keystore.location")
    assert not is_secret("listener.name.client.sasl.enabled.mechanisms")
