"""Partitioning: Kafka's murmur2 vectors, key placement, and the sticky keyless partitioner."""

from __future__ import annotations

import random

import pytest
from headwater.client.producer.partitioner import (
    DefaultPartitioner,
    RoundRobinPartitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# Kafka's UtilsTest.testMurmur2 vectors, plus the values Akka checks against Kafka's.
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_key_partition_is_kafka_formula() -> None:
    for data, h in KAFKA_VECTORS:
        assert partition_for_key(data, 12) == (h & 0x7FFFFFFF) % 12
    assert to_positive(-1) == 0x7FFFFFFF


def test_keyed_records_ignore_stickiness() -> None:
    p = DefaultPartitioner(rand=random.Random(1))
    assert {p.partition("t", b"k", 10) for _ in range(20)} == {partition_for_key(b"k", 10)}


def test_keyless_records_stick_until_batch_full() -> None:
    p = DefaultPartitioner(rand=random.Random(7))
    first = p.partition("t", None, 5)
    assert all(p.partition("t", None, 5) == first for _ in range(100))
    p.on_batch_full("t", first, 5)
    second = p.partition("t", None, 5)
    assert second != first
    assert all(p.partition("t", None, 5) == second for _ in range(100))


def test_batch_full_on_other_partition_does_not_switch() -> None:
    p = DefaultPartitioner(rand=random.Random(3))
    current = p.partition("t", None, 4)
    p.on_batch_full("t", (current + 1) % 4, 4)
    assert p.partition("t", None, 4) == current


def test_sticky_spreads_over_partitions() -> None:
    p = DefaultPartitioner(rand=random.Random(11))
    seen = set()
    for _ in range(200):
        part = p.partition("t", None, 4)
        seen.add(part)
        p.on_batch_full("t", part, 4)
    assert seen == {0, 1, 2, 3}


def test_sticky_single_partition_and_shrunk_count() -> None:
    p = DefaultPartitioner(rand=random.Random(5))
    assert p.partition("t", None, 1) == 0
    p.on_batch_full("t", 0, 1)
    assert p.partition("t", None, 1) == 0
    p._sticky["u"] = 9
    assert 0 <= p.partition("u", None, 3) < 3


def test_round_robin() -> None:
    p = RoundRobinPartitioner()
    assert [p.partition("t", b"k", 3) for _ in range(5)] == [0, 1, 2, 0, 1]
