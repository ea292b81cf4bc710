"""The records of ``__consumer_offsets``: committed offsets and group metadata, as bytes.

The layout is Kafka's own (``GroupMetadataManager`` schemas), so the topic reads the
same to anyone who knows Kafka.  All integers are big-endian; ``string`` is an int16
length then UTF-8 bytes (length -1: null); ``bytes`` is an int32 length then the bytes.

Key (every record has one; it is what compaction keeps the latest value of)::

    version int16        0 or 1: an offset commit key; 2: a group metadata key
    group   string
    -- offset commit keys only:
    topic     string
    partition int32

Offset commit value, version 3::

    version                int16 = 3
    offset                 int64
    leader_epoch           int32   (-1: unknown)
    metadata               string
    commit_timestamp_ms    int64

Group metadata value, version 3::

    version                 int16 = 3
    protocol_type           string
    generation              int32
    protocol                string (nullable: no protocol while Empty)
    leader                  string (nullable)
    current_state_timestamp int64
    members                 int32 count, then per member:
        member_id           string
        group_instance_id   string (nullable)
        client_id           string
        client_host         string
        rebalance_timeout   int32
        session_timeout     int32
        subscription        bytes   (the member's metadata for the selected protocol)
        assignment          bytes

A null value is a tombstone: the offset was deleted or expired, or the group was deleted.
Key versions 3 to 8 are the consumer-protocol (KIP-848) groups' records, in
:mod:`headwater.groups.consumer.records`.  Unknown key versions are refused with
``ValueError`` rather than silently skipped, so a newer format is never half-understood.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_FIXED = struct.Struct(">hqi")  # version, offset, leader_epoch


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


class OffsetValue(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int


class MemberValue(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


class GroupValue(NamedTuple):
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberValue, ...]


class CoordinatorRecord(NamedTuple):
    """One record to append to ``__consumer_offsets`` (value None: tombstone)."""

    key: bytes
    value: bytes | None


# -- writing ------------------------------------------------------------------------


def encode_string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    raw = s.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long for the offsets topic")
    return _I16.pack(len(raw)) + raw


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def encode_offset_key(key: OffsetKey) -> bytes:
    return b"".join(
        (
            _I16.pack(OFFSET_KEY_VERSION),
            encode_string(key.group),
            encode_string(key.topic),
            _I32.pack(key.partition),
        )
    )


def encode_group_key(key: GroupKey) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + encode_string(key.group)


def encode_offset_value(value: OffsetValue) -> bytes:
    return b"".join(
        (
            _OFFSET_FIXED.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch),
            encode_string(value.metadata),
            _I64.pack(value.commit_timestamp_ms),
        )
    )


def encode_group_value(value: GroupValue) -> bytes:
    parts = [
        _I16.pack(GROUP_VALUE_VERSION),
        encode_string(value.protocol_type),
        _I32.pack(value.generation),
        encode_string(value.protocol),
        encode_string(value.leader),
        _I64.pack(value.current_state_timestamp_ms),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += [
            encode_string(m.member_id),
            encode_string(m.group_instance_id),
            encode_string(m.client_id),
            encode_string(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(parts)


def offset_record(key: OffsetKey, value: OffsetValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        encode_offset_key(key), encode_offset_value(value) if value is not None else None
    )


def group_record(key: GroupKey, value: GroupValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        encode_group_key(key), encode_group_value(value) if value is not None else None
    )


# -- reading ------------------------------------------------------------------------


class Reader:
    """Reads the fields of one record, in order; ``ValueError`` when it is truncated."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated __consumer_offsets record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def nstr(self) -> str | None:
        n = self.i16()
        return None if n == -1 else self._take(n).decode()

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise ValueError("unexpected null string in __consumer_offsets record")
        return s

    def bytes(self) -> bytes:
        return self._take(self.i32())


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.str(), r.str(), r.i32())
    if version == 2:
        return GroupKey(r.str())
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(data: bytes) -> OffsetValue:
    r = Reader(data)
    version = r.i16()
    if version != OFFSET_VALUE_VERSION:
        raise ValueError(f"unknown offset commit value version {version}")
    offset, epoch = r.i64(), r.i32()
    return OffsetValue(offset, epoch, r.str(), r.i64())


def decode_group_value(data: bytes) -> GroupValue:
    r = Reader(data)
    version = r.i16()
    if version != GROUP_VALUE_VERSION:
        raise ValueError(f"unknown group metadata value version {version}")
    protocol_type, generation = r.str(), r.i32()
    protocol, leader, ts = r.nstr(), r.nstr(), r.i64()
    members = tuple(
        MemberValue(r.str(), r.nstr(), r.str(), r.str(), r.i32(), r.i32(), r.bytes(), r.bytes())
        for _ in range(r.i32())
    )
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)
