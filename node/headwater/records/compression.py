"""Batch compression with Kafka's framings, so batches interoperate with Kafka.

Compression applies to the records section of a batch (everything after the
61-byte header).  Each codec uses the exact stream format Kafka's Java client
writes and reads, because a batch is stored and fetched verbatim and may one
day be read by a Kafka client:

* gzip: a standard gzip stream (RFC 1952, magic ``1f 8b``), level 6 as Java's
  ``Deflater`` default.  Concatenated members are accepted on decode.
* snappy: the xerial snappy-java stream Kafka uses (``SnappyOutputStream``):
  the 16-byte header ``82 'SNAPPY' 00``, int32 version 1, int32 minimum
  compatible version 1, then blocks of [int32 big-endian length][raw snappy
  block], each compressing at most 32 KiB.  Decoding also accepts a plain raw
  snappy block, as snappy-java's ``SnappyInputStream`` does when the header is
  missing (some non-Java clients write that).
* lz4: the LZ4 frame format (magic ``04 22 4d 18``) as Kafka's
  ``Lz4BlockOutputStream`` writes it: FLG ``0x60`` (version 1, independent
  blocks, which Kafka's reader requires), BD ``0x40`` (64 KiB blocks), no
  block or content checksums, then an end mark.
* zstd: a zstd frame (magic ``28 b5 2f fd``), level 3 as Kafka's default.

Codecs sit behind the :class:`CompressionCodec` protocol so a native or
differently tuned implementation can be registered with :func:`register_codec`.
"""

from __future__ import annotations

import struct
import zlib
from typing import Protocol

import cramjam

from headwater.errors import CorruptRecordError
from headwater.records.header import Buffer, Compression

__all__ = [
    "GZIP_MAGIC",
    "LZ4_FRAME_HEADER",
    "LZ4_FRAME_MAGIC",
    "XERIAL_HEADER",
    "XERIAL_MAGIC",
    "ZSTD_MAGIC",
    "CompressionCodec",
    "codec_for",
    "compress",
    "decompress",
    "register_codec",
]

GZIP_MAGIC = b"\x1f\x8b"
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"  # 0x184D2204 little-endian
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"  # 0xFD2FB528 little-endian
XERIAL_MAGIC = b"\x82SNAPPY\x00"

_XERIAL_PREAMBLE = struct.Struct(
    ">"
    "8s"  # 0   magic        82 'SNAPPY' 00
    "i"  # 8   version      1
    "i"  # 12  compatible   1 (minimum reader version)
)
XERIAL_HEADER = _XERIAL_PREAMBLE.pack(XERIAL_MAGIC, 1, 1)
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")  # each block: int32 compressed length, then bytes
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's DEFAULT_BLOCK_SIZE, which Kafka uses

GZIP_LEVEL = 6
ZSTD_LEVEL = 3


class CompressionCodec(Protocol):
    """Compresses and decompresses a batch's records section."""

    def compress(self, data: Buffer) -> bytes: ...

    def decompress(self, data: Buffer) -> bytes: ...


class _NoCompression:
    def compress(self, data: Buffer) -> bytes:
        return bytes(data)

    def decompress(self, data: Buffer) -> bytes:
        return bytes(data)


class GzipCodec:
    """gzip stream (RFC 1952) via zlib, which releases the GIL while working."""

    def __init__(self, level: int = GZIP_LEVEL) -> None:
        self.level = level

    def compress(self, data: Buffer) -> bytes:
        compressor = zlib.compressobj(self.level, zlib.DEFLATED, 31)  # 16 + 15: gzip wrapper
        return compressor.compress(data) + compressor.flush()

    def decompress(self, data: Buffer) -> bytes:
        decompressor = zlib.decompressobj(31)
        out = decompressor.decompress(data)
        while True:  # one pass per gzip member; almost always exactly one
            if not decompressor.eof:
                raise zlib.error("truncated gzip stream")
            rest = decompressor.unused_data
            if not rest.strip(b"\x00"):  # trailing zero padding is tolerated
                return out
            decompressor = zlib.decompressobj(31)
            out += decompressor.decompress(rest)


class XerialSnappyCodec:
    """snappy-java's stream framing on encode; xerial-framed or raw snappy on decode."""

    def __init__(self, block_size: int = XERIAL_BLOCK_SIZE) -> None:
        self.block_size = block_size

    def compress(self, data: Buffer) -> bytes:
        compress_raw = cramjam.snappy.compress_raw
        pack = _XERIAL_BLOCK_LENGTH.pack
        parts = [XERIAL_HEADER]
        step = self.block_size
        with memoryview(data) as view:
            for start in range(0, len(view), step):
                block = bytes(compress_raw(view[start : start + step]))
                parts.append(pack(len(block)))
                parts.append(block)
        return b"".join(parts)

    def decompress(self, data: Buffer) -> bytes:
        decompress_raw = cramjam.snappy.decompress_raw
        with memoryview(data) as view:
            if bytes(view[:8]) != XERIAL_MAGIC:
                return bytes(decompress_raw(view))
            if len(view) < _XERIAL_PREAMBLE.size:
                raise ValueError("truncated xerial snappy header")
            parts: list[bytes] = []
            pos = _XERIAL_PREAMBLE.size
            end = len(view)
            unpack_from = _XERIAL_BLOCK_LENGTH.unpack_from
            while pos < end:
                if view[pos : pos + 8] == XERIAL_MAGIC:  # concatenated streams, as snappy-java
                    pos += _XERIAL_PREAMBLE.size
                    continue
                if end - pos < 4:
                    raise ValueError(f"truncated xerial block length at {pos}")
                length = unpack_from(view, pos)[0]
                pos += 4
                if length < 0 or pos + length > end:
                    raise ValueError(f"xerial block at {pos - 4} declares {length} bytes")
                parts.append(bytes(decompress_raw(view[pos : pos + length])))
                pos += length
            return b"".join(parts)


def _xxh32_of_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (all an LZ4 frame descriptor needs)."""
    mask = 0xFFFFFFFF
    prime1, prime2, prime3, prime4, prime5 = (
        2654435761,
        2246822519,
        3266489917,
        668265263,
        374761393,
    )
    h = (seed + prime5 + len(data)) & mask
    pos = 0
    while pos + 4 <= len(data):
        h = (h + int.from_bytes(data[pos : pos + 4], "little") * prime3) & mask
        h = (((h << 17) | (h >> 15)) & mask) * prime4 & mask
        pos += 4
    for b in data[pos:]:
        h = (h + b * prime5) & mask
        h = (((h << 11) | (h >> 21)) & mask) * prime1 & mask
    h ^= h >> 15
    h = (h * prime2) & mask
    h ^= h >> 13
    h = (h * prime3) & mask
    return h ^ (h >> 16)


_LZ4_FLG = 0x60  # version 01, block independence; no checksums, no content size (as Kafka)
_LZ4_BD = 0x40  # block maximum size 64 KiB
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_DESCRIPTOR = bytes((_LZ4_FLG, _LZ4_BD))
LZ4_FRAME_HEADER = (
    LZ4_FRAME_MAGIC + _LZ4_DESCRIPTOR + bytes(((_xxh32_of_short(_LZ4_DESCRIPTOR) >> 8) & 0xFF,))
)
"""Magic, FLG, BD and header checksum: the 7 bytes Kafka's ``Lz4BlockOutputStream`` writes."""
_LZ4_BLOCK_LENGTH = struct.Struct("<I")  # little-endian; high bit set: block stored uncompressed
_LZ4_UNCOMPRESSED = 0x80000000
_LZ4_END_MARK = b"\x00\x00\x00\x00"


class Lz4FrameCodec:
    """LZ4 frame format exactly as Kafka writes it: independent 64 KiB blocks, no checksums.

    Kafka's ``Lz4BlockInputStream`` refuses linked (dependent) blocks, which is
    the LZ4 library's default, so the frame is assembled here from raw LZ4
    blocks.  Decoding accepts any valid LZ4 frame (checksums, content size).
    """

    def compress(self, data: Buffer) -> bytes:
        compress_block = cramjam.lz4.compress_block
        pack = _LZ4_BLOCK_LENGTH.pack
        parts = [LZ4_FRAME_HEADER]
        with memoryview(data) as view:
            for start in range(0, len(view), _LZ4_BLOCK_SIZE):
                chunk = view[start : start + _LZ4_BLOCK_SIZE]
                block = bytes(compress_block(chunk, store_size=False))
                if len(block) >= len(chunk):  # incompressible: store it as is
                    parts.append(pack(len(chunk) | _LZ4_UNCOMPRESSED))
                    parts.append(bytes(chunk))
                else:
                    parts.append(pack(len(block)))
                    parts.append(block)
        parts.append(_LZ4_END_MARK)
        return b"".join(parts)

    def decompress(self, data: Buffer) -> bytes:
        return bytes(cramjam.lz4.decompress(data))


class ZstdCodec:
    """A zstd frame (Kafka uses zstd-jni's standard frames, level 3 by default)."""

    def __init__(self, level: int = ZSTD_LEVEL) -> None:
        self.level = level

    def compress(self, data: Buffer) -> bytes:
        return bytes(cramjam.zstd.compress(data, level=self.level))

    def decompress(self, data: Buffer) -> bytes:
        return bytes(cramjam.zstd.decompress(data))


_CODECS: dict[Compression, CompressionCodec] = {
    Compression.NONE: _NoCompression(),
    Compression.GZIP: GzipCodec(),
    Compression.SNAPPY: XerialSnappyCodec(),
    Compression.LZ4: Lz4FrameCodec(),
    Compression.ZSTD: ZstdCodec(),
}


def register_codec(compression: Compression, codec: CompressionCodec) -> None:
    """Replace the implementation used for ``compression`` (e.g. a native one)."""
    _CODECS[compression] = codec


def codec_for(compression: Compression) -> CompressionCodec:
    return _CODECS[compression]


def compress(compression: Compression, data: Buffer) -> bytes:
    """Compress a records section with Kafka's framing for ``compression``."""
    return _CODECS[compression].compress(data)


def decompress(compression: Compression, data: Buffer, *, where: str = "batch") -> bytes:
    """Decompress a records section; any codec failure becomes CorruptRecordError."""
    try:
        return _CODECS[compression].decompress(data)
    except CorruptRecordError:
        raise
    except Exception as e:  # cramjam raises its own DecompressionError; zlib raises zlib.error
        raise CorruptRecordError(
            f"{where}: cannot decompress {compression.name.lower()} records: {e}"
        ) from e
