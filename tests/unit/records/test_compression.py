"""Every codec round trip, with Kafka's framing checked on the wire bytes.

For each codec: the attribute bits name it, the records section after the
61-byte header starts with the expected magic (gzip ``1f 8b``, xerial
``82 SNAPPY 00``, LZ4 frame ``0x184D2204``, zstd ``0xFD2FB528``) and really is
compressed, and records come back unchanged.  Also: a raw (non-xerial)
snappy batch decodes, xerial output is split into 32 KiB blocks, a
concatenated gzip stream decodes, the LZ4 frame uses independent blocks
(Kafka refuses dependent ones), and a custom codec can be registered.
"""

from __future__ import annotations

import gzip
import random
import struct

import cramjam
import pytest
from headwater.records import (
    HEADER_SIZE,
    Compression,
    Record,
    build_batch,
    parse_header,
    read_batches,
    register_codec,
)
from headwater.records.compression import XERIAL_BLOCK_SIZE, codec_for

from tests.unit.records import spec_batch

MAGICS = {
    "gzip": b"\x1f\x8b",
    "snappy": b"\x82SNAPPY\x00",
    "lz4": struct.pack("<I", 0x184D2204),
    "zstd": struct.pack("<I", 0xFD2FB528),
}
RECORDS = [
    Record(b"user-%d" % (i % 7), b"payload %d " % i * 20, [("trace", b"t%d" % i)], 10_000 + i)
    for i in range(300)
]


def _uncompressed_size() -> int:
    return len(build_batch(RECORDS)) - HEADER_SIZE


@pytest.mark.parametrize("name", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_sets_bits_and_framing(name: str) -> None:
    data = build_batch(RECORDS, compression=name, base_offset=3)
    header = parse_header(data)
    assert header.attributes & 0x07 == Compression.parse(name).value
    assert header.compression is Compression.parse(name)
    payload = data[HEADER_SIZE:]
    if name != "none":
        assert payload.startswith(MAGICS[name])
        assert len(payload) < _uncompressed_size() // 2
    [batch] = read_batches(data)
    got = list(batch.records())
    assert [(r.key, r.value, list(r.headers), r.timestamp_ms) for r in got] == [
        (r.key, r.value, list(r.headers), r.timestamp_ms) for r in RECORDS
    ]
    assert [r.offset for r in got] == list(range(3, 303))


def test_compression_accepts_the_enum_and_refuses_unknown_names() -> None:
    assert parse_header(build_batch(RECORDS[:1], compression=Compression.ZSTD)).compression == 4
    assert Compression.parse("LZ4") is Compression.LZ4
    with pytest.raises(ValueError, match="unknown compression 'brotli'"):
        build_batch(RECORDS[:1], compression="brotli")


def test_gzip_payload_is_a_standard_gzip_stream() -> None:
    data = build_batch(RECORDS, compression="gzip")
    section = gzip.decompress(data[HEADER_SIZE:])
    assert section == build_batch(RECORDS)[HEADER_SIZE:]


def test_concatenated_gzip_members_decode() -> None:
    section = build_batch(RECORDS)[HEADER_SIZE:]
    half = len(section) // 2
    payload = gzip.compress(section[:half]) + gzip.compress(section[half:])
    data = spec_batch.assemble(
        payload, records_count=len(RECORDS), attributes=1, base_timestamp=10_000
    )
    [batch] = read_batches(data)
    assert [r.value for r in batch.records()] == [r.value for r in RECORDS]


def test_xerial_snappy_framing_bytes() -> None:
    big = [Record(None, bytes(range(256)) * 64, timestamp_ms=0) for _ in range(6)]  # ~96 KiB
    data = build_batch(big, compression="snappy")
    section = build_batch(big)[HEADER_SIZE:]
    payload = data[HEADER_SIZE:]
    # magic, version 1, minimum compatible version 1
    assert payload[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    pos, blocks = 16, []
    while pos < len(payload):
        (length,) = struct.unpack_from(">i", payload, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(payload[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert pos == len(payload)
    assert len(blocks) == -(-len(section) // XERIAL_BLOCK_SIZE)
    assert all(len(b) == XERIAL_BLOCK_SIZE for b in blocks[:-1])
    assert b"".join(blocks) == section


def test_concatenated_xerial_streams_decode() -> None:
    section = build_batch(RECORDS)[HEADER_SIZE:]
    codec = codec_for(Compression.SNAPPY)
    half = len(section) // 2
    payload = codec.compress(section[:half]) + codec.compress(section[half:])
    assert codec.decompress(payload) == section


def test_raw_snappy_batch_decodes() -> None:
    section = build_batch(RECORDS)[HEADER_SIZE:]
    payload = bytes(cramjam.snappy.compress_raw(section))
    assert not payload.startswith(b"\x82SNAPPY")
    data = spec_batch.assemble(
        payload,
        records_count=len(RECORDS),
        attributes=2,
        base_timestamp=10_000,
        max_timestamp=10_299,
    )
    [batch] = read_batches(data)
    assert batch.compression is Compression.SNAPPY
    assert [r.value for r in batch.records()] == [r.value for r in RECORDS]


def test_lz4_frame_is_written_as_kafka_writes_it() -> None:
    payload = build_batch(RECORDS, compression="lz4")[HEADER_SIZE:]
    # magic, FLG 0x60 (version 1, independent blocks, no checksums), BD 0x40 (64 KiB),
    # header checksum byte = (xxh32(FLG BD) >> 8) & 0xff
    assert payload[:7] == bytes.fromhex("04224d18604082")
    assert payload[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum


def test_lz4_frames_with_checksums_and_linked_blocks_decode() -> None:
    section = build_batch(RECORDS)[HEADER_SIZE:]
    payload = bytes(cramjam.lz4.compress(section))  # the library's defaults, not Kafka's
    assert payload[4] & 0x14  # block and content checksums present
    data = spec_batch.assemble(
        payload, records_count=len(RECORDS), attributes=3, base_timestamp=10_000
    )
    [batch] = read_batches(data)
    assert [r.value for r in batch.records()] == [r.value for r in RECORDS]


def test_incompressible_lz4_blocks_are_stored() -> None:
    noise = random.Random(0).randbytes(70_000)
    data = build_batch([Record(None, noise, timestamp_ms=0)], compression="lz4")
    (first_block,) = struct.unpack_from("<I", data, HEADER_SIZE + 7)
    assert first_block == 0x80000000 | 65536  # high bit: stored uncompressed
    [batch] = read_batches(data)
    [record] = batch.records()
    assert record.value == noise


def test_zstd_and_lz4_payloads_are_standard_frames() -> None:
    section = build_batch(RECORDS)[HEADER_SIZE:]
    zstd_payload = build_batch(RECORDS, compression="zstd")[HEADER_SIZE:]
    lz4_payload = build_batch(RECORDS, compression="lz4")[HEADER_SIZE:]
    assert bytes(cramjam.zstd.decompress(zstd_payload)) == section
    assert bytes(cramjam.lz4.decompress(lz4_payload)) == section


def test_a_registered_codec_replaces_the_default() -> None:
    class Reversing:
        def compress(self, data: bytes | bytearray | memoryview) -> bytes:
            return bytes(data)[::-1]

        def decompress(self, data: bytes | bytearray | memoryview) -> bytes:
            return bytes(data)[::-1]

    original = codec_for(Compression.ZSTD)
    register_codec(Compression.ZSTD, Reversing())
    try:
        data = build_batch(RECORDS[:3], compression="zstd")
        assert data[HEADER_SIZE:] == build_batch(RECORDS[:3])[HEADER_SIZE:][::-1]
        [batch] = read_batches(data)
        assert [r.value for r in batch.records()] == [r.value for r in RECORDS[:3]]
    finally:
        register_codec(Compression.ZSTD, original)
