"""Building and reading whole RecordBatch v2 batches (the client's view).

Producers fill a :class:`~headwater.records.record_codec.RecordsBuilder` per
batch and call :func:`finish_batch` once (or :func:`build_batch` on a list of
records); consumers call
:func:`read_batches` on a fetch response and :meth:`Batch.records` on each
batch.  The broker never comes here: it uses :mod:`headwater.records.header`.

A batch's bytes are assembled as ``prefix + tail + records`` where the CRC-32C
is computed incrementally over ``tail`` and the (possibly compressed) records,
so a 1 MiB batch is never copied just to checksum it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from crc32c import crc32c

from headwater.clock import wall_ms
from headwater.errors import CorruptRecordError
from headwater.records import compression as _compression
from headwater.records.header import (
    COMPRESSION_MASK,
    HEADER_PREFIX,
    HEADER_SIZE,
    HEADER_TAIL,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Buffer,
    Compression,
    TimestampType,
    scan_batches,
    verify_crc,
)
from headwater.records.native import default_record_codec
from headwater.records.record import ConsumedRecord, Record
from headwater.records.record_codec import RecordCodec, RecordsBuilder, T

__all__ = [
    "Batch",
    "build_batch",
    "finish_batch",
    "new_records_builder",
    "read_batches",
    "record_codec",
    "set_record_codec",
]


NO_PARTITION_LEADER_EPOCH = -1
_MAX_RECORDS = (1 << 31) - 1

_codec: RecordCodec = default_record_codec()


def record_codec() -> RecordCodec:
    """The record codec in use; its ``name`` says which ("native" or "python").

    The native codec by default when the C extension is built, unless the
    environment sets ``HEADWATER_PURE_PYTHON_RECORDS=1`` (see
    :mod:`headwater.records.native`).
    """
    return _codec


def new_records_builder(*, capacity: int = 4096) -> RecordsBuilder:
    """An empty :class:`RecordsBuilder` of the codec in use (one per producer batch)."""
    return _codec.builder(capacity=capacity)


def set_record_codec(codec: RecordCodec) -> None:
    """Install a faster :class:`RecordCodec` (e.g. a native extension) process-wide."""
    global _codec
    _codec = codec


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: str | Compression = "none",
    timestamp_ms: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """Encode ``records`` as one RecordBatch v2 with offset deltas 0..n-1.

    Records without a timestamp get ``timestamp_ms``, or the current wall
    clock when that is None too.  ``compression`` is Kafka's
    ``compression.type`` name ("none", "gzip", "snappy", "lz4", "zstd") or a
    :class:`Compression`.  ``partitionLeaderEpoch`` is written as -1; the
    leader patches it and ``baseOffset`` on append.
    """
    codec_id = Compression.parse(compression)
    if not isinstance(records, Sequence):
        records = list(records)
    count = len(records)
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    if count > _MAX_RECORDS:
        raise ValueError(f"{count} records do not fit one batch")
    if timestamp_ms is None:
        timestamp_ms = wall_ms()
    encoded = _codec.encode(records, default_timestamp_ms=timestamp_ms)
    return _assemble(
        encoded.data,
        codec_id=codec_id,
        count=count,
        base_timestamp=encoded.base_timestamp,
        max_timestamp=encoded.max_timestamp,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def finish_batch(
    builder: RecordsBuilder,
    *,
    compression: str | Compression = "none",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    """The RecordBatch v2 of what ``builder`` holds, base offset 0; finishes the builder.

    ``transactional`` sets the attributes' transactional bit (a transactional producer's
    batch).

    Byte for byte what :func:`build_batch` makes of the same records.  May be
    called again (a retry under a new producer epoch re-stamps the header).
    Uncompressed, the native builder writes the header in front of the records
    it holds: the batch is never copied on its way to the request.
    """
    count = builder.count
    base_timestamp = builder.base_timestamp
    max_timestamp = builder.max_timestamp
    if count == 0 or base_timestamp is None or max_timestamp is None:
        raise ValueError("a record batch needs at least one record")
    codec_id = Compression.parse(compression)
    if codec_id is Compression.NONE:
        return builder.batch(
            HEADER_TAIL.pack(
                codec_id.value | (TRANSACTIONAL_MASK if transactional else 0),
                count - 1,
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
            )
        )
    return _assemble(
        builder.records(),
        codec_id=codec_id,
        count=count,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        base_offset=0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
    )


def _assemble(
    records: Buffer,
    *,
    codec_id: Compression,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool = False,
) -> bytes:
    payload = records
    if codec_id is not Compression.NONE:
        payload = _compression.compress(codec_id, payload)
    tail = HEADER_TAIL.pack(
        codec_id.value | (TRANSACTIONAL_MASK if transactional else 0),
        count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    crc = crc32c(payload, crc32c(tail))
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    prefix = HEADER_PREFIX.pack(base_offset, batch_length, NO_PARTITION_LEADER_EPOCH, 2, crc)
    return b"".join((prefix, tail, payload))


class Batch:
    """One complete, CRC-checked batch inside a larger buffer, decoded lazily.

    Header fields are read once (one ``struct`` unpack); records are decoded
    (and decompressed) only when :meth:`records` is called, each call anew.
    The batch keeps a reference to the buffer it was read from.
    """

    __slots__ = ("_buf", "_pos", "header")

    def __init__(self, header: BatchHeader, buf: Buffer, pos: int) -> None:
        self.header = header
        self._buf = buf
        self._pos = pos

    def __repr__(self) -> str:
        h = self.header
        return (
            f"Batch(base_offset={h.base_offset}, records_count={h.records_count}, "
            f"size_in_bytes={h.size_in_bytes}, compression={self.compression.name.lower()})"
        )

    # Header fields, in wire order.
    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def batch_length(self) -> int:
        return self.header.batch_length

    @property
    def partition_leader_epoch(self) -> int:
        return self.header.partition_leader_epoch

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def crc(self) -> int:
        return self.header.crc

    @property
    def attributes(self) -> int:
        return self.header.attributes

    @property
    def last_offset_delta(self) -> int:
        return self.header.last_offset_delta

    @property
    def base_timestamp(self) -> int:
        return self.header.base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.header.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.header.base_sequence

    @property
    def records_count(self) -> int:
        return self.header.records_count

    # Derived values.
    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def next_offset(self) -> int:
        return self.header.next_offset

    @property
    def size_in_bytes(self) -> int:
        return self.header.size_in_bytes

    @property
    def compression(self) -> Compression:
        return self.header.compression

    @property
    def timestamp_type(self) -> TimestampType:
        return self.header.timestamp_type

    @property
    def is_transactional(self) -> bool:
        return self.header.is_transactional

    @property
    def is_control(self) -> bool:
        return self.header.is_control

    def raw(self) -> bytes:
        """The batch's bytes exactly as read (header included)."""
        with memoryview(self._buf) as view:
            return bytes(view[self._pos : self._pos + self.header.size_in_bytes])

    @property
    def log_append_time(self) -> int | None:
        """The timestamp every record carries (LogAppendTime batches), or None."""
        h = self.header
        return h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None

    def records_section(self) -> Buffer:
        """The records section, decompressed: a ``memoryview`` into the buffer the batch was
        read from when uncompressed (release it when done), else new ``bytes``."""
        h = self.header
        start = self._pos + HEADER_SIZE
        end = self._pos + h.size_in_bytes
        codec_id = h.compression
        with memoryview(self._buf) as view:
            section = view[start:end]
        if codec_id is Compression.NONE:
            return section
        with section:
            return _compression.decompress(
                codec_id, section, where=f"batch at offset {h.base_offset}"
            )

    def records(self) -> Iterator[ConsumedRecord]:
        """Decode the records; raises CorruptRecordError if they do not match the header."""
        return iter(self.record_list())

    def record_list(self) -> list[ConsumedRecord]:
        """Like :meth:`records` but as a list (what it decodes into anyway)."""
        return self._decode(None, ())

    def record_list_as(self, record_type: type[T], prefix: tuple[Any, ...]) -> list[T]:
        """:meth:`record_list` with each record a ``record_type`` of ``prefix``'s items
        and the five :class:`ConsumedRecord` fields (see :meth:`RecordCodec.decode_as`)."""
        return self._decode(record_type, prefix)

    @overload
    def _decode(self, record_type: None, prefix: tuple[()]) -> list[ConsumedRecord]: ...
    @overload
    def _decode(self, record_type: type[T], prefix: tuple[Any, ...]) -> list[T]: ...
    def _decode(
        self, record_type: type[T] | None, prefix: tuple[Any, ...]
    ) -> list[ConsumedRecord] | list[T]:
        h = self.header
        start = self._pos + HEADER_SIZE
        end = self._pos + h.size_in_bytes
        codec_id = h.compression
        log_append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
        with memoryview(self._buf) as view, view[start:end] as section:
            data: Buffer = section  # uncompressed: decoded in place, not copied
            if codec_id is not Compression.NONE:
                data = _compression.decompress(
                    codec_id, section, where=f"batch at offset {h.base_offset}"
                )
            try:
                if record_type is None:
                    return _codec.decode(
                        data,
                        count=h.records_count,
                        base_offset=h.base_offset,
                        base_timestamp=h.base_timestamp,
                        log_append_time=log_append_time,
                    )
                return _codec.decode_as(
                    data,
                    count=h.records_count,
                    base_offset=h.base_offset,
                    base_timestamp=h.base_timestamp,
                    log_append_time=log_append_time,
                    record_type=record_type,
                    prefix=prefix,
                )
            except CorruptRecordError as e:
                raise CorruptRecordError(f"batch at offset {h.base_offset}: {e.message}") from None


def read_batches(data: Buffer) -> Iterator[Batch]:
    """Yield each complete batch in ``data`` after checking its CRC.

    A trailing partial batch (fetch responses may cut the last one) is
    silently ignored.  Bad magic, an impossible length or a CRC mismatch
    raises CorruptRecordError naming the batch's position and base offset.
    """
    for pos, header in scan_batches(data):
        verify_crc(data, pos, header)
        codec_id = header.attributes & COMPRESSION_MASK
        if codec_id > Compression.ZSTD:
            raise CorruptRecordError(
                f"batch at position {pos} (base offset {header.base_offset}): "
                f"unknown compression codec id {codec_id}"
            )
        yield Batch(header, data, pos)
