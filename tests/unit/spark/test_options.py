"""Option parsing and validation: Spark's Kafka source names, defaults and refusals.

Every refusal must name the offending option, at planning time.
"""

from __future__ import annotations

import pytest
from headwater.client.types import TopicPartition
from headwater_spark.options import (
    OptionError,
    include_headers,
    parse_read_options,
    parse_write_options,
)

BASE = {"bootstrap.servers": "127.0.0.1:9092", "subscribe": "orders"}


def read(streaming: bool = False, **extra: str) -> object:
    return parse_read_options({**BASE, **extra}, streaming=streaming)


def test_defaults_match_the_kafka_source() -> None:
    batch = parse_read_options(BASE, streaming=False)
    assert batch.starting.kind == "earliest"
    assert batch.ending.kind == "latest"
    assert batch.fail_on_data_loss is True
    assert batch.include_headers is False
    assert batch.min_partitions is None
    stream = parse_read_options(BASE, streaming=True)
    assert stream.starting.kind == "latest"
    assert stream.max_offsets_per_trigger is None


def test_keys_are_case_insensitive_and_the_kafka_prefix_is_an_alias() -> None:
    opts = parse_read_options(
        {"KAFKA.BOOTSTRAP.SERVERS": "h:1,h:2", "SubscribePattern": "ord.*"}, streaming=True
    )
    assert opts.bootstrap_servers == "h:1,h:2"
    assert opts.subscription.kind == "subscribePattern"
    assert opts.subscription.matches("orders")
    assert not opts.subscription.matches("xorders")


def test_numbers_and_flags_are_parsed() -> None:
    opts = parse_read_options(
        {
            **BASE,
            "minPartitions": "8",
            "maxRecordsPerPartition": "1000",
            "maxOffsetsPerTrigger": "50",
            "includeHeaders": "TRUE",
            "failOnDataLoss": "false",
            "fetch.max.bytes": "1048576",
            "kafkaConsumer.pollTimeoutMs": "5000",
            "groupId": "etl",
        },
        streaming=True,
    )
    assert (opts.min_partitions, opts.max_records_per_partition) == (8, 1000)
    assert opts.max_offsets_per_trigger == 50
    assert opts.include_headers and not opts.fail_on_data_loss
    assert opts.fetch_max_bytes == 1048576
    assert opts.max_partition_fetch_bytes == 1048576
    assert opts.poll_timeout_ms == 5000
    assert opts.group_id == "etl"


def test_isolation_level_defaults_to_read_uncommitted_as_sparks_kafka_source() -> None:
    assert not read().read_committed
    assert read(**{"kafka.isolation.level": "read_committed"}).read_committed
    assert read(**{"isolation.level": "READ_COMMITTED"}).read_committed
    assert not read(streaming=True, **{"kafka.isolation.level": "read_uncommitted"}).read_committed


def test_offsets_json_with_earliest_and_latest_markers() -> None:
    opts = read(
        streaming=True,
        startingOffsets='{"orders": {"0": 23, "1": -2, "2": -1}}',
    )
    assert opts.starting.kind == "offsets"
    assert dict(opts.starting.offsets) == {
        TopicPartition("orders", 0): 23,
        TopicPartition("orders", 1): -2,
        TopicPartition("orders", 2): -1,
    }


def test_assign_takes_json_partitions() -> None:
    opts = parse_read_options(
        {"bootstrap.servers": "h:1", "assign": '{"a": [1, 0], "b": [2]}'}, streaming=False
    )
    assert opts.subscription.partitions == (
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("b", 2),
    )


def test_timestamp_options() -> None:
    opts = read(startingTimestamp="1700000000000", endingOffsetsByTimestamp='{"orders":{"0":5}}')
    assert opts.starting.kind == "timestamp"
    assert opts.starting.timestamp_ms == 1700000000000
    assert opts.ending.kind == "timestamps"
    latest = read(startingOffsetsByTimestampStrategy="LATEST")
    assert latest.timestamp_strategy == "latest"


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "t"}, "bootstrap.servers"),
        ({"bootstrap.servers": "nohost", "subscribe": "t"}, "bootstrap.servers"),
        ({"bootstrap.servers": "h:1"}, "subscribe"),
        ({**BASE, "assign": '{"t":[0]}'}, "assign"),
        ({**BASE, "startingOffset": "earliest"}, "startingOffset"),
        ({**BASE, "kafka.security.protocol": "TLS"}, "kafka.security.protocol"),
        ({**BASE, "startingOffsets": "latest"}, "startingOffsets"),
        ({**BASE, "endingOffsets": "earliest"}, "endingOffsets"),
        ({**BASE, "startingOffsets": '{"orders":{"0":-1}}'}, "startingOffsets"),
        ({**BASE, "endingOffsets": '{"orders":{"0":-2}}'}, "endingOffsets"),
        ({**BASE, "startingOffsets": "{not json"}, "startingOffsets"),
        ({**BASE, "startingOffsets": '{"orders":{"x":1}}'}, "startingOffsets"),
        ({**BASE, "startingTimestamp": "1", "startingOffsets": "earliest"}, "startingTimestamp"),
        ({**BASE, "minPartitions": "0"}, "minPartitions"),
        ({**BASE, "minPartitions": "many"}, "minPartitions"),
        ({**BASE, "failOnDataLoss": "yes"}, "failOnDataLoss"),
        ({**BASE, "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger"),
        ({**BASE, "groupId": "g"}, "groupId"),
        ({**BASE, "startingOffsetsByTimestampStrategy": "skip"}, "startingOffsetsByTimestamp"),
        ({**BASE, "fetch.max.bytes": "1", "kafka.fetch.max.bytes": "2"}, "fetch.max.bytes"),
        ({**BASE, "subscribePattern": "("}, "subscribePattern"),
        ({**BASE, "kafka.isolation.level": "serializable"}, "kafka.isolation.level"),
        ({**BASE, "kafka.isolation.level": "read_committed", "isolation.level": "x"}, "isolation"),
    ],
)
def test_batch_refusals_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named):
        parse_read_options(options, streaming=False)


def test_streaming_refuses_an_end() -> None:
    with pytest.raises(OptionError, match="endingOffsets"):
        read(streaming=True, endingOffsets="latest")


def test_include_headers_is_read_before_full_validation() -> None:
    assert include_headers({"INCLUDEHEADERS": "true"})
    assert not include_headers({"subscribe": "x"})


def test_write_options_pass_producer_settings_through() -> None:
    opts = parse_write_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": "out",
            "compression.type": "zstd",
            "kafka.linger.ms": "20",
            "batch.size": "65536",
            "checkpointLocation": "/tmp/x",
        }
    )
    assert opts.topic == "out"
    assert dict(opts.producer) == {
        "acks": "all",
        "compression_type": "zstd",
        "linger_ms": 20,
        "batch_size": 65536,
    }


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"bootstrap.servers": "h:1", "acks": "2"}, "acks"),
        ({"bootstrap.servers": "h:1", "compression.type": "brotli"}, "compression.type"),
        ({"bootstrap.servers": "h:1", "linger.ms": "-1"}, "linger.ms"),
        ({"bootstrap.servers": "h:1", "subscribe": "t"}, "subscribe"),
        ({"topic": "t"}, "bootstrap.servers"),
    ],
)
def test_write_refusals_name_the_option(options: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named):
        parse_write_options(options)
