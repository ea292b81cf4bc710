"""One broker: produce/fetch round trip, long poll, offsets, and every bad input refused."""

from __future__ import annotations

import threading
import time

import pytest
from headwater.errors import ErrorCode
from headwater.testing import Cluster
from headwater.v1 import admin_pb2, broker_pb2

from .helpers import admin_stub, batch, broker_stub, create_topic, fetch, produce, read_all

pytestmark = pytest.mark.e2e


def test_produce_fetch_round_trip(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    first = produce(address, topic, batch([b"a", b"b", b"c"]), acks=1)
    assert first.error == ErrorCode.NONE and first.base_offset == 0
    second = produce(address, topic, batch([b"d"]), acks=-1)
    assert second.error == ErrorCode.NONE and second.base_offset == 3
    assert produce(address, topic, batch([b"e"]), acks=0).error == ErrorCode.NONE
    assert read_all(address, topic) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d"), (4, b"e")]
    part = fetch(address, topic, 5)
    assert (part.high_watermark, part.log_end_offset, part.log_start_offset) == (5, 5, 0)
    assert part.records == b""


def test_long_poll_is_woken_by_an_append(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    result: list[bytes] = []

    def poll() -> None:
        result.append(fetch(address, topic, 0, max_wait_ms=20000).records)

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.3)  # let the fetch park on the broker
    produce(address, topic, batch([b"wake"]), acks=1)
    poller.join(timeout=15)
    assert not poller.is_alive(), "the long poll was not woken by the append"
    assert result and result[0]


def test_list_offsets(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    produce(address, topic, batch([b"x", b"y"]), acks=1)
    response = broker_stub(address).ListOffsets(
        broker_pb2.ListOffsetsRequest(
            replica_id=-1,
            partitions=[
                broker_pb2.ListOffsetsPartition(topic=topic, partition=0, timestamp=ts)
                for ts in (-2, -1, 0)
            ],
        )
    )
    assert [p.offset for p in response.partitions] == [0, 2, 0]
    assert all(p.error == ErrorCode.NONE for p in response.partitions)


def test_bad_crc_is_corrupt_message_and_nothing_is_stored(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    data = bytearray(batch([b"good"]))
    data[-1] ^= 0xFF
    result = produce(address, topic, bytes(data), acks=1)
    assert result.error == ErrorCode.CORRUPT_MESSAGE
    assert "CRC" in result.error_message
    assert fetch(address, topic, 0).log_end_offset == 0


def test_oversize_batch_is_message_too_large(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    result = produce(address, topic, batch([b"x" * 200_000]), acks=1)
    assert result.error == ErrorCode.MESSAGE_TOO_LARGE
    assert fetch(address, topic, 0).log_end_offset == 0


def test_unknown_topic_and_invalid_acks(single: Cluster) -> None:
    address = single.brokers[0].address
    assert produce(address, "no-such-topic", batch([b"x"])).error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert fetch(address, "no-such-topic", 0).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    topic = create_topic(single)
    assert produce(address, topic, batch([b"x"]), acks=2).error == ErrorCode.INVALID_REQUIRED_ACKS
    assert fetch(address, topic, 0).log_end_offset == 0


def test_fetch_beyond_log_end_is_offset_out_of_range(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    produce(address, topic, batch([b"x"]), acks=1)
    assert fetch(address, topic, 5).error == ErrorCode.OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize(
    ("name", "replication_factor", "expected"),
    [
        ("bad/name", 1, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("fine-name-rf", 3, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_create_topic_refusals(
    single: Cluster, name: str, replication_factor: int, expected: ErrorCode
) -> None:
    response = admin_stub(single.brokers[0].address).CreateTopics(
        admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=replication_factor
                )
            ],
            timeout_ms=5000,
        )
    )
    assert response.topics[0].error == expected
    assert response.topics[0].error_message
    assert single.zk.get_assignment(name) is None


def test_metadata_and_health(single: Cluster) -> None:
    topic = create_topic(single, partitions=2)
    response = broker_stub(single.brokers[0].address).Metadata(
        broker_pb2.MetadataRequest(topics=[topic, "missing-topic"])
    )
    found, missing = response.topics
    assert [p.leader for p in found.partitions] == [0, 0]
    assert missing.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert response.controller_id == 0
    assert [b.id for b in response.brokers] == [0]


def test_altered_topic_config_reaches_the_log(single: Cluster) -> None:
    topic = create_topic(single)
    address = single.brokers[0].address
    response = admin_stub(address).AlterConfigs(
        admin_pb2.AlterConfigsRequest(
            resources=[
                admin_pb2.AlterConfigsResource(
                    type=admin_pb2.TOPIC,
                    name=topic,
                    configs=[admin_pb2.AlterableConfig(name="max.message.bytes", value="500")],
                )
            ]
        )
    )
    assert response.results[0].error == ErrorCode.NONE
    single.wait_for(
        lambda: (
            produce(address, topic, batch([b"x" * 1000]), acks=1).error
            == ErrorCode.MESSAGE_TOO_LARGE
        ),
        what="the new max.message.bytes to apply",
    )
    assert produce(address, topic, batch([b"small"]), acks=1).error == ErrorCode.NONE
