"""The client's range reader: exactly ``[start, end)`` of one partition, over real gRPC.

Against the in-process fake broker (with fetch faults injected): ranges whose
first and last stored batches straddle the bounds, several fetches per range,
compressed and control batches, the next fetch sent before a chunk is handed
out, the leader epoch on every fetch, retriable errors (leader changes, fenced
epochs, lost connections) retried after a metadata refresh, others raised,
and offsets that are gone (deleted below the log start, past the log's end,
never arriving) reported to ``on_missing``.  The reader's pure state,
:class:`RangeProgress`, and :func:`decode_range` are tested directly too.
Time is faked where retries run out.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from crc32c import crc32c
from headwater import errors, records
from headwater.client.consumer.range_reader import (
    MissingOffsets,
    RangeChunk,
    RangeProgress,
    RangeReader,
    decode_range,
)
from headwater.client.types import TopicPartition
from headwater.records.control import ControlRecordType, build_control_batch, set_batch_flags
from headwater.retry import RetryPolicy
from headwater.v1 import broker_pb2

from tests.unit.client.fake_broker import FakeBroker

TP = TopicPartition("t", 0)
CODE = errors.ErrorCode


class FaultyBroker(FakeBroker):
    """The fake broker with a log start, fetch faults, and a record of fetched partitions."""

    def __init__(self) -> None:
        super().__init__()
        self.log_start = 0
        self.answer_log_start = True
        self.fetch_errors: list[int] = []
        self.lost_fetches = 0
        self.fetched: list[Any] = []
        self.aborted: list[broker_pb2.AbortedTransaction] = []
        """Named in every READ_COMMITTED answer (the fake keeps no transaction index)."""
        self.isolation_levels: list[int] = []

    def Fetch(self, request: Any, context: Any) -> Any:
        with self.cond:
            self.fetched.extend(request.partitions)
            self.isolation_levels.append(request.isolation_level)
            lose = self.lost_fetches > 0
            self.lost_fetches -= lose
            error = self.fetch_errors.pop(0) if self.fetch_errors else 0
        if lose:
            context.abort(grpc.StatusCode.UNAVAILABLE, "injected: connection lost")
        p = request.partitions[0]
        if not error and p.fetch_offset < self.log_start:
            error = CODE.OFFSET_OUT_OF_RANGE
        if error:
            return broker_pb2.FetchResponse(
                partitions=[
                    broker_pb2.FetchedPartition(
                        topic=p.topic,
                        partition=p.partition,
                        error=error,
                        log_start_offset=self.log_start if self.answer_log_start else -1,
                    )
                ]
            )
        resp = super().Fetch(request, context)
        if request.isolation_level == broker_pb2.READ_COMMITTED:
            for fp in resp.partitions:
                fp.aborted_transactions.extend(self.aborted)
        return resp

    def ListOffsets(self, request: Any, context: Any) -> Any:
        q = request.partitions[0]
        if q.timestamp != -2:
            return super().ListOffsets(request, context)
        return broker_pb2.ListOffsetsResponse(
            partitions=[
                broker_pb2.ListOffsetsPartitionResponse(
                    topic=q.topic, partition=q.partition, offset=self.log_start, timestamp=-1
                )
            ]
        )


def batch(base: int, n: int, *, compression: str = "none") -> bytes:
    recs = [
        records.Record(f"k{base + i}".encode(), f"v{base + i}".encode(), (), 1000 + base + i)
        for i in range(n)
    ]
    return records.build_batch(recs, base_offset=base, compression=compression)


def control_batch(base: int) -> bytes:
    """A one-record batch with the control bit (attributes bit 5) set, CRC redone."""
    raw = bytearray(batch(base, 1))
    raw[22] |= 0x20  # attributes: 2 bytes at 21, big-endian
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    return bytes(raw)


def store(broker: FakeBroker, raws: list[bytes]) -> None:
    if "t" not in broker.topics:
        broker.create("t", 1)
    part = broker.topics["t"][0]
    for raw in raws:
        h = records.parse_header(raw, 0)
        part.batches.append(raw)
        part.timestamps.append((h.max_timestamp, h.base_offset))
        part.next_offset = h.next_offset


def store_batches(broker: FakeBroker, count: int, per_batch: int) -> None:
    """``count`` batches of ``per_batch`` records from offset 0; every other one gzip'd."""
    store(
        broker,
        [
            batch(i * per_batch, per_batch, compression="gzip" if i % 2 else "none")
            for i in range(count)
        ],
    )


@pytest.fixture
def broker() -> Iterator[FaultyBroker]:
    b = FaultyBroker()
    yield b
    b.stop()


def reader_for(broker: FakeBroker, *, ticking: bool = False, **kw: Any) -> RangeReader:
    """A reader that never sleeps; with ``ticking``, every clock read is 1 s later."""
    ticks = itertools.count(0, 1000)
    clock = (lambda: float(next(ticks))) if ticking else None
    extra: dict[str, Any] = {"clock": clock} if clock is not None else {}
    return RangeReader(broker.bootstrap, sleep=lambda _s: None, **extra, **kw)


@pytest.fixture
def reader(broker: FaultyBroker) -> Iterator[RangeReader]:
    r = reader_for(broker, max_partition_fetch_bytes=200)  # one or two batches per answer
    yield r
    r.close()


def offsets_of(chunks: list[RangeChunk]) -> list[int]:
    return [rec.offset for c in chunks for rec in c.all_records()]


# -- reading through the fake broker ---------------------------------------------------


def txn_batch(base: int, n: int, producer_id: int) -> bytes:
    recs = [records.Record(None, f"v{base + i}".encode(), (), 1000) for i in range(n)]
    raw = records.build_batch(recs, base_offset=base, producer_id=producer_id, producer_epoch=0)
    return set_batch_flags(raw, transactional=True)


def marker(base: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(
        kind, producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
        timestamp_ms=1000, base_offset=base,
    )  # fmt: skip


def test_read_committed_drops_aborted_transactions_and_reads_past_them(
    broker: FaultyBroker,
) -> None:
    """Producer 7 commits 0-2, producer 8 aborts 3-5 (its marker at 9), producer 7's
    second transaction (6-8) interleaves and commits at 10; 11 is plain.  Every start
    offset, also one inside the aborted span, reads to the end of the range."""
    store(
        broker,
        [
            txn_batch(0, 3, 7),
            marker(3, 7, ControlRecordType.COMMIT),
            txn_batch(4, 2, 8),
            txn_batch(6, 3, 7),
            txn_batch(9, 1, 8),
            marker(10, 8, ControlRecordType.ABORT),
            marker(11, 7, ControlRecordType.COMMIT),
            batch(12, 1),
        ],
    )
    broker.aborted = [broker_pb2.AbortedTransaction(producer_id=8, first_offset=4)]
    committed = [0, 1, 2, 6, 7, 8, 12]
    with reader_for(
        broker, max_partition_fetch_bytes=200, isolation_level="read_committed"
    ) as reader:
        for start in (0, 4, 5, 9):
            got = offsets_of(list(reader.read_range(TP, start, 13, timeout_ms=5000)))
            assert got == [o for o in committed if o >= start], start
    assert set(broker.isolation_levels) == {broker_pb2.READ_COMMITTED}
    with reader_for(broker) as uncommitted:  # the default: everything but the markers
        got = offsets_of(list(uncommitted.read_range(TP, 0, 13, timeout_ms=5000)))
    assert got == [0, 1, 2, 4, 5, 6, 7, 8, 9, 12]
    assert broker.isolation_levels[-1] == broker_pb2.READ_UNCOMMITTED


def test_an_unknown_isolation_level_is_refused(broker: FaultyBroker) -> None:
    with pytest.raises(ValueError, match="isolation_level"):
        reader_for(broker, isolation_level="serializable")


def test_reads_exactly_the_range_when_batches_straddle_both_bounds(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 6, 10)
    chunks = list(reader.read_range(TP, 7, 43))
    assert len(chunks) > 1  # several fetches
    assert offsets_of(chunks) == list(range(7, 43))
    got = [rec for c in chunks for rec in c.all_records()]
    assert [r.value for r in got] == [f"v{o}".encode() for o in range(7, 43)]
    assert [r.key for r in got] == [f"k{o}".encode() for o in range(7, 43)]
    assert got[-1].timestamp_ms == 1042
    assert {c.tp for c in chunks} == {TP}
    assert chunks[-1].next_offset == 43
    assert all(
        b.timestamp_type == records.TimestampType.CREATE_TIME for c in chunks for b in c.batches
    )


def test_a_range_of_a_whole_log_in_one_fetch(broker: FaultyBroker) -> None:
    store_batches(broker, 3, 5)
    with reader_for(broker) as r:
        chunks = list(r.read_range(("t", 0), 0, 15))
    assert len(chunks) == 1 and chunks[0].record_count == 15
    assert offsets_of(chunks) == list(range(15))


def test_an_empty_range_sends_no_fetch(broker: FaultyBroker, reader: RangeReader) -> None:
    store_batches(broker, 1, 5)
    assert list(reader.read_range(TP, 3, 3)) == []
    assert broker.fetched == []


def test_a_backwards_range_is_refused(reader: RangeReader) -> None:
    with pytest.raises(ValueError, match="start <= end"):
        reader.read_range(TP, 5, 3)


def test_control_batches_are_stepped_over(broker: FaultyBroker, reader: RangeReader) -> None:
    store(broker, [batch(0, 3), control_batch(3), batch(4, 3)])
    assert offsets_of(list(reader.read_range(TP, 0, 7))) == [0, 1, 2, 4, 5, 6]


def test_a_compacted_gap_is_stepped_over(broker: FaultyBroker, reader: RangeReader) -> None:
    store(broker, [batch(0, 3), batch(10, 3)])  # offsets 3..9 compacted away
    assert offsets_of(list(reader.read_range(TP, 1, 12))) == [1, 2, 10, 11]


def test_the_next_fetch_goes_out_before_a_chunk_is_handed_out(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 6, 10)
    chunks = reader.read_range(TP, 0, 60)
    first = next(chunks)
    # The first answer ended at first.next_offset; its successor was already sent
    # (the chunks iterator is not advanced while the broker receives it).
    for _ in range(100):
        if len(broker.fetched) >= 2:
            break
        time.sleep(0.02)
    assert [p.fetch_offset for p in broker.fetched] == [0, first.next_offset]
    rest = list(chunks)
    assert offsets_of([first, *rest]) == list(range(60))


def test_every_fetch_carries_the_leader_epoch_and_the_fetch_sizes(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 2, 5)
    list(reader.read_range(TP, 0, 10))
    assert broker.fetched
    assert {p.current_leader_epoch for p in broker.fetched} == {0}  # the fake's metadata says 0
    assert {p.partition_max_bytes for p in broker.fetched} == {200}


@pytest.mark.parametrize(
    "code", [CODE.NOT_LEADER_OR_FOLLOWER, CODE.FENCED_LEADER_EPOCH, CODE.UNKNOWN_LEADER_EPOCH]
)
def test_leader_changes_are_retried(
    broker: FaultyBroker, reader: RangeReader, code: errors.ErrorCode
) -> None:
    store_batches(broker, 2, 5)
    broker.fetch_errors = [0, code, code]  # the second and third fetches fail
    assert offsets_of(list(reader.read_range(TP, 0, 10))) == list(range(10))
    assert [p.fetch_offset for p in broker.fetched][1:4] == [5, 5, 5]


def test_a_lost_connection_is_retried(broker: FaultyBroker, reader: RangeReader) -> None:
    store_batches(broker, 2, 5)
    broker.lost_fetches = 2
    assert offsets_of(list(reader.read_range(TP, 0, 10))) == list(range(10))


def test_a_non_retriable_error_is_raised(broker: FaultyBroker, reader: RangeReader) -> None:
    store_batches(broker, 2, 5)
    broker.fetch_errors = [CODE.CORRUPT_MESSAGE]
    with pytest.raises(errors.CorruptRecordError):
        list(reader.read_range(TP, 0, 10))


def test_retriable_errors_fail_the_read_once_it_stops_moving(broker: FaultyBroker) -> None:
    store_batches(broker, 2, 5)
    broker.fetch_errors = [CODE.NOT_LEADER_OR_FOLLOWER] * 100
    with reader_for(broker, ticking=True) as r, pytest.raises(errors.NotLeaderOrFollowerError):
        list(r.read_range(TP, 0, 10, timeout_ms=5000))
    assert len(broker.fetched) < 10


def test_deleted_offsets_are_reported_and_skipped(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 6, 10)
    broker.log_start = 20  # retention deleted [0, 20)
    gaps: list[MissingOffsets] = []
    chunks = list(reader.read_range(TP, 5, 35, on_missing=gaps.append))
    assert gaps == [MissingOffsets(TP, 5, 20, "were deleted before they were read")]
    assert offsets_of(chunks) == list(range(20, 35))
    assert "offsets [5, 20) of t-0 were deleted" in gaps[0].message


def test_the_log_start_is_asked_for_when_the_answer_lacks_it(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 6, 10)
    broker.log_start, broker.answer_log_start = 20, False
    gaps: list[MissingOffsets] = []
    chunks = list(reader.read_range(TP, 5, 35, on_missing=gaps.append))
    assert [(g.start, g.end) for g in gaps] == [(5, 20)]
    assert offsets_of(chunks) == list(range(20, 35))


def test_a_range_entirely_deleted_ends_without_a_fetch_past_it(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 6, 10)
    broker.log_start = 50
    gaps: list[MissingOffsets] = []
    assert list(reader.read_range(TP, 5, 35, on_missing=gaps.append)) == []
    assert [(g.start, g.end) for g in gaps] == [(5, 35)]
    assert [p.fetch_offset for p in broker.fetched] == [5]


def test_missing_offsets_fail_the_read_by_default(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 2, 5)
    broker.log_start = 5
    with pytest.raises(errors.OffsetOutOfRangeError, match=r"\[0, 5\) of t-0 were deleted"):
        list(reader.read_range(TP, 0, 10))


def test_a_position_past_the_log_end_loses_the_rest(
    broker: FaultyBroker, reader: RangeReader
) -> None:
    store_batches(broker, 1, 5)
    gaps: list[MissingOffsets] = []
    assert list(reader.read_range(TP, 8, 12, on_missing=gaps.append)) == []  # the fake: 8 > 5
    assert [(g.start, g.end) for g in gaps] == [(8, 12)]
    assert "reset or recreated" in gaps[0].reason


def test_records_that_never_come_are_reported_after_the_timeout(broker: FaultyBroker) -> None:
    store_batches(broker, 1, 5)
    gaps: list[MissingOffsets] = []
    with reader_for(broker, ticking=True, fetch_max_wait_ms=0) as r:
        chunks = list(r.read_range(TP, 2, 9, timeout_ms=5000, on_missing=gaps.append))
    assert offsets_of(chunks) == [2, 3, 4]
    assert [(g.start, g.end) for g in gaps] == [(5, 9)]
    assert "no record at offset 5" in gaps[0].reason


# -- the pure parts ----------------------------------------------------------------------


def batches_of(*raws: bytes) -> list[records.Batch]:
    return list(records.read_batches(b"".join(raws)))


def test_decode_range_filters_only_the_straddling_batches() -> None:
    got = decode_range(
        batches_of(batch(0, 5), batch(5, 5, compression="gzip"), batch(10, 5)), start=3, end=12
    )
    assert [[r.offset for r in b.records] for b in got] == [[3, 4], [5, 6, 7, 8, 9], [10, 11]]


def test_decode_range_skips_control_batches_and_batches_outside() -> None:
    got = decode_range(
        batches_of(batch(0, 2), control_batch(2), batch(3, 2), batch(5, 2)), start=2, end=5
    )
    assert [[r.offset for r in b.records] for b in got] == [[3, 4]]


def progress(start: int = 0, end: int = 10, *, timeout_ms: float = 1000) -> RangeProgress:
    retry = RetryPolicy(retry_backoff_ms=100, retry_backoff_max_ms=400, jitter=0.0)
    return RangeProgress(TP, start=start, end=end, timeout_ms=timeout_ms, retry=retry, now_ms=0)


def test_progress_moves_forward_only_and_stops_at_the_end() -> None:
    p = progress()
    p.advance(4, now_ms=10)
    assert (p.position, p.done, p.last_progress_ms) == (4, False, 10)
    with pytest.raises(ValueError, match="forward"):
        p.advance(4, now_ms=20)
    p.advance(15, now_ms=30)  # a batch running past the end
    assert (p.position, p.done) == (10, True)


def test_progress_needs_a_batch_past_the_position() -> None:
    p = progress(start=5)
    with pytest.raises(errors.HeadwaterError) as info:
        p.next_offset(batches_of(batch(0, 5)))
    assert info.value.retriable
    assert p.next_offset(batches_of(batch(0, 5), batch(5, 3))) == 8


def test_progress_retries_with_backoff_until_the_timeout() -> None:
    p = progress(timeout_ms=1000)
    error = errors.NotLeaderOrFollowerError("moved")
    assert p.retry_wait_ms(error, now_ms=0) == 100
    assert p.retry_wait_ms(error, now_ms=100) == 200
    assert p.retry_wait_ms(error, now_ms=300) == 400
    assert p.retry_wait_ms(error, now_ms=700) is None  # 700 + 400 is past the deadline
    p.advance(3, now_ms=800)  # progress: the count and the deadline start over
    assert p.retry_wait_ms(error, now_ms=800) == 100


def test_progress_gives_up_at_once_on_a_non_retriable_error() -> None:
    assert progress().retry_wait_ms(errors.CorruptRecordError("bad"), now_ms=0) is None


def test_progress_skips_deleted_offsets_and_ends_at_a_reset_log() -> None:
    p = progress(start=2)
    assert p.out_of_range(log_start=6, now_ms=5) == MissingOffsets(
        TP, 2, 6, "were deleted before they were read"
    )
    assert (p.position, p.done) == (6, False)
    gap = p.out_of_range(log_start=0, now_ms=6)
    assert (gap.start, gap.end, p.done) == (6, 10, True)
    q = progress(start=2)
    assert q.out_of_range(log_start=50, now_ms=0).end == 10  # capped at the range's end


def test_progress_give_up_reports_the_rest() -> None:
    p = progress(start=4)
    gap = p.give_up()
    assert (gap.start, gap.end, p.done) == (4, 10, True)
