"""Kafka's ConsumerProtocol bytes, checked against fixed vectors written out by hand.

Covers :mod:`headwater.client.group.classic.protocol` field by field (docs/style.md): the layout in
its docstring, big-endian int16 string lengths, a null ``user_data`` as length -1, owned
partitions grouped by topic in sorted order, the v1 ``generation`` trailer, and the
readers' tolerance of v0 bytes (no owned partitions, no generation) and refusal of
truncated ones.
"""

from __future__ import annotations

import pytest
from headwater.client.group.classic import protocol
from headwater.client.types import TopicPartition

TP = TopicPartition

SUBSCRIPTION = bytes.fromhex(
    "0001"  # version 1
    "00000002"  # 2 topics
    "0001"
    "61"  # "a"
    "0001"
    "62"  # "b"
    "ffffffff"  # user_data: null
    "00000001"  # owned: 1 topic
    "0001"
    "61"  # "a"
    "00000002"
    "00000000"
    "00000003"  # partitions 0, 3
    "00000007"  # generation 7
)

ASSIGNMENT = bytes.fromhex(
    "0001"  # version 1
    "00000002"  # 2 topics, sorted
    "0001"
    "61"
    "00000001"
    "00000002"  # "a": [2]
    "0001"
    "62"
    "00000002"
    "00000000"
    "00000001"  # "b": [0, 1]
    "00000002"
    "6869"  # user_data: b"hi"
)


def test_subscription_bytes() -> None:
    sub = protocol.ConsumerSubscription(("a", "b"), (TP("a", 3), TP("a", 0)), 7)
    assert protocol.encode_subscription(sub) == SUBSCRIPTION
    decoded = protocol.decode_subscription(SUBSCRIPTION)
    assert decoded == protocol.ConsumerSubscription(("a", "b"), (TP("a", 0), TP("a", 3)), 7)


def test_assignment_bytes() -> None:
    asg = protocol.ConsumerAssignment((TP("b", 1), TP("a", 2), TP("b", 0)), b"hi")
    assert protocol.encode_assignment(asg) == ASSIGNMENT
    assert protocol.decode_assignment(ASSIGNMENT) == protocol.ConsumerAssignment(
        (TP("a", 2), TP("b", 0), TP("b", 1)), b"hi"
    )


def test_a_v0_subscription_has_no_owned_partitions_or_generation() -> None:
    v0 = bytes.fromhex("00000000000100016100000000")
    assert protocol.decode_subscription(v0) == protocol.ConsumerSubscription(("a",), (), -1, b"")


def test_an_assignment_without_user_data_reads_as_none() -> None:
    data = bytes.fromhex("000100000000")
    assert protocol.decode_assignment(data) == protocol.ConsumerAssignment((), None)


@pytest.mark.parametrize("cut", [1, 5, 8, len(SUBSCRIPTION) - 9])
def test_truncated_subscription_is_refused(cut: int) -> None:
    with pytest.raises(ValueError, match="truncated"):
        protocol.decode_subscription(SUBSCRIPTION[:cut])


def test_negative_versions_are_refused() -> None:
    with pytest.raises(ValueError, match="version"):
        protocol.decode_subscription(bytes.fromhex("ffff"))
    with pytest.raises(ValueError, match="version"):
        protocol.decode_assignment(bytes.fromhex("ffff"))
