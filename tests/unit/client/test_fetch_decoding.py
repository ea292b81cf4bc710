"""Decoding fetch answers: records before the requested offset (inside the first batch)
are dropped, control batches skipped, a cut trailing batch ignored; and the buffered
answers ``poll`` takes from advance positions and drop answers for stale positions."""

from __future__ import annotations

from headwater import records
from headwater.client.consumer.fetcher import PartitionRecords, records_from
from headwater.client.types import ConsumerRecord, TopicPartition

TP = TopicPartition("t", 0)


def batch(base: int, n: int) -> bytes:
    return records.build_batch(
        [records.Record(None, str(base + i).encode(), (), 1000 + i) for i in range(n)],
        base_offset=base,
    )


def test_records_before_fetch_offset_are_dropped() -> None:
    data = batch(0, 10) + batch(10, 10)
    got = records_from(data, TP, fetch_offset=7)
    assert [r.offset for r in got] == list(range(7, 20))
    assert got[0] == ConsumerRecord("t", 0, 7, 1007, None, b"7", ())


def test_whole_batches_before_fetch_offset_are_skipped() -> None:
    got = records_from(batch(0, 5) + batch(5, 5), TP, fetch_offset=5)
    assert [r.offset for r in got] == [5, 6, 7, 8, 9]


def test_trailing_partial_batch_is_ignored() -> None:
    second = batch(3, 3)
    got = records_from(batch(0, 3) + second[: len(second) // 2], TP, fetch_offset=0)
    assert [r.offset for r in got] == [0, 1, 2]


def test_empty_answer() -> None:
    assert records_from(b"", TP, fetch_offset=0) == []


def test_partition_records_hand_out_slices() -> None:
    recs = records_from(batch(0, 5), TP, fetch_offset=0)
    pr = PartitionRecords(TP, fetch_offset=0, epoch=0, records=recs)
    assert [r.offset for r in pr.take(2)] == [0, 1]
    assert not pr.exhausted
    assert [r.offset for r in pr.take(10)] == [2, 3, 4]
    assert pr.exhausted
