"""Control batches: the COMMIT and ABORT markers that end a transaction in a partition.

A control batch is a RecordBatch v2 with the control bit (attribute bit 5) and the
transactional bit (bit 4) set, the producer id and epoch of the transaction it ends,
no sequence (-1), and exactly one record whose key and value are Kafka's
``ControlRecordType`` and ``EndTransactionMarker`` layouts (big-endian)::

    key    version         int16 = 0
           type            int16     0: ABORT, 1: COMMIT
    value  version         int16 = 0
           coordinator_epoch int32   the transaction coordinator's epoch that wrote it

Data batches of a transaction carry the transactional bit only; :func:`set_batch_flags`
sets the bits of an encoded batch and restamps its CRC.  A control record with an unknown
type is ignored, as Kafka ignores it (``ControlRecordType.UNKNOWN``); a truncated or
negative-version key or value raises CorruptRecordError.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from crc32c import crc32c

from headwater.errors import CorruptRecordError
from headwater.records.batch import Batch, build_batch
from headwater.records.header import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    TRANSACTIONAL_MASK,
)
from headwater.records.record import Record

__all__ = [
    "AbortedTransaction",
    "ControlRecordType",
    "EndTransactionMarker",
    "build_control_batch",
    "committed_batches",
    "decode_control_key",
    "decode_marker_value",
    "encode_control_key",
    "encode_marker_value",
    "read_marker",
    "set_batch_flags",
]

CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")


class ControlRecordType(enum.Enum):
    """Kafka's control record types that end a transaction."""

    ABORT = 0
    COMMIT = 1


class EndTransactionMarker(NamedTuple):
    """What one control batch says: which producer's transaction ends, and how."""

    type: ControlRecordType
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


def encode_control_key(control_type: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type.value)


def decode_control_key(data: bytes | None) -> ControlRecordType | None:
    """The type of a control record key; None for a type this version does not know."""
    if data is None or len(data) < _KEY.size:
        raise CorruptRecordError("control record key is missing or truncated")
    version, type_id = _KEY.unpack_from(data)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version} is negative")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return None


def encode_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch)


def decode_marker_value(data: bytes | None) -> int:
    """The coordinator epoch of an EndTransactionMarker value."""
    if data is None or len(data) < _VALUE.size:
        raise CorruptRecordError("end transaction marker value is missing or truncated")
    version, coordinator_epoch = _VALUE.unpack_from(data)
    if version < 0:
        raise CorruptRecordError(f"end transaction marker version {version} is negative")
    return int(coordinator_epoch)


def set_batch_flags(batch: bytes, *, transactional: bool, control: bool = False) -> bytes:
    """``batch`` with its transactional and control bits set as given, CRC restamped."""
    out = bytearray(batch)
    (attributes,) = _ATTRIBUTES.unpack_from(out, ATTRIBUTES_OFFSET)
    attributes &= ~(TRANSACTIONAL_MASK | CONTROL_MASK)
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    _ATTRIBUTES.pack_into(out, ATTRIBUTES_OFFSET, attributes)
    _CRC.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_control_batch(
    control_type: ControlRecordType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
) -> bytes:
    """The control batch that writes ``control_type`` for the producer's transaction."""
    record = Record(encode_control_key(control_type), encode_marker_value(coordinator_epoch))
    batch = build_batch(
        [record],
        base_offset=base_offset,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
    return set_batch_flags(batch, transactional=True, control=True)


def read_marker(batch: Batch) -> EndTransactionMarker | None:
    """The marker a control batch holds (None: not a control batch, or an unknown type)."""
    if not batch.is_control:
        return None
    records = batch.record_list()
    if len(records) != 1:
        raise CorruptRecordError(
            f"control batch at offset {batch.base_offset} holds {len(records)} records, not 1"
        )
    control_type = decode_control_key(records[0].key)
    if control_type is None:
        return None
    return EndTransactionMarker(
        control_type,
        batch.producer_id,
        batch.producer_epoch,
        decode_marker_value(records[0].value),
    )


class AbortedTransaction(NamedTuple):
    """An aborted transaction a READ_COMMITTED fetch response names (Kafka's fields)."""

    producer_id: int
    first_offset: int


def committed_batches(
    batches: Iterable[Batch], aborted: Iterable[AbortedTransaction]
) -> Iterator[Batch]:
    """The batches a READ_COMMITTED consumer returns, as Kafka's consumer filters a fetch.

    ``aborted`` is what the fetch response named for the range (every aborted
    transaction that overlaps it).  Control batches are never returned.  A transactional
    batch is dropped while its producer has an aborted transaction that started at or
    before the batch's last offset and whose ABORT marker has not been passed yet; the
    marker ends that span.  Non-transactional batches are always returned.
    """
    pending = sorted(aborted, key=lambda a: a.first_offset)
    position = 0
    aborting: set[int] = set()
    for batch in batches:
        if batch.is_transactional:
            while position < len(pending) and pending[position].first_offset <= batch.last_offset:
                aborting.add(pending[position].producer_id)
                position += 1
            if batch.is_control:
                marker = read_marker(batch)
                if marker is not None and marker.type is ControlRecordType.ABORT:
                    aborting.discard(batch.producer_id)
                continue
            if batch.producer_id in aborting:
                continue
        elif batch.is_control:
            continue
        yield batch
