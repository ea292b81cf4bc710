"""The records of ``__transaction_state``, as bytes, and the replay that rebuilds its state.

The layout is Kafka's (``TransactionLogKey.json``, ``TransactionLogValue.json``), so the
topic reads the same to anyone who knows Kafka.  Integers are big-endian.

Key, version 0 (not flexible)::

    version          int16 = 0
    transactional_id string      (int16 length, then UTF-8)

Value, version 0 (not flexible)::

    version                  int16 = 0
    producer_id              int64
    producer_epoch           int16
    transaction_timeout_ms   int32
    transaction_status       int8        (the state id: Empty 0 ... PrepareEpochFence 7)
    transaction_partitions   array       (int32 count, -1: null), per topic:
        topic                string
        partition_ids        int32 count, then int32 each
    last_update_timestamp_ms int64
    start_timestamp_ms       int64

Value, version 1 (flexible, what is written): the same fields, but ``string`` is compact
(unsigned varint length + 1), arrays are compact (unsigned varint count + 1, 0: null), each
topic entry and the value end with tagged fields (unsigned varint count, then per field its
tag, its size and its bytes), and the value's tagged fields are::

    0  previous_producer_id        int64   (omitted when -1)
    1  next_producer_id            int64   (omitted when -1)
    2  client_transaction_version  int16   (omitted when 0)

A null value is a tombstone: the id expired (Dead).  ``last_producer_epoch`` and the
pending state are not in the record (Kafka keeps them in memory only); :func:`decode_value`
restores the epoch an EndTxn retry carries for a completing or completed transaction,
which follows from the epoch bump at every end.  The record does not say whether the
coordinator or the producer ended it, so after a failover the fenced producer of a
timed-out or fenced transaction is answered as a retry (success for an abort,
INVALID_TXN_STATE for a commit) rather than PRODUCER_FENCED; either way nothing changes.

A bad record -- truncated, trailing bytes, an unknown version or state -- raises
:class:`TransactionLogFormatError`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, MutableMapping
from typing import NamedTuple

from headwater.transactions.decisions import markers_to_write
from headwater.transactions.metadata import (
    MAX_USABLE_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
)
from headwater.transactions.state import TransactionResult, TransactionState
from headwater.values import TopicPartition

KEY_VERSION = 0
VALUE_VERSION = 1
"""The value version written; both 0 and 1 are read."""
CLIENT_TRANSACTION_VERSION = 2
"""Transaction version 2 (KIP-890): the epoch is bumped at every transaction end."""

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class TransactionLogFormatError(ValueError):
    """A ``__transaction_state`` record that cannot be read."""


class TransactionRecord(NamedTuple):
    """One record to append to ``__transaction_state`` (value None: tombstone)."""

    key: bytes
    value: bytes | None


# -- writing ---------------------------------------------------------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(s: str) -> bytes:
    raw = s.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long for __transaction_state")
    return _I16.pack(len(raw)) + raw


def _compact_string(s: str) -> bytes:
    raw = s.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long for __transaction_state")
    return _uvarint(len(raw) + 1) + raw


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return list(topics.items())


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def encode_value(metadata: TransactionMetadata, *, version: int = VALUE_VERSION) -> bytes:
    """The value of ``metadata`` (its committed fields; the pending state is never written)."""
    if metadata.state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        raise ValueError(f"state {metadata.state} is never written to __transaction_state")
    topics = _by_topic(metadata.partitions)
    head = [
        _I16.pack(version),
        _I64.pack(metadata.producer_id),
        _I16.pack(metadata.producer_epoch),
        _I32.pack(metadata.transaction_timeout_ms),
        _I8.pack(metadata.state.id),
    ]
    tail = [
        _I64.pack(metadata.txn_last_update_timestamp_ms),
        _I64.pack(metadata.txn_start_timestamp_ms),
    ]
    if version == 0:
        body = [_I32.pack(len(topics))]
        for topic, ids in topics:
            body += [_string(topic), _I32.pack(len(ids)), *(_I32.pack(p) for p in ids)]
        return b"".join(head + body + tail)
    if version != 1:
        raise ValueError(f"unknown __transaction_state value version {version}")
    body = [_uvarint(len(topics) + 1)]
    for topic, ids in topics:
        body += [
            _compact_string(topic),
            _uvarint(len(ids) + 1),
            *(_I32.pack(p) for p in ids),
            _uvarint(0),
        ]
    tagged = []
    if metadata.previous_producer_id != NO_PRODUCER_ID:
        tagged.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(metadata.previous_producer_id)))
    if metadata.next_producer_id != NO_PRODUCER_ID:
        tagged.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(metadata.next_producer_id)))
    tagged.append((_TAG_CLIENT_TRANSACTION_VERSION, _I16.pack(CLIENT_TRANSACTION_VERSION)))
    fields = [_uvarint(len(tagged))]
    for tag, data in tagged:
        fields += [_uvarint(tag), _uvarint(len(data)), data]
    return b"".join(head + body + tail + fields)


def record(metadata: TransactionMetadata) -> TransactionRecord:
    """The record that holds ``metadata`` (Dead: the tombstone that removes the id)."""
    key = encode_key(metadata.transactional_id)
    if metadata.state is TransactionState.DEAD:
        return TransactionRecord(key, None)
    return TransactionRecord(key, encode_value(metadata))


# -- reading ---------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TransactionLogFormatError(f"truncated __transaction_state {self.what}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def i8(self) -> int:
        return int(_I8.unpack(self.take(1))[0])

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise TransactionLogFormatError(
                    f"malformed varint in __transaction_state {self.what}"
                )

    def text(self, n: int) -> str:
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise TransactionLogFormatError(
                f"string in __transaction_state {self.what} is not UTF-8"
            ) from exc

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise TransactionLogFormatError(f"null string in __transaction_state {self.what}")
        return self.text(n)

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise TransactionLogFormatError(f"null string in __transaction_state {self.what}")
        return self.text(n - 1)

    def skip_tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self.take(self.uvarint())
        return fields

    def done(self) -> None:
        if self.pos != len(self.data):
            raise TransactionLogFormatError(
                f"{len(self.data) - self.pos} bytes after the __transaction_state {self.what}"
            )


def decode_key(data: bytes) -> str:
    """The transactional id of a key; TransactionLogFormatError for a bad or unknown key."""
    r = _Reader(data, "key")
    version = r.i16()
    if version != KEY_VERSION:
        raise TransactionLogFormatError(f"unknown __transaction_state key version {version}")
    transactional_id = r.string()
    r.done()
    return transactional_id


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    """The metadata a value holds (see the module for what is restored rather than read)."""
    r = _Reader(data, "value")
    version = r.i16()
    if version not in (0, 1):
        raise TransactionLogFormatError(f"unknown __transaction_state value version {version}")
    flexible = version >= 1
    producer_id, epoch, timeout_ms = r.i64(), r.i16(), r.i32()
    status = r.i8()
    try:
        state = TransactionState.from_id(status)
    except ValueError as exc:
        raise TransactionLogFormatError(str(exc)) from None
    if state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        raise TransactionLogFormatError(f"state {state} is never written to __transaction_state")
    partitions: set[TopicPartition] = set()
    count = r.uvarint() - 1 if flexible else r.i32()
    for _ in range(max(count, 0)):
        topic = r.compact_string() if flexible else r.string()
        n = r.uvarint() - 1 if flexible else r.i32()
        if n < 0:
            raise TransactionLogFormatError("null partition list in __transaction_state value")
        partitions.update(TopicPartition(topic, r.i32()) for _ in range(n))
        if flexible:
            r.skip_tagged_fields()
    last_update_ms, start_ms = r.i64(), r.i64()
    previous_id = next_id = NO_PRODUCER_ID
    if flexible:
        tagged = r.skip_tagged_fields()
        if (raw := tagged.get(_TAG_PREVIOUS_PRODUCER_ID)) is not None:
            previous_id = _tagged_i64(raw)
        if (raw := tagged.get(_TAG_NEXT_PRODUCER_ID)) is not None:
            next_id = _tagged_i64(raw)
    r.done()
    metadata = TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_timeout_ms=timeout_ms,
        state=state,
        previous_producer_id=previous_id,
        next_producer_id=next_id,
        partitions=frozenset(partitions),
        txn_start_timestamp_ms=start_ms,
        txn_last_update_timestamp_ms=last_update_ms,
    )
    return metadata.replace(last_producer_epoch=_ending_epoch(metadata))


def _tagged_i64(raw: bytes) -> int:
    if len(raw) != 8:
        raise TransactionLogFormatError(f"a producer id tagged field of {len(raw)} bytes")
    return int(_I64.unpack(raw)[0])


def _ending_epoch(metadata: TransactionMetadata) -> int:
    """The epoch of the producer whose EndTxn led to a completing or completed state.

    Every end bumps the epoch by one, and an end that moved the id to a new producer id
    started from MAX_USABLE_EPOCH - 1 (the only epoch whose bump reaches it).
    """
    state = metadata.state
    if state.is_completing:
        return metadata.producer_epoch - 1
    if state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
        if metadata.producer_epoch == 0 and metadata.previous_producer_id != NO_PRODUCER_ID:
            return MAX_USABLE_EPOCH - 1
        return metadata.producer_epoch - 1
    return NO_PRODUCER_EPOCH


# -- replay ----------------------------------------------------------------------------------


def replay(
    transactions: MutableMapping[str, TransactionMetadata], key: bytes, value: bytes | None
) -> None:
    """Apply one record of a ``__transaction_state`` partition, in log order.

    The last record of an id wins; a tombstone removes it.  A bad record raises
    TransactionLogFormatError and changes nothing (the loader reports it and goes on,
    as the group coordinator's load does).
    """
    transactional_id = decode_key(key)
    if value is None:
        transactions.pop(transactional_id, None)
        return
    transactions[transactional_id] = decode_value(transactional_id, value)


def markers_to_resend(
    transactions: Iterable[TransactionMetadata],
) -> list[tuple[str, TransactionResult]]:
    """After a load: the ids whose decided transaction still needs its markers, sorted.

    A coordinator that failed over in PrepareCommit/PrepareAbort left its markers
    unwritten, or partly written; the new one writes them all again (a marker written
    twice is harmless: the partition leader ignores a marker for a transaction that is
    not open).
    """
    out = []
    for m in transactions:
        if (result := markers_to_write(m)) is not None:
            out.append((m.transactional_id, result))
    return sorted(out, key=lambda item: item[0])
