"""The ``__consumer_offsets`` records of consumer-protocol (KIP-848) groups, as bytes.

Kafka's record types and key versions (``group-coordinator/src/main/resources/common/
message/ConsumerGroup*Key.json``), so the topic holds the same records for the same
state; the encoding is that of :mod:`headwater.groups.records` (big-endian, int16-length
strings, -1 for null, int32-counted arrays), not Kafka's flexible versions, and topics are
named rather than identified by topic id (Headwater has none).  Keys::

    version int16   3: group metadata   5: member metadata   6: target assignment metadata
                    7: target assignment of a member         8: current assignment of a member
                    16: a resolved regular expression
                    (4, partition metadata, is read and ignored: partition counts come
                    from the broker's metadata cache)
    group   string
    member  string  (versions 5, 7 and 8 only; for 16, the regular expression)

Values, each ``version int16 = 0`` then::

    3  epoch int32                                      (the group epoch)
    5  instance_id nstring, rack_id nstring, client_id string, client_host string,
       subscribed_topic_names [string], subscribed_topic_regex nstring,
       rebalance_timeout_ms int32, server_assignor nstring
       [then, for a classic member of a converted group only (Kafka's
       ClassicMemberMetadata): session_timeout_ms int32,
       supported_protocols [name string, metadata int32-length bytes]]
    6  assignment_epoch int32                           (the target assignment's epoch)
    7  topic_partitions [topic string, partitions [int32]]
    8  member_epoch int32, previous_member_epoch int32, state int8 (Kafka's MemberState:
       0 stable, 1 unrevoked, 2 unreleased), assigned_partitions [...],
       partitions_pending_revocation [...]
    16 topics [string]                                  (the topics the regex matched; Kafka
                                                         adds a metadata version and time)

A null value is a tombstone.  The coordinator writes what changed: :func:`image` is the
set of records a group's state is, and :func:`changes` the records that turn one image
into the next (new or changed values, then tombstones for keys gone), so every accepted
heartbeat or timer writes exactly the difference, and replaying the log in order
(:func:`apply`) rebuilds the same image.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from headwater.groups.consumer.group import (
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from headwater.groups.records import CoordinatorRecord, Reader, encode_string
from headwater.groups.values import Protocol
from headwater.values import TopicPartition

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
REGULAR_EXPRESSION = 16
KEY_VERSIONS = frozenset({*range(3, 9), REGULAR_EXPRESSION})
_WITH_MEMBER = (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION)
VALUE_VERSION = 0
_WRITE_ORDER = (
    REGULAR_EXPRESSION,
    MEMBER_METADATA,
    GROUP_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    CURRENT_ASSIGNMENT,
)
"""Kafka's order of a heartbeat's records (tombstones go in the reverse order)."""

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_STATE_CODES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES = {code: state for state, code in _STATE_CODES.items()}


class ConsumerKey(NamedTuple):
    version: int
    group: str
    member: str | None = None
    """The member id; for :data:`REGULAR_EXPRESSION`, the regular expression."""


class MemberMetadata(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_session_timeout_ms: int = 0
    classic_protocols: tuple[Protocol, ...] | None = None
    """Set for a classic member of a converted group only."""


class CurrentAssignment(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: frozenset[TopicPartition]
    pending_revocation: frozenset[TopicPartition]


# -- encoding -----------------------------------------------------------------------


def key_version(key: bytes) -> int:
    return int(_I16.unpack_from(key)[0]) if len(key) >= 2 else -1


def encode_key(key: ConsumerKey) -> bytes:
    parts = [_I16.pack(key.version), encode_string(key.group)]
    if key.version in _WITH_MEMBER:
        if key.member is None:
            raise ValueError(f"key version {key.version} needs a member id")
        parts.append(encode_string(key.member))
    return b"".join(parts)


def _epoch_value(epoch: int) -> bytes:
    return _I16.pack(VALUE_VERSION) + _I32.pack(epoch)


def _strings(items: Iterable[str]) -> bytes:
    listed = list(items)
    return _I32.pack(len(listed)) + b"".join(encode_string(s) for s in listed)


def _partitions(tps: Iterable[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(tps):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    parts = [_I32.pack(len(by_topic))]
    for topic, ps in by_topic.items():
        parts += [encode_string(topic), _I32.pack(len(ps)), *(_I32.pack(p) for p in ps)]
    return b"".join(parts)


def encode_member_metadata(v: MemberMetadata) -> bytes:
    return b"".join(
        (
            _I16.pack(VALUE_VERSION),
            encode_string(v.instance_id),
            encode_string(v.rack_id),
            encode_string(v.client_id),
            encode_string(v.client_host),
            _strings(v.subscribed_topic_names),
            encode_string(v.subscribed_topic_regex),
            _I32.pack(v.rebalance_timeout_ms),
            encode_string(v.server_assignor),
            _classic_member(v),
        )
    )


def _classic_member(v: MemberMetadata) -> bytes:
    if v.classic_protocols is None:
        return b""
    parts = [_I32.pack(v.classic_session_timeout_ms), _I32.pack(len(v.classic_protocols))]
    for p in v.classic_protocols:
        parts += [encode_string(p.name), _I32.pack(len(p.metadata)), p.metadata]
    return b"".join(parts)


def encode_target_member(tps: Iterable[TopicPartition]) -> bytes:
    return _I16.pack(VALUE_VERSION) + _partitions(tps)


def encode_current_assignment(v: CurrentAssignment) -> bytes:
    return b"".join(
        (
            _I16.pack(VALUE_VERSION),
            _I32.pack(v.member_epoch),
            _I32.pack(v.previous_member_epoch),
            _I8.pack(_STATE_CODES[v.state]),
            _partitions(v.assigned),
            _partitions(v.pending_revocation),
        )
    )


# -- decoding -----------------------------------------------------------------------


def decode_key(data: bytes) -> ConsumerKey:
    r = Reader(data)
    version = r.i16()
    if version not in KEY_VERSIONS:
        raise ValueError(f"not a consumer group key (version {version})")
    group = r.str()
    member = r.str() if version in _WITH_MEMBER else None
    return ConsumerKey(version, group, member)


def _value_reader(data: bytes, what: str) -> Reader:
    r = Reader(data)
    version = r.i16()
    if version != VALUE_VERSION:
        raise ValueError(f"unknown {what} value version {version}")
    return r


def _read_strings(r: Reader) -> tuple[str, ...]:
    return tuple(r.str() for _ in range(r.i32()))


def _read_partitions(r: Reader) -> frozenset[TopicPartition]:
    out: set[TopicPartition] = set()
    for _ in range(r.i32()):
        topic = r.str()
        out.update(TopicPartition(topic, r.i32()) for _ in range(r.i32()))
    return frozenset(out)


def decode_epoch(data: bytes) -> int:
    return _value_reader(data, "consumer group epoch").i32()


def decode_member_metadata(data: bytes) -> MemberMetadata:
    r = _value_reader(data, "consumer group member metadata")
    md = MemberMetadata(
        r.nstr(), r.nstr(), r.str(), r.str(), _read_strings(r), r.nstr(), r.i32(), r.nstr()
    )
    if r.pos >= len(r.data):
        return md
    session = r.i32()
    protocols = tuple(Protocol(r.str(), r.bytes()) for _ in range(r.i32()))
    return md._replace(classic_session_timeout_ms=session, classic_protocols=protocols)


def encode_regex_topics(topics: Iterable[str]) -> bytes:
    return _I16.pack(VALUE_VERSION) + _strings(sorted(topics))


def decode_regex_topics(data: bytes) -> frozenset[str]:
    return frozenset(_read_strings(_value_reader(data, "regular expression")))


def decode_target_member(data: bytes) -> frozenset[TopicPartition]:
    return _read_partitions(_value_reader(data, "target assignment member"))


def decode_current_assignment(data: bytes) -> CurrentAssignment:
    r = _value_reader(data, "current member assignment")
    member_epoch, previous = r.i32(), r.i32()
    code = r.i8()
    if code not in _STATES:
        raise ValueError(f"unknown member state {code}")
    return CurrentAssignment(
        member_epoch, previous, _STATES[code], _read_partitions(r), _read_partitions(r)
    )


# -- images, changes, replay ------------------------------------------------------------


def _member_metadata(m: ConsumerMember) -> MemberMetadata:
    return MemberMetadata(
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        tuple(sorted(m.subscribed_topics)),
        m.subscribed_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
        m.classic_session_timeout_ms,
        m.classic_protocols,
    )


def image(group: ConsumerGroup) -> dict[ConsumerKey, bytes]:
    """The records (latest value per key) that hold ``group``'s state."""
    gid = group.group_id
    out = {
        ConsumerKey(GROUP_METADATA, gid): _epoch_value(group.group_epoch),
        ConsumerKey(TARGET_METADATA, gid): _epoch_value(group.target_epoch),
    }
    for m in sorted(group.members.values(), key=lambda m: m.member_id):
        regex_key = ConsumerKey(REGULAR_EXPRESSION, gid, m.subscribed_regex)
        if m.subscribed_regex and regex_key not in out:
            out[regex_key] = encode_regex_topics(m.regex_topics)
    for mid, tps in group.target.items():
        out[ConsumerKey(TARGET_MEMBER, gid, mid)] = encode_target_member(tps)
    for m in group.members.values():
        out[ConsumerKey(MEMBER_METADATA, gid, m.member_id)] = encode_member_metadata(
            _member_metadata(m)
        )
        out[ConsumerKey(CURRENT_ASSIGNMENT, gid, m.member_id)] = encode_current_assignment(
            CurrentAssignment(
                m.member_epoch,
                m.previous_member_epoch,
                m.state,
                m.assigned,
                m.pending_revocation,
            )
        )
    return out


def changes(
    before: Mapping[ConsumerKey, bytes], after: Mapping[ConsumerKey, bytes]
) -> list[CoordinatorRecord]:
    """The records that turn ``before`` into ``after``: values in Kafka's order, then
    tombstones in the reverse order."""
    order = {v: i for i, v in enumerate(_WRITE_ORDER)}
    written = sorted(
        (k for k, v in after.items() if before.get(k) != v), key=lambda k: (order[k.version], k)
    )
    gone = sorted((k for k in before if k not in after), key=lambda k: (-order[k.version], k))
    return [CoordinatorRecord(encode_key(k), after[k]) for k in written] + [
        CoordinatorRecord(encode_key(k), None) for k in gone
    ]


def apply(
    group: ConsumerGroup,
    key: ConsumerKey,
    value: bytes | None,
    regexes: dict[str, frozenset[str]],
) -> bool:
    """Apply one record to ``group`` (in log order), resolved regular expressions to
    ``regexes``; False if it deletes the group."""
    v = key.version
    if v == REGULAR_EXPRESSION:
        assert key.member is not None
        if value is None:
            regexes.pop(key.member, None)
        else:
            regexes[key.member] = decode_regex_topics(value)
    elif v == GROUP_METADATA:
        if value is None:
            return False
        group.group_epoch = decode_epoch(value)
    elif v == TARGET_METADATA:
        if value is not None:
            group.target_epoch = decode_epoch(value)
    elif v == TARGET_MEMBER:
        assert key.member is not None
        if value is None:
            group.target.pop(key.member, None)
        else:
            group.target[key.member] = decode_target_member(value)
    elif v == MEMBER_METADATA:
        assert key.member is not None
        if value is None:
            group.members.pop(key.member, None)
        else:
            md = decode_member_metadata(value)
            m = _member(group, key.member)
            m.instance_id, m.rack_id = md.instance_id, md.rack_id
            m.client_id, m.client_host = md.client_id, md.client_host
            m.subscribed_topics = frozenset(md.subscribed_topic_names)
            m.subscribed_regex = md.subscribed_topic_regex
            m.rebalance_timeout_ms = md.rebalance_timeout_ms
            m.server_assignor = md.server_assignor
            m.classic_protocols = md.classic_protocols
            m.classic_session_timeout_ms = md.classic_session_timeout_ms
    elif v == CURRENT_ASSIGNMENT:
        assert key.member is not None
        if value is not None:
            ca = decode_current_assignment(value)
            m = _member(group, key.member)
            m.member_epoch, m.previous_member_epoch = ca.member_epoch, ca.previous_member_epoch
            m.state, m.assigned, m.pending_revocation = ca.state, ca.assigned, ca.pending_revocation
    return True


def _member(group: ConsumerGroup, member_id: str) -> ConsumerMember:
    m = group.members.get(member_id)
    if m is None:
        m = group.members[member_id] = ConsumerMember(member_id, None)
    return m
