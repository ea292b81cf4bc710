"""A ``FetchResponse`` read from its wire bytes without copying the records.

gRPC hands a response's deserializer one ``bytes`` object.  The generated
``FetchResponse.FromString`` copies each partition's ``records`` into the
message's arena, and reading the field copies it again into a new ``bytes``:
two copies of every fetched byte (about 0.25 µs of a 1 KiB record's CPU, a
third of what the consumer does with it; ``bench/consume_cpu.py``).  :func:`parse`
reads the same message into :class:`FetchResponseView`, whose partitions'
``records`` are ``memoryview`` slices of the bytes gRPC received.

The views have the generated message's field names and proto3 values
(a missing field is its default: 0, ``""``, an empty buffer), so code that
reads a ``FetchResponse``'s fields reads a view the same way; ``records`` is a
read-only buffer rather than ``bytes`` (what :func:`headwater.records.read_batches`
takes).  Only the fields of ``broker.proto``'s ``FetchResponse`` and
``FetchedPartition`` are read; unknown fields (a newer broker's) are skipped,
as the generated code does.  Malformed bytes raise :class:`MalformedFetchResponse`.
"""

from __future__ import annotations

from headwater.v1 import broker_pb2

__all__ = ["FetchResponseView", "FetchedPartitionView", "MalformedFetchResponse", "parse"]

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5
_U64 = 1 << 64
_I64_MIN = 1 << 63


class MalformedFetchResponse(ValueError):
    """The bytes are not a ``FetchResponse`` (truncated, a bad varint or wire type)."""


class FetchedPartitionView:
    """One partition of a fetch answer: ``broker.proto``'s ``FetchedPartition`` fields."""

    __slots__ = (
        "_aborted",
        "_diverging_epoch",
        "error",
        "error_message",
        "high_watermark",
        "last_stable_offset",
        "log_end_offset",
        "log_start_offset",
        "partition",
        "preferred_read_replica",
        "records",
        "topic",
    )

    def __init__(self) -> None:
        self.topic = ""
        self.partition = 0
        self.error = 0
        self.error_message = ""
        self.high_watermark = 0
        self.last_stable_offset = 0
        self.log_start_offset = 0
        self.records: memoryview | bytes = b""
        self._diverging_epoch: memoryview | None = None
        self.preferred_read_replica = 0
        self.log_end_offset = 0
        self._aborted: list[memoryview] | None = None

    @property
    def aborted_transactions(self) -> list[broker_pb2.AbortedTransaction]:
        """READ_COMMITTED: the transactions aborted in the range served (empty if none)."""
        if self._aborted is None:
            return []
        return [broker_pb2.AbortedTransaction.FromString(bytes(raw)) for raw in self._aborted]

    @property
    def diverging_epoch(self) -> broker_pb2.EpochEndOffset:
        """The ``EpochEndOffset`` (its default when the broker sent none)."""
        raw = self._diverging_epoch
        return broker_pb2.EpochEndOffset.FromString(bytes(raw) if raw is not None else b"")

    def HasField(self, name: str) -> bool:  # the generated message's name
        """Whether the message field ``name`` (only ``diverging_epoch``) was sent."""
        if name != "diverging_epoch":
            raise ValueError(f"FetchedPartition has no message field {name!r}")
        return self._diverging_epoch is not None

    def __repr__(self) -> str:
        return (
            f"FetchedPartitionView(topic={self.topic!r}, partition={self.partition}, "
            f"error={self.error}, high_watermark={self.high_watermark}, "
            f"records={len(self.records)} bytes)"
        )


class FetchResponseView:
    """A fetch answer: ``partitions`` (a list of :class:`FetchedPartitionView`) and
    ``throttle_time_ms``; it keeps the received bytes alive while a ``records`` does."""

    __slots__ = ("partitions", "throttle_time_ms")

    def __init__(self, partitions: list[FetchedPartitionView], throttle_time_ms: int) -> None:
        self.partitions = partitions
        self.throttle_time_ms = throttle_time_ms


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` and the position after it."""
    result = shift = 0
    while pos < end:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result >= _U64:
                break
            return result, pos
        shift += 7
        if shift >= 70:
            break
    raise MalformedFetchResponse(f"bad or truncated varint before byte {pos}")


def _int64(v: int) -> int:
    return v - _U64 if v >= _I64_MIN else v


def _int32(v: int) -> int:
    return ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


def _skip(data: bytes, pos: int, end: int, wire: int) -> int:
    """The position after an unknown field's value of wire type ``wire``."""
    if wire == _VARINT:
        return _varint(data, pos, end)[1]
    if wire == _I64:
        pos += 8
    elif wire == _I32:
        pos += 4
    elif wire == _LEN:
        n, pos = _varint(data, pos, end)
        pos += n
    else:
        raise MalformedFetchResponse(f"unsupported wire type {wire} before byte {pos}")
    if pos > end:
        raise MalformedFetchResponse("a field runs past the end of its message")
    return pos


def _length(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length-delimited field's (start, end)."""
    n, pos = _varint(data, pos, end)
    stop = pos + n
    if stop > end:
        raise MalformedFetchResponse("a field runs past the end of its message")
    return pos, stop


def _partition(data: bytes, view: memoryview, pos: int, end: int) -> FetchedPartitionView:
    p = FetchedPartitionView()
    while pos < end:
        key = data[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(data, pos, end)
        field, wire = key >> 3, key & 7
        if wire == _LEN:
            start, pos = _length(data, pos, end)
            if field == 8:
                p.records = view[start:pos]
            elif field == 1:
                p.topic = data[start:pos].decode()
            elif field == 4:
                p.error_message = data[start:pos].decode()
            elif field == 9:
                p._diverging_epoch = view[start:pos]
            elif field == 12:
                if p._aborted is None:
                    p._aborted = []
                p._aborted.append(view[start:pos])
            continue
        if wire != _VARINT:
            pos = _skip(data, pos, end, wire)
            continue
        v, pos = _varint(data, pos, end)
        if field == 2:
            p.partition = _int32(v)
        elif field == 3:
            p.error = _int32(v)
        elif field == 5:
            p.high_watermark = _int64(v)
        elif field == 6:
            p.last_stable_offset = _int64(v)
        elif field == 7:
            p.log_start_offset = _int64(v)
        elif field == 10:
            p.preferred_read_replica = _int32(v)
        elif field == 11:
            p.log_end_offset = _int64(v)
    return p


def parse(data: bytes) -> FetchResponseView:
    """``data`` (a serialized ``FetchResponse``) as a view; the gRPC deserializer of the
    client's ``Fetch`` and ``FetchStream`` calls."""
    view = memoryview(data)
    if not isinstance(data, bytes):
        data = bytes(view)
    end = len(data)
    pos = 0
    partitions: list[FetchedPartitionView] = []
    throttle = 0
    try:
        while pos < end:
            key, pos = _varint(data, pos, end)
            field, wire = key >> 3, key & 7
            if field == 1 and wire == _LEN:
                start, pos = _length(data, pos, end)
                partitions.append(_partition(data, view, start, pos))
            elif field == 2 and wire == _VARINT:
                v, pos = _varint(data, pos, end)
                throttle = _int32(v)
            else:
                pos = _skip(data, pos, end, wire)
    except UnicodeDecodeError as exc:
        raise MalformedFetchResponse(f"a string field is not UTF-8: {exc}") from None
    return FetchResponseView(partitions, throttle)
