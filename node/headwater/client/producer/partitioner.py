"""Choosing a partition: Kafka's murmur2 for keys, a sticky partition for keyless records.

Keyed records go to ``(murmur2(key) & 0x7fffffff) % num_partitions`` with
Kafka's exact murmur2 (seed ``0x9747b28c``), so the same key lands on the same
partition number as it would with Kafka's Java client; that matters to anyone
migrating data or running both side by side.

Keyless records stick to one partition until the batch being filled for it is
full (Kafka's KIP-480/794 sticky partitioner): spreading each record over
every partition would make many tiny batches, while sticking makes few full
ones.  The accumulator tells the partitioner when the sticky batch filled
(:meth:`Partitioner.on_batch_full`), and the next keyless record picks another
partition at random.
"""

from __future__ import annotations

import random
from typing import Protocol

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit MurmurHash2 of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    end = length - (length & 3)
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(value: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit."""
    return value & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``."""
    return to_positive(murmur2(key)) % num_partitions


class Partitioner(Protocol):
    """Picks a partition for each record; called from ``Producer.send``'s thread."""

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int: ...

    def on_batch_full(self, topic: str, partition: int, num_partitions: int) -> None:
        """The batch being filled for ``topic``/``partition`` is full."""


class DefaultPartitioner:
    """murmur2 for keyed records, sticky-until-the-batch-fills for keyless ones.

    Not thread-safe by itself: the producer calls it under its append lock.
    """

    def __init__(self, *, rand: random.Random | None = None) -> None:
        self._rand = rand or random.Random()
        self._sticky: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        current = self._sticky.get(topic)
        if current is None or current >= num_partitions:
            current = self._rand.randrange(num_partitions)
            self._sticky[topic] = current
        return current

    @property
    def sticky(self) -> dict[str, int]:
        """Each topic's sticky partition, the dict itself: the producer's C send path
        reads it (without the lock: one dict read under the GIL) and, where a topic
        has none yet, leaves the choice to :meth:`partition`.  Not to be written."""
        return self._sticky

    def on_batch_full(self, topic: str, partition: int, num_partitions: int) -> None:
        if self._sticky.get(topic) != partition:
            return
        if num_partitions <= 1:
            self._sticky[topic] = 0
            return
        # Any partition but the full one, uniformly.
        choice = self._rand.randrange(num_partitions - 1)
        self._sticky[topic] = choice + 1 if choice >= partition else choice


class RoundRobinPartitioner:
    """Every record to the next partition in turn, keys ignored (Kafka's namesake)."""

    def __init__(self) -> None:
        self._next: dict[str, int] = {}

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        n = self._next.get(topic, 0)
        self._next[topic] = n + 1
        return n % num_partitions

    def on_batch_full(self, topic: str, partition: int, num_partitions: int) -> None:
        return None
