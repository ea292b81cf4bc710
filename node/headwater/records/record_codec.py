"""Encoding and decoding the records section of a RecordBatch v2.

Each record, after the 61-byte batch header (and after decompression)::

    length          varint    bytes of the record after this field
    attributes      int8      unused, always 0
    timestampDelta  varlong   timestamp - batch baseTimestamp
    offsetDelta     varint    offset - batch baseOffset
    keyLength       varint    -1 for a null key
    key             bytes
    valueLength     varint    -1 for a null value
    value           bytes
    headersCount    varint
    headers         headersCount times:
        headerKeyLength    varint   (never null)
        headerKey          UTF-8
        headerValueLength  varint   -1 for a null value
        headerValue        bytes

These loops are the client's per-record cost (the producer target is 300k
records/s, the consumer 400k), so they are written for CPython speed rather
than elegance: locals bound once, table lookups for small varints, inline
one- and two-byte varint decoding, records emitted as pieces of a single
``bytes.join``, and results built with ``tuple.__new__`` instead of the
NamedTuple constructor.  :class:`RecordCodec` is the seam where a native
implementation can replace :class:`PythonRecordCodec` without touching callers;
:mod:`headwater.records.native` is that implementation, and
:mod:`headwater.records.batch` picks it by default when it is built.

The producer does not hand a list of records to :meth:`RecordCodec.encode`: each
batch being filled holds a :class:`RecordsBuilder` from :meth:`RecordCodec.builder`
and ``send`` appends to it (Kafka's ``MemoryRecordsBuilder``), so the native
builder encodes each record as it arrives and the sender thread only adds the
batch header.  :class:`PythonRecordsBuilder` keeps the records and encodes them
all in :meth:`~PythonRecordsBuilder.finish`, which is the fastest a pure-Python
producer can do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from crc32c import crc32c

from headwater.errors import CorruptRecordError
from headwater.records.header import (
    HEADER_PREFIX,
    HEADER_SIZE,
    HEADER_TAIL,
    LOG_OVERHEAD,
    MAGIC,
    Buffer,
)
from headwater.records.record import ConsumedRecord, Header, Record
from headwater.records.varint import (
    SMALL_VARINT_LIMIT,
    SMALL_VARINTS,
    decode_varint,
    encode_varint,
)

__all__ = [
    "EncodedRecords",
    "PythonRecordCodec",
    "PythonRecordsBuilder",
    "RecordCodec",
    "RecordsBuilder",
]


T = TypeVar("T", bound=tuple[Any, ...])
"""A tuple subclass :meth:`RecordCodec.decode_as` builds records as."""


class EncodedRecords(NamedTuple):
    """The uncompressed records section plus the timestamps the batch header needs."""

    data: bytes
    base_timestamp: int
    max_timestamp: int


class RecordsBuilder(Protocol):
    """A records section being filled one record at a time (one batch's worth).

    Record ``i`` gets offset delta ``i`` and a timestamp delta against the first
    record's timestamp, as :meth:`RecordCodec.encode` would give it.  Not
    thread-safe: the producer appends under its accumulator's lock, and the
    sender calls :meth:`finish` only after the batch was closed to appends.
    """

    @property
    def count(self) -> int:
        """Records appended so far."""
        ...

    @property
    def size(self) -> int:
        """Bytes of the encoded records section so far."""
        ...

    @property
    def base_timestamp(self) -> int | None:
        """The first record's timestamp (the batch's ``baseTimestamp``); None when empty."""
        ...

    @property
    def max_timestamp(self) -> int | None:
        """The largest timestamp appended (the batch's ``maxTimestamp``); None when empty."""
        ...

    @property
    def finished(self) -> bool:
        """:meth:`records` or :meth:`batch` was called: no more appends."""
        ...

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
    ) -> int:
        """Encode one record at the end; return its index (offset delta).

        Raises (TypeError, ValueError) without appending anything when a field
        cannot be encoded, or ValueError once the builder is finished.
        """
        ...

    def append_thunk(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        callback: object,
        thunks: list[Any],
    ) -> int:
        """:meth:`append`, then, unless ``callback`` is None, extend ``thunks`` with
        ``(callback, index, timestamp_ms)`` (the producer's flat thunk list, see
        :mod:`headwater.client.producer.futures`): one call per record on the send path.
        Nothing is added to ``thunks`` when the append raises.
        """
        ...

    def append_future(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        callback: object,
        thunks: list[Any],
        result: object,
        cls: type[T],
    ) -> T:
        """:meth:`append_thunk`, returning ``cls((result, index, timestamp_ms))`` built
        as a plain tuple subclass (no ``__new__`` or ``__init__`` of ``cls`` runs): the
        producer's ``RecordFuture``, the whole per-record append of ``send``."""
        ...

    def records(self) -> Buffer:
        """The records section, uncompressed (to compress it); finishes the builder."""
        ...

    def batch(self, tail: bytes) -> bytes:
        """The whole uncompressed batch; finishes the builder.

        ``tail`` is the header from ``attributes`` to ``recordsCount``
        (``HEADER_TAIL``, 40 bytes); the builder adds ``baseOffset`` 0,
        ``batchLength``, ``partitionLeaderEpoch`` -1, magic 2 and the CRC-32C.
        The native builder writes them in front of the records it already
        holds, so a MiB batch is not copied.  May be called again with another
        tail (a retry under a new producer epoch).
        """
        ...


class RecordCodec(Protocol):
    """Turns records into a records section and back (no header, no compression)."""

    name: str
    """Which implementation this is ("python", "native")."""

    def builder(self, *, capacity: int = 4096) -> RecordsBuilder:
        """A new, empty builder; ``capacity`` is a hint of the bytes it will hold."""
        ...

    def encode(self, records: Sequence[Record], *, default_timestamp_ms: int) -> EncodedRecords:
        """Encode with offset deltas 0..n-1; ``default_timestamp_ms`` for untimed records."""
        ...

    def decode(
        self,
        data: Buffer,
        *,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
    ) -> list[ConsumedRecord]:
        """Decode exactly ``count`` records that fill ``data``; CorruptRecordError otherwise.

        ``log_append_time``, when not None, replaces every record's timestamp.
        """
        ...

    def decode_as(
        self,
        data: Buffer,
        *,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        record_type: type[T],
        prefix: tuple[Any, ...],
    ) -> list[T]:
        """:meth:`decode`, each record a ``record_type`` (a tuple subclass) of
        ``prefix``'s items followed by the five :class:`ConsumedRecord` fields
        (the consumer's ``ConsumerRecord`` is ``(topic, partition)`` + those)."""
        ...


_NULL = b"\x01"  # zigzag(-1): null key, value or header value
_ZERO = b"\x00"
# attributes (0) + timestampDelta (0) + offsetDelta (n): the prefix of almost every record.
_PREFIXES: tuple[bytes, ...] = tuple(b"\x00\x00" + v for v in SMALL_VARINTS)
# Zigzag values of a one-byte varint.
_ZIGZAG: tuple[int, ...] = tuple((b >> 1) ^ -(b & 1) for b in range(128))
_EMPTY_HEADERS: tuple[Header, ...] = ()


def _encode_headers(headers: Sequence[Header]) -> bytes:
    table = SMALL_VARINTS
    limit = SMALL_VARINT_LIMIT
    parts = [encode_varint(len(headers))]
    append = parts.append
    for header_key, header_value in headers:
        raw_key = header_key.encode("utf-8")
        n = len(raw_key)
        append(table[n] if n < limit else encode_varint(n))
        append(raw_key)
        if header_value is None:
            append(_NULL)
        else:
            n = len(header_value)
            append(table[n] if n < limit else encode_varint(n))
            append(header_value)
    return b"".join(parts)


def _decode_headers(data: bytes, pos: int, count: int) -> tuple[tuple[Header, ...], int]:
    if count < 0:
        raise CorruptRecordError(f"negative header count {count}")
    headers: list[Header] = []
    for _ in range(count):
        n, pos = decode_varint(data, pos)
        if n < 0:
            raise CorruptRecordError(f"header key length {n}")
        try:
            key = data[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptRecordError(f"header key is not UTF-8: {e}") from None
        pos += n
        n, pos = decode_varint(data, pos)
        if n >= 0:
            headers.append((key, data[pos : pos + n]))
            pos += n
        elif n == -1:
            headers.append((key, None))
        else:
            raise CorruptRecordError(f"header value length {n}")
    return tuple(headers), pos


class PythonRecordCodec:
    """The pure-Python record codec.  Stateless; safe to share between threads."""

    name = "python"

    def builder(self, *, capacity: int = 4096) -> PythonRecordsBuilder:
        return PythonRecordsBuilder(capacity=capacity)

    def encode(self, records: Sequence[Record], *, default_timestamp_ms: int) -> EncodedRecords:
        table = SMALL_VARINTS
        prefixes = _PREFIXES
        limit = SMALL_VARINT_LIMIT
        encode = encode_varint
        encode_headers = _encode_headers
        null = _NULL
        zero = _ZERO
        empty = b""
        parts: list[bytes] = []
        extend = parts.extend

        first_timestamp = records[0][3]
        base = default_timestamp_ms if first_timestamp is None else first_timestamp
        max_timestamp = base
        for delta, (key, value, headers, timestamp) in enumerate(records):
            if timestamp is None:
                timestamp = default_timestamp_ms
            if timestamp == base:
                prefix = prefixes[delta] if delta < limit else b"\x00\x00" + encode(delta)
            else:
                if timestamp > max_timestamp:
                    max_timestamp = timestamp
                prefix = (
                    zero
                    + encode(timestamp - base)
                    + (table[delta] if delta < limit else encode(delta))
                )
            if key is None:
                key_length = null
                key = empty
            else:
                n = len(key)
                key_length = table[n] if n < limit else encode(n)
            if value is None:
                value_length = null
                value = empty
            else:
                n = len(value)
                value_length = table[n] if n < limit else encode(n)
            header_bytes = encode_headers(headers) if headers else zero
            size = (
                len(prefix)
                + len(key_length)
                + len(key)
                + len(value_length)
                + len(value)
                + len(header_bytes)
            )
            extend(
                (
                    table[size] if size < limit else encode(size),
                    prefix,
                    key_length,
                    key,
                    value_length,
                    value,
                    header_bytes,
                )
            )
        return EncodedRecords(b"".join(parts), base, max_timestamp)

    def decode_as(
        self,
        data: Buffer,
        *,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
        record_type: type[T],
        prefix: tuple[Any, ...],
    ) -> list[T]:
        new = tuple.__new__
        decoded = self.decode(
            data,
            count=count,
            base_offset=base_offset,
            base_timestamp=base_timestamp,
            log_append_time=log_append_time,
        )
        return [new(record_type, prefix + r) for r in decoded]

    def decode(
        self,
        data: Buffer,
        *,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: int | None,
    ) -> list[ConsumedRecord]:
        if type(data) is not bytes:
            data = bytes(data)  # slices of a bytes are bytes, the values consumers want
        if count < 0:
            raise CorruptRecordError(f"negative recordsCount {count}")
        zigzag = _ZIGZAG
        read = decode_varint
        decode_headers = _decode_headers
        new = tuple.__new__
        consumed = ConsumedRecord
        no_headers = _EMPTY_HEADERS
        out: list[ConsumedRecord] = []
        append = out.append
        pos = 0
        index = 0
        try:
            for index in range(count):  # noqa: B007 (index names the bad record)
                # length
                b = data[pos]
                if b < 0x80:
                    length = zigzag[b]
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        z = (b & 0x7F) | (c << 7)
                        length = (z >> 1) ^ -(z & 1)
                        pos += 2
                    else:
                        length, pos = read(data, pos)
                end = pos + length
                # attributes (ignored), then timestampDelta
                b = data[pos + 1]
                if b < 0x80:
                    timestamp_delta = zigzag[b]
                    pos += 2
                else:
                    timestamp_delta, pos = read(data, pos + 1)
                # offsetDelta
                b = data[pos]
                if b < 0x80:
                    offset_delta = zigzag[b]
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        z = (b & 0x7F) | (c << 7)
                        offset_delta = (z >> 1) ^ -(z & 1)
                        pos += 2
                    else:
                        offset_delta, pos = read(data, pos)
                # key
                b = data[pos]
                if b < 0x80:
                    n = zigzag[b]
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        z = (b & 0x7F) | (c << 7)
                        n = (z >> 1) ^ -(z & 1)
                        pos += 2
                    else:
                        n, pos = read(data, pos)
                if n >= 0:
                    key: bytes | None = data[pos : pos + n]
                    pos += n
                elif n == -1:
                    key = None
                else:
                    raise CorruptRecordError(f"key length {n}")
                # value
                b = data[pos]
                if b < 0x80:
                    n = zigzag[b]
                    pos += 1
                else:
                    c = data[pos + 1]
                    if c < 0x80:
                        z = (b & 0x7F) | (c << 7)
                        n = (z >> 1) ^ -(z & 1)
                        pos += 2
                    else:
                        n, pos = read(data, pos)
                if n >= 0:
                    value: bytes | None = data[pos : pos + n]
                    pos += n
                elif n == -1:
                    value = None
                else:
                    raise CorruptRecordError(f"value length {n}")
                # headers
                b = data[pos]
                if b == 0:
                    headers = no_headers
                    pos += 1
                else:
                    n, pos = read(data, pos)
                    headers, pos = decode_headers(data, pos, n)
                if pos != end:
                    raise CorruptRecordError(
                        f"record length {length} disagrees with its fields ({length + pos - end})"
                    )
                append(
                    new(
                        consumed,
                        (
                            base_offset + offset_delta,
                            base_timestamp + timestamp_delta
                            if log_append_time is None
                            else log_append_time,
                            key,
                            value,
                            headers,
                        ),
                    )
                )
        except IndexError:
            raise CorruptRecordError(
                f"record {index} of {count} runs past the end of the records section"
            ) from None
        except CorruptRecordError as e:
            raise CorruptRecordError(f"record {index} of {count}: {e.message}") from None
        if pos != len(data):
            raise CorruptRecordError(
                f"{len(data) - pos} bytes left after the {count} records the header declares"
            )
        return out


_new_record = tuple.__new__
_CODEC = PythonRecordCodec()


class PythonRecordsBuilder:
    """The pure-Python :class:`RecordsBuilder`: keeps the records, encodes when finished.

    Encoding record by record in Python would cost more than encoding the
    whole list at once (:meth:`PythonRecordCodec.encode` hoists its lookups
    out of the loop), and moving it from the sender thread to ``send`` would
    not help a GIL-bound process anyway.  :attr:`size` therefore encodes what
    has been appended so far (and caches it): fine for tests, not for a hot path.
    """

    __slots__ = ("_encoded", "_finished", "_max_timestamp", "_records")

    def __init__(self, *, capacity: int = 4096) -> None:
        del capacity  # a list needs no size hint
        self._records: list[Record] = []
        self._max_timestamp: int | None = None
        self._encoded: bytes | None = None
        self._finished = False

    @property
    def count(self) -> int:
        return len(self._records)

    @property
    def size(self) -> int:
        return len(self._encode())

    @property
    def base_timestamp(self) -> int | None:
        return self._records[0][3] if self._records else None

    @property
    def max_timestamp(self) -> int | None:
        return self._max_timestamp

    @property
    def finished(self) -> bool:
        return self._finished

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
    ) -> int:
        if self._finished:
            raise ValueError("the builder is finished")
        if not isinstance(timestamp_ms, int):
            raise TypeError(f"timestamp_ms must be an int, not {type(timestamp_ms).__name__}")
        records = self._records
        index = len(records)
        records.append(_new_record(Record, (key, value, headers, timestamp_ms)))
        if self._max_timestamp is None or timestamp_ms > self._max_timestamp:
            self._max_timestamp = timestamp_ms
        self._encoded = None
        return index

    def append_thunk(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        callback: object,
        thunks: list[Any],
    ) -> int:
        index = self.append(key, value, headers, timestamp_ms)
        if callback is not None:
            thunks += (callback, index, timestamp_ms)
        return index

    def append_future(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        timestamp_ms: int,
        callback: object,
        thunks: list[Any],
        result: object,
        cls: type[T],
    ) -> T:
        index = self.append_thunk(key, value, headers, timestamp_ms, callback, thunks)
        return _new_record(cls, (result, index, timestamp_ms))

    def records(self) -> bytes:
        data = self._encode()
        self._finished = True
        return data

    def batch(self, tail: bytes) -> bytes:
        if len(tail) != HEADER_TAIL.size:
            raise ValueError(
                f"batch(tail): tail must be the {HEADER_TAIL.size} bytes from attributes on"
            )
        if not self._records:
            raise ValueError("a record batch needs at least one record")
        records = self.records()
        crc = crc32c(records, crc32c(tail))
        batch_length = HEADER_SIZE - LOG_OVERHEAD + len(records)
        prefix = HEADER_PREFIX.pack(0, batch_length, -1, MAGIC, crc)
        return b"".join((prefix, tail, records))

    def _encode(self) -> bytes:
        if self._encoded is None:
            if not self._records:
                self._encoded = b""
            else:
                self._encoded = _CODEC.encode(self._records, default_timestamp_ms=0).data
        return self._encoded
