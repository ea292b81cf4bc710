"""RecordBatch v2 headers: the broker's and the log's view of a batch.

The broker never decodes individual records on its hot path (docs/design.md,
"Record format"): it checks each batch's fixed 61-byte header and CRC-32C, patches
``baseOffset`` and ``partitionLeaderEpoch`` (both outside the CRC, which is
exactly why Kafka placed them there) and appends the bytes verbatim.  This
module is that view: one ``struct`` unpack per batch and one ``crc32c`` call
over a ``memoryview`` slice, so validating a produce request costs C-speed work
proportional to the number of batches, not records.

Layout (big-endian), as in Kafka's ``DefaultRecordBatch``::

    offset  size  field
         0     8  baseOffset            int64   first offset of the batch
         8     4  batchLength           int32   bytes after this field (>= 49)
        12     4  partitionLeaderEpoch  int32   set by the leader on append
        16     1  magic                 int8    always 2
        17     4  crc                   uint32  CRC-32C of bytes [21, end)
        21     2  attributes            int16   codec bits 0-2, timestampType bit 3,
                                                transactional bit 4, control bit 5
        23     4  lastOffsetDelta       int32
        27     8  baseTimestamp         int64
        35     8  maxTimestamp          int64
        43     8  producerId            int64
        51     2  producerEpoch         int16
        53     4  baseSequence          int32
        57     4  recordsCount          int32
        61        records (possibly compressed)

Every function here is pure (bytes in, values out) and safe to call from any
thread; the ``set_*`` helpers mutate only the ``bytearray`` they are given.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from headwater.errors import CorruptRecordError, MessageTooLargeError

__all__ = [
    "ATTRIBUTES_OFFSET",
    "CRC_OFFSET",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "MIN_BATCH_LENGTH",
    "BatchHeader",
    "Buffer",
    "Compression",
    "TimestampType",
    "parse_header",
    "scan_batches",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_batches",
    "verify_crc",
]

Buffer = bytes | bytearray | memoryview
"""Anything the batch functions read from."""

HEADER_SIZE = 61
"""Bytes from ``baseOffset`` up to the first record."""
LOG_OVERHEAD = 12
"""``baseOffset`` (8) + ``batchLength`` (4): the bytes not counted in ``batchLength``."""
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with no record bytes at all
MAGIC = 2
"""The only record format version Headwater reads or writes."""

BATCH_LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
"""The CRC covers ``[ATTRIBUTES_OFFSET, end of batch)``."""
MAX_TIMESTAMP_OFFSET = 35

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

# The header in two parts, split where the CRC's coverage starts: a writer packs
# the tail first, computes the CRC over tail + records, then packs the prefix.
HEADER_PREFIX = struct.Struct(
    ">"
    "q"  # 0   baseOffset            int64
    "i"  # 8   batchLength           int32
    "i"  # 12  partitionLeaderEpoch  int32 (-1 until the leader stamps it)
    "b"  # 16  magic                 int8 = 2
    "I"  # 17  crc                   uint32 (CRC-32C over [21, end))
)
HEADER_TAIL = struct.Struct(
    ">"
    "h"  # 21  attributes            int16
    "i"  # 23  lastOffsetDelta       int32
    "q"  # 27  baseTimestamp         int64
    "q"  # 35  maxTimestamp          int64
    "q"  # 43  producerId            int64
    "h"  # 51  producerEpoch         int16
    "i"  # 53  baseSequence          int32
    "i"  # 57  recordsCount          int32
)
_HEADER = struct.Struct(">" + HEADER_PREFIX.format[1:] + HEADER_TAIL.format[1:])
assert _HEADER.size == HEADER_SIZE

_INT64 = struct.Struct(">q")  # baseOffset at 0, maxTimestamp at 35
_INT32 = struct.Struct(">i")  # batchLength at 8, partitionLeaderEpoch at 12
_UINT32 = struct.Struct(">I")  # crc at 17
_INT16 = struct.Struct(">h")  # attributes at 21


class Compression(enum.IntEnum):
    """Codec ids of attribute bits 0-2, with Kafka's numbers and names."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, value: str | int | Compression) -> Compression:
        """Accept ``"gzip"`` (Kafka's ``compression.type`` spelling), an id or a member."""
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                names = ", ".join(repr(m.name.lower()) for m in cls)
                raise ValueError(
                    f"unknown compression {value!r}; expected one of {names}"
                ) from None
        return cls(value)


class TimestampType(enum.IntEnum):
    """Attribute bit 3: who set the timestamps (Kafka's ``message.timestamp.type``)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


_CODECS: tuple[Compression | None, ...] = (*Compression, None, None, None)


class BatchHeader(NamedTuple):
    """The 61-byte header of one RecordBatch v2, field for field (see module docstring)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after this batch (Kafka's ``nextOffset``)."""
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> Compression:
        """The codec; raises CorruptRecordError for the unassigned ids 5-7."""
        codec = _CODECS[self.attributes & COMPRESSION_MASK]
        if codec is None:
            raise CorruptRecordError(
                f"batch at offset {self.base_offset}: unknown compression codec id "
                f"{self.attributes & COMPRESSION_MASK}"
            )
        return codec

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def _check_length_and_magic(batch_length: int, magic: int | None, pos: int, base: int) -> None:
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} (base offset {base}): impossible batchLength "
            f"{batch_length}, smaller than the {MIN_BATCH_LENGTH}-byte header remainder"
        )
    if magic is not None and magic != MAGIC:
        raise CorruptRecordError(
            f"batch at position {pos} (base offset {base}): magic {magic}, expected {MAGIC}"
        )


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Unpack the header at ``pos``; checks magic and length, not the CRC.

    Raises CorruptRecordError if fewer than 61 bytes are available, the magic
    is not 2, or ``batchLength`` is smaller than the header itself.
    """
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at position {pos}: only {max(available, 0)} bytes, "
            f"a RecordBatch header needs {HEADER_SIZE}"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    _check_length_and_magic(header.batch_length, header.magic, pos, header.base_offset)
    return header


def verify_crc(buf: Buffer, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless CRC-32C of ``[pos+21, pos+size)`` equals ``header.crc``."""
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(buf):
        raise CorruptRecordError(
            f"batch at position {pos} (base offset {header.base_offset}): incomplete, "
            f"{header.size_in_bytes} bytes declared but {len(buf) - pos} available"
        )
    with memoryview(buf) as view:
        actual = crc32c(view[pos + ATTRIBUTES_OFFSET : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at position {pos} (base offset {header.base_offset}): CRC mismatch, "
            f"stored 0x{header.crc:08x} but computed 0x{actual:08x}"
        )


def scan_batches(buf: Buffer, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each complete batch from ``pos`` on.

    Stops silently at a trailing partial batch (fetch responses and a log
    cut by a crash may end mid-batch, as in Kafka's ``ByteBufferLogInputStream``).
    Raises CorruptRecordError for a bad magic or an impossible length, even
    in the trailing partial batch when those fields are present.  CRCs are not
    checked: call :func:`verify_crc` when the bytes came from outside.
    """
    end = len(buf)
    unpack_from = _HEADER.unpack_from
    make = BatchHeader._make
    while end - pos >= LOG_OVERHEAD:
        batch_length = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0]
        magic = buf[pos + MAGIC_OFFSET] if end - pos > MAGIC_OFFSET else None
        if magic is not None and magic > 127:  # int8
            magic -= 256
        _check_length_and_magic(batch_length, magic, pos, _INT64.unpack_from(buf, pos)[0])
        size = batch_length + LOG_OVERHEAD
        if end - pos < size:
            return
        yield pos, make(unpack_from(buf, pos))
        pos += size


def validate_batches(
    buf: Buffer,
    *,
    max_batch_bytes: int | None = None,
    require_contiguous: bool = True,
) -> list[BatchHeader]:
    """Check a produce request's records; return the headers in order.

    Every batch must be complete (a trailing partial batch is an error here),
    have magic 2, a sane length, a known codec, a matching CRC, and, unless
    ``require_contiguous`` is false (compacted logs keep holes and empty
    batches), ``records_count >= 1`` and ``last_offset_delta == records_count - 1``.
    A batch larger than ``max_batch_bytes`` raises MessageTooLargeError.
    An empty buffer is CorruptRecordError.  No record is decoded.
    """
    end = len(buf)
    if end == 0:
        raise CorruptRecordError("no record batches: the records field is empty")
    headers: list[BatchHeader] = []
    pos = 0
    with memoryview(buf) as view:
        while pos < end:
            header = parse_header(view, pos)
            size = header.batch_length + LOG_OVERHEAD
            where = f"batch {len(headers)} at position {pos} (base offset {header.base_offset})"
            if max_batch_bytes is not None and size > max_batch_bytes:
                raise MessageTooLargeError(
                    f"{where}: {size} bytes exceeds the maximum of {max_batch_bytes}"
                )
            if end - pos < size:
                raise CorruptRecordError(
                    f"{where}: incomplete, {size} bytes declared but {end - pos} available"
                )
            actual = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
            if actual != header.crc:
                raise CorruptRecordError(
                    f"{where}: CRC mismatch, stored 0x{header.crc:08x} but computed 0x{actual:08x}"
                )
            if _CODECS[header.attributes & COMPRESSION_MASK] is None:
                raise CorruptRecordError(
                    f"{where}: unknown compression codec id {header.attributes & COMPRESSION_MASK}"
                )
            count = header.records_count
            delta = header.last_offset_delta
            if require_contiguous:
                if count < 1 or delta != count - 1:
                    raise CorruptRecordError(
                        f"{where}: recordsCount {count} and lastOffsetDelta {delta} do not "
                        "describe a non-empty batch of consecutive offsets"
                    )
            elif count < 0 or delta < count - 1:
                raise CorruptRecordError(
                    f"{where}: recordsCount {count} and lastOffsetDelta {delta} are inconsistent"
                )
            headers.append(header)
            pos += size
    return headers


def set_base_offset(buf: bytearray, pos: int, base_offset: int) -> None:
    """Overwrite ``baseOffset`` of the batch at ``pos`` (outside the CRC)."""
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Overwrite ``partitionLeaderEpoch`` of the batch at ``pos`` (outside the CRC)."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray, pos: int, timestamp_ms: int) -> None:
    """Stamp the batch at ``pos`` with LogAppendTime and recompute its CRC.

    Kafka's broker does this for topics with ``message.timestamp.type=LogAppendTime``:
    set attribute bit 3 and ``maxTimestamp``; readers then report ``maxTimestamp``
    as every record's timestamp.  Records are not touched.
    """
    size = _INT32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0] + LOG_OVERHEAD
    attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    with memoryview(buf) as view:
        _UINT32.pack_into(buf, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size]))
