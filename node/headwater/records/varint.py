"""Zigzag varints, the integer encoding inside RecordBatch v2 records.

Kafka encodes signed integers with protobuf's zigzag mapping
(0, -1, 1, -2, ... -> 0, 1, 2, 3, ...) then as little-endian base-128 groups,
high bit set on every byte but the last.  ``varint`` fields are int32 and
``varlong`` fields int64; the byte format is the same, only the range differs.

Record encoding is the producer's per-record cost, so small non-negative
values (lengths and offset deltas, which is nearly every varint written) come
from a precomputed table of ``bytes`` rather than a Python loop.
"""

from __future__ import annotations

from headwater.errors import CorruptRecordError
from headwater.records.header import Buffer

__all__ = [
    "SMALL_VARINTS",
    "SMALL_VARINT_LIMIT",
    "decode_varint",
    "encode_varint",
    "zigzag_decode",
    "zigzag_encode",
]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_MAX_VARINT_BYTES = 10  # 64 bits in 7-bit groups


def zigzag_encode(n: int) -> int:
    """Map a signed int64 to the unsigned zigzag value."""
    return (n << 1) ^ (n >> 63)


def zigzag_decode(z: int) -> int:
    """Inverse of :func:`zigzag_encode`."""
    return (z >> 1) ^ -(z & 1)


def _encode_slow(n: int) -> bytes:
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"{n} does not fit a varlong (int64)")
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


SMALL_VARINT_LIMIT = 16384
"""Values in ``range(SMALL_VARINT_LIMIT)`` are encoded by table lookup."""
SMALL_VARINTS: tuple[bytes, ...] = tuple(_encode_slow(i) for i in range(SMALL_VARINT_LIMIT))
"""``SMALL_VARINTS[n]`` is the zigzag varint encoding of ``n``."""


def encode_varint(n: int) -> bytes:
    """Zigzag varint bytes of the signed int64 ``n``."""
    if 0 <= n < SMALL_VARINT_LIMIT:
        return SMALL_VARINTS[n]
    return _encode_slow(n)


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode the zigzag varint at ``pos``; return ``(value, position after it)``.

    Raises CorruptRecordError if the buffer ends mid-varint, the varint is
    longer than ten bytes or its value does not fit 64 bits.
    """
    z = 0
    shift = 0
    end = len(buf)
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError(f"varint at record byte {start} runs past the end")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
        if shift == 63 and pos < end and buf[pos] & 0x7E:
            # Kafka's varlongs are 64 bits; a tenth byte above 1 would not fit.
            raise CorruptRecordError(f"varint at record byte {start} overflows 64 bits")
        if shift >= 7 * _MAX_VARINT_BYTES:
            raise CorruptRecordError(f"varint at record byte {start} is longer than 10 bytes")
