"""A Fetch answer encoded by hand around the record bytes: the ``FetchResponse`` wire bytes
with each partition's records copied once.

Building a ``FetchResponse`` message copies the records into it, and serializing it
copies them again (with upb, serializing a new message's large ``bytes`` field
cost ~2 ms per MiB on the project's machine, most of a broker's CPU per fetched
byte).  Here each partition's fields other than ``records`` are serialized by
the generated class, and the records are placed between them with their own tag
and length, so that one ``bytes.join`` is the only copy of the record bytes.

The bytes are the ones ``FetchResponse.SerializeToString()`` produces for the
same answer: fields in field-number order, ``records`` (field 8) between the
fields numbered below it (``head``) and above it (``tail``), a zero-length
``records`` left out as proto3 leaves out an empty ``bytes`` field, and no
``throttle_time_ms`` (0).  Concatenated encodings of one message decode as that
message, so any protobuf decoder reads the answer; the unit tests also check the
bytes against the generated class's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from headwater.v1 import broker_pb2

_PARTITIONS_TAG = b"\x0a"
"""``FetchResponse.partitions``: field 1, length-delimited."""

_RECORDS_TAG = b"\x42"
"""``FetchedPartition.records``: field 8, length-delimited."""


class EncodedPartition(NamedTuple):
    """One ``FetchedPartition``: its fields numbered below 8 (``head``) and above 8
    (``tail``) as messages without records, and the record bytes."""

    head: broker_pb2.FetchedPartition
    records: bytes
    tail: broker_pb2.FetchedPartition | None = None


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative ``n``."""
    if n < 0:
        raise ValueError(f"a length must be >= 0, got {n}")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_throttle_time(ms: int) -> bytes:
    """``FetchResponse.throttle_time_ms`` (field 2) as wire bytes, to go before or after
    the partitions (empty for 0, proto3's default)."""
    return b"\x10" + varint(ms) if ms > 0 else b""


def encode_fetch_response(
    refused: Iterable[broker_pb2.FetchedPartition], partitions: Iterable[EncodedPartition]
) -> bytes:
    """The wire bytes of ``FetchResponse(partitions=[*refused, *partitions])``.

    ``refused`` are whole messages (no records); each of ``partitions`` is encoded
    as its head, its records (tag, length, bytes) and its tail."""
    parts: list[bytes] = []
    for message in refused:
        body = message.SerializeToString()
        parts += (_PARTITIONS_TAG, varint(len(body)), body)
    for p in partitions:
        if p.head.records or (p.tail is not None and p.tail.records):
            raise ValueError("an encoded partition's head and tail must not carry records")
        head = p.head.SerializeToString()
        tail = p.tail.SerializeToString() if p.tail is not None else b""
        size = len(p.records)
        if size:
            length = varint(size)
            parts += (
                _PARTITIONS_TAG,
                varint(len(head) + 1 + len(length) + size + len(tail)),
                head,
                _RECORDS_TAG,
                length,
                p.records,
                tail,
            )
        else:
            parts += (_PARTITIONS_TAG, varint(len(head) + len(tail)), head, tail)
    return b"".join(parts)
