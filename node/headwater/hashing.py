"""Kafka's placement of a coordinator key: Java's ``String.hashCode`` and ``Utils.abs``.

The group coordinator and the transaction coordinator both live on the leader of
partition ``abs(java_string_hash(key)) % partitions`` of their internal topic,
exactly Kafka's ``Utils.abs(key.hashCode) % partitionCount``: Java's ``String.hashCode``
(``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in 32-bit two's complement)
and Kafka's ``Utils.abs`` (which maps ``Integer.MIN_VALUE`` to 0).  Kafka's hash keeps a
key on the partition a Kafka user would predict, and it is stable across processes
(Python's ``hash`` of a str is salted per process).  It sits at the package root, as
:mod:`headwater.values` does, because ``headwater.groups`` and
``headwater.transactions`` share it and may not import each other.  This module imports
nothing from Headwater.
"""

from __future__ import annotations

__all__ = ["coordinator_partition", "java_string_hash", "kafka_abs"]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``abs`` except that ``Integer.MIN_VALUE`` maps to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def coordinator_partition(key: str, num_partitions: int) -> int:
    """The partition of an internal topic whose leader coordinates ``key``."""
    if num_partitions <= 0:
        raise ValueError(f"the partition count must be > 0, not {num_partitions}")
    return kafka_abs(java_string_hash(key)) % num_partitions
