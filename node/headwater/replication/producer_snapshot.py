"""A partition's producer state as one file: Kafka's producer ``.snapshot``.

The leader keeps, per producer id, the idempotence state
(:class:`~headwater.replication.producer_state.ProducerStateManager`: epoch and last
batches, for sequence checks and duplicate answers) and the transaction state
(:class:`~headwater.storage.transactions.PartitionTransactions`: latest epoch, the first
offset of an open transaction, the marker that ended the last one).  Both are a function
of the log; a snapshot taken at offset S holds them for every batch below S, so a new
leader loads it and replays only the batches from S on instead of the whole log.

Layout, big-endian; the CRC-32 covers everything after it::

    version  int16 = 1
    crc      uint32
    idempotent producers  int32, each:
        producer_id int64, producer_epoch int16, batches int16, each:
            first_sequence int32, last_offset_delta int32, base_offset int64
    transactional producers  int32, each:
        producer_id int64, epoch int16, open_first_offset int64 (-1: none open),
        ended_epoch int16 (-1: none), ended_committed int8, ended_offset int64

A file that is short, long, of another version or fails its CRC is CorruptRecordError:
the caller then rebuilds the state from the whole log.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from headwater.errors import CorruptRecordError
from headwater.replication.producer_state import ProducerBatch, ProducerStateManager
from headwater.storage.transactions import PartitionTransactions

__all__ = ["SNAPSHOT_VERSION", "ProducerSnapshot", "decode", "encode"]

SNAPSHOT_VERSION = 1
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER = struct.Struct(">qhh")
_BATCH = struct.Struct(">iiq")
_TXN = struct.Struct(">qhqhbq")


class ProducerSnapshot(NamedTuple):
    """A decoded snapshot: what :meth:`restore` puts back."""

    batches: list[tuple[ProducerBatch, int]]
    """The idempotent producers' remembered batches with their base offsets, in order."""
    epochs: dict[int, int]
    open: dict[int, int]
    ended: dict[int, tuple[int, bool, int]]

    def restore(self, producers: ProducerStateManager, txns: PartitionTransactions) -> None:
        """Replace both states with this snapshot's."""
        producers.clear()
        producers.replay(self.batches)
        txns.epochs.clear()
        txns.epochs.update(self.epochs)
        txns.open.clear()
        txns.open.update(self.open)
        txns.ended.clear()
        txns.ended.update(self.ended)


def encode(producers: ProducerStateManager, txns: PartitionTransactions) -> bytes:
    """The snapshot bytes of both states."""
    body = bytearray()
    entries = producers.entries()
    body += _COUNT.pack(len(entries))
    for pid, entry in entries:
        body += _PRODUCER.pack(pid, entry.producer_epoch, len(entry.batches))
        for b in entry.batches:
            body += _BATCH.pack(b.first_sequence, b.last_offset_delta, b.base_offset)
    pids = sorted(txns.epochs.keys() | txns.open.keys() | txns.ended.keys())
    body += _COUNT.pack(len(pids))
    for pid in pids:
        ended_epoch, committed, ended_offset = txns.ended.get(pid, (-1, False, -1))
        body += _TXN.pack(
            pid,
            txns.epochs.get(pid, -1),
            txns.open.get(pid, -1),
            ended_epoch,
            int(committed),
            ended_offset,
        )
    return _HEAD.pack(SNAPSHOT_VERSION, zlib.crc32(body)) + bytes(body)


def decode(data: bytes) -> ProducerSnapshot:
    """Both states from snapshot bytes; CorruptRecordError for anything not whole."""
    if len(data) < _HEAD.size:
        raise CorruptRecordError(f"producer snapshot of {len(data)} bytes has no header")
    version, crc = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptRecordError(f"producer snapshot version {version}, expected 1")
    body = memoryview(data)[_HEAD.size :]
    if zlib.crc32(body) != crc:
        raise CorruptRecordError("producer snapshot fails its CRC")
    try:
        return _decode_body(body)
    except struct.error as exc:
        raise CorruptRecordError(f"producer snapshot is cut short: {exc}") from None


def _decode_body(body: memoryview) -> ProducerSnapshot:
    snap = ProducerSnapshot([], {}, {}, {})
    pos = 0
    (count,) = _COUNT.unpack_from(body, pos)
    pos += _COUNT.size
    for _ in range(count):
        pid, epoch, batches = _PRODUCER.unpack_from(body, pos)
        pos += _PRODUCER.size
        for _ in range(batches):
            first_sequence, delta, base_offset = _BATCH.unpack_from(body, pos)
            pos += _BATCH.size
            snap.batches.append((ProducerBatch(pid, epoch, first_sequence, delta), base_offset))
    (count,) = _COUNT.unpack_from(body, pos)
    pos += _COUNT.size
    opened = []
    for _ in range(count):
        pid, epoch, open_first, ended_epoch, committed, ended_offset = _TXN.unpack_from(body, pos)
        pos += _TXN.size
        if epoch >= 0:
            snap.epochs[pid] = epoch
        if open_first >= 0:
            opened.append((open_first, pid))
        if ended_epoch >= 0:
            snap.ended[pid] = (ended_epoch, bool(committed), ended_offset)
    for first, pid in sorted(opened):  # ``open`` is kept in first-offset order
        snap.open[pid] = first
    if pos != len(body):
        raise CorruptRecordError(f"producer snapshot has {len(body) - pos} bytes after its end")
    return snap
