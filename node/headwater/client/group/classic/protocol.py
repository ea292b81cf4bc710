"""Kafka's ConsumerProtocol: a member's subscription and its assignment, as bytes.

The coordinator never looks inside these; the members (and the group leader, which
runs the assignor) do.  Layout, big-endian, ``string`` = int16 length + UTF-8::

    Subscription v1:  version int16 = 1
                      topics            int32 n, n * string
                      user_data         int32 length (-1: null), bytes
                      owned_partitions  int32 n, n * (topic string, int32 m, m * int32)
                      generation        int32  (v2 field, kept for the sticky assignors)

    Assignment v1:    version int16 = 1
                      partitions        int32 n, n * (topic string, int32 m, m * int32)
                      user_data         int32 length (-1: null), bytes
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from headwater.client.types import TopicPartition

VERSION = 1
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ConsumerSubscription(NamedTuple):
    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = -1
    user_data: bytes | None = None


class ConsumerAssignment(NamedTuple):
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def _str(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def _nbytes(b: bytes | None) -> bytes:
    return _I32.pack(-1) if b is None else _I32.pack(len(b)) + b


def _partitions(tps: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(tp.partition)
    out = [_I32.pack(len(by_topic))]
    for topic in sorted(by_topic):
        parts = sorted(by_topic[topic])
        out += [_str(topic), _I32.pack(len(parts)), *(_I32.pack(p) for p in parts)]
    return b"".join(out)


def encode_subscription(sub: ConsumerSubscription) -> bytes:
    return b"".join(
        (
            _I16.pack(VERSION),
            _I32.pack(len(sub.topics)),
            *(_str(t) for t in sub.topics),
            _nbytes(sub.user_data),
            _partitions(sub.owned_partitions),
            _I32.pack(sub.generation),
        )
    )


def encode_assignment(assignment: ConsumerAssignment) -> bytes:
    return b"".join(
        (_I16.pack(VERSION), _partitions(assignment.partitions), _nbytes(assignment.user_data))
    )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated consumer protocol bytes")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def str(self) -> str:
        return self.take(self.i16()).decode()

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n == -1 else self.take(n)

    def partitions(self) -> tuple[TopicPartition, ...]:
        out: list[TopicPartition] = []
        for _ in range(self.i32()):
            topic = self.str()
            out += [TopicPartition(topic, self.i32()) for _ in range(self.i32())]
        return tuple(out)

    @property
    def done(self) -> bool:
        return self.pos >= len(self.data)


def decode_subscription(data: bytes) -> ConsumerSubscription:
    r = _Reader(data)
    if r.i16() < 0:
        raise ValueError("bad subscription version")
    topics = tuple(r.str() for _ in range(r.i32()))
    user_data = r.nbytes()
    owned = r.partitions() if not r.done else ()
    generation = r.i32() if not r.done else -1
    return ConsumerSubscription(topics, owned, generation, user_data)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    if not data:
        return ConsumerAssignment(())
    r = _Reader(data)
    if r.i16() < 0:
        raise ValueError("bad assignment version")
    partitions = r.partitions()
    return ConsumerAssignment(partitions, r.nbytes() if not r.done else None)
