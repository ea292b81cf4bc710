"""The values every layer names alike (docs/style.md, "Small typed values"): one ``TopicPartition``.

Storage keys its logs by it, replication and the group coordinator key their
state by it, and the client's users hold it.  It lives at the package root,
beside :mod:`headwater.errors`, because the layers may only import downwards
and the client may not import the broker's layers at all (``.importlinter``):
a value that all of them share must sit below every one of them.  This module
imports nothing from Headwater.

A ``NamedTuple`` rather than a dataclass: cheap to build on the hot path,
hashable, and equal (with the same hash) to the plain ``(topic, partition)``
tuple, so a map keyed by it is found with either.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    """One partition of one topic; prints as Kafka does, ``topic-partition``."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
