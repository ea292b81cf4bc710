"""The record values producers hand in and consumers get back.

Both are NamedTuples: immutable, slot-free tuples that are the cheapest Python
objects to create and unpack, which matters at hundreds of thousands of
records per second.  Header keys are ``str`` (UTF-8 on the wire, as in Kafka);
header values, keys and values are raw bytes or ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["ConsumedRecord", "Header", "Record"]

Header = tuple[str, bytes | None]
"""One record header: a UTF-8 key and a value that may be null."""


class Record(NamedTuple):
    """A record to produce; ``timestamp_ms=None`` means "stamp it when the batch is built"."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()
    timestamp_ms: int | None = None


class ConsumedRecord(NamedTuple):
    """A record read back from a batch, with its absolute offset and effective timestamp.

    With LogAppendTime the timestamp is the batch's ``max_timestamp`` (the
    broker's append time), as Kafka reports it.
    """

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
