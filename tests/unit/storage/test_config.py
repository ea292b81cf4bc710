"""LogConfig: Kafka's topic keys, defaults, parsing and validation.

Covers: Kafka's defaults, every key parsed from strings, unknown keys and bad
values refused with InvalidConfigError naming the key, cleanup.policy
normalisation, the TOPIC_CONFIG_KEYS set, and the properties round trip.
"""

from __future__ import annotations

import pytest
from headwater.errors import InvalidConfigError
from headwater.storage import TOPIC_CONFIG_KEYS, LogConfig


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1 << 30
    assert c.segment_ms == c.retention_ms == 604_800_000
    assert c.index_interval_bytes == 4096
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.cleanup_policy == "delete" and c.deletes and not c.compacts
    assert c.message_timestamp_type == "CreateTime"
    assert c.min_insync_replicas == 1
    assert c.unclean_leader_election_enable is False


def test_from_properties_parses_every_key() -> None:
    c = LogConfig.from_properties(
        {
            "segment.bytes": "1024",
            "segment.ms": "60000",
            "segment.index.bytes": "4096",
            "index.interval.bytes": "100",
            "retention.ms": "-1",
            "retention.bytes": "1000000",
            "max.message.bytes": "2000",
            "flush.messages": "10",
            "flush.ms": "1000",
            "cleanup.policy": "delete,compact",
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "2",
            "delete.retention.ms": "5",
            "file.delete.delay.ms": "6",
            "unclean.leader.election.enable": "true",
        }
    )
    assert (c.segment_bytes, c.segment_ms, c.segment_index_bytes) == (1024, 60000, 4096)
    assert (c.retention_ms, c.retention_bytes, c.max_message_bytes) == (-1, 1000000, 2000)
    assert (c.flush_messages, c.flush_ms, c.min_insync_replicas) == (10, 1000, 2)
    assert c.cleanup_policy == "compact,delete" and c.deletes and c.compacts
    assert c.message_timestamp_type == "LogAppendTime"
    assert c.unclean_leader_election_enable is True


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "10"),
        ("segment.bytes", "abc"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "shred"),
        ("message.timestamp.type", "createtime"),
        ("unclean.leader.election.enable", "yes"),
        ("min.insync.replicas", "0"),
        ("no.such.key", "1"),
    ],
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})


def test_topic_config_keys_are_kafkas_names() -> None:
    assert "retention.ms" in TOPIC_CONFIG_KEYS and "cleanup.policy" in TOPIC_CONFIG_KEYS
    assert len(TOPIC_CONFIG_KEYS) == 17  # with the two replication throttle lists (issue 17)


def test_properties_round_trip_over_defaults() -> None:
    base = LogConfig(segment_bytes=2048)
    c = LogConfig.from_properties({"retention.ms": "5"}, defaults=base)
    assert (c.segment_bytes, c.retention_ms) == (2048, 5)
    assert LogConfig.from_properties(c.to_properties()) == c
