"""A RecordBatch v2 assembler written straight from the spec, for tests only.

It shares no code with ``headwater.records``: field layout, zigzag varints
and the CRC-32C range are spelled out again here, so the tests compare the
codec against an independent reading of Kafka's format.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")  # the 13 header fields, 61 bytes


def zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def record(
    key: bytes | None,
    value: bytes | None,
    *,
    timestamp_delta: int = 0,
    offset_delta: int = 0,
    headers: tuple[tuple[str, bytes | None], ...] = (),
) -> bytes:
    """One encoded record, length prefix included."""
    body = bytearray(b"\x00")  # attributes
    body += zigzag_varint(timestamp_delta) + zigzag_varint(offset_delta)
    for blob in (key, value):
        body += zigzag_varint(-1) if blob is None else zigzag_varint(len(blob)) + blob
    body += zigzag_varint(len(headers))
    for hkey, hvalue in headers:
        raw = hkey.encode()
        body += zigzag_varint(len(raw)) + raw
        body += zigzag_varint(-1) if hvalue is None else zigzag_varint(len(hvalue)) + hvalue
    return zigzag_varint(len(body)) + bytes(body)


def assemble(
    records_section: bytes,
    *,
    records_count: int,
    last_offset_delta: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    magic: int = 2,
    attributes: int = 0,
    base_timestamp: int = 0,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    crc: int | None = None,
) -> bytes:
    """A whole batch around ``records_section``; the CRC is computed unless given."""
    tail = struct.pack(
        ">hiqqqhii",
        attributes,
        records_count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp,
        base_timestamp if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    if crc is None:
        crc = crc32c(tail + records_section)
    batch_length = 4 + 1 + 4 + len(tail) + len(records_section)
    return (
        struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, magic, crc)
        + tail
        + records_section
    )


def restamp_crc(batch: bytearray, pos: int = 0) -> None:
    """Recompute the CRC of the batch at ``pos`` after a test edited a covered field."""
    length = struct.unpack_from(">i", batch, pos + 8)[0]
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21 : pos + 12 + length])))
