"""message.timestamp.type=LogAppendTime and compressed batches on the append path.

Covers: the broker's time stamped into each batch (CRC recomputed, so the
stored batch still validates), the append info reporting it, time lookups
using it, and compressed batches stored and read back verbatim.
"""

from __future__ import annotations

from pathlib import Path

from headwater.records import Record, TimestampType, build_batch, read_batches
from headwater.storage import TimestampAndOffset

from .helpers import open_log


def test_log_append_time_is_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    records = build_batch([Record(None, b"a"), Record(None, b"b")], timestamp_ms=5)
    info = log.append_as_leader(records, leader_epoch=0, now_ms=777)
    assert info.log_append_time_ms == 777 and info.max_timestamp == 777
    (stored,) = read_batches(log.read(0, 10_000).records)  # read_batches checks the CRC
    assert stored.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in stored.records()] == [777, 777]
    assert log.fetch_offset_by_timestamp(700) == TimestampAndOffset(777, 0, 0)
    log.close()


def test_compressed_batches_round_trip(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        records = [Record(None, f"{codec}-{i}".encode() * 20, timestamp_ms=i) for i in range(5)]
        log.append_as_leader(build_batch(records, compression=codec), leader_epoch=0, now_ms=0)
    batches = list(read_batches(log.read(0, 1 << 20).records))
    assert [b.base_offset for b in batches] == [0, 5, 10, 15]
    assert [r.offset for b in batches for r in b.records()] == list(range(20))
    assert log.fetch_offset_by_timestamp(3) == TimestampAndOffset(3, 3, 0)
    log.close()
