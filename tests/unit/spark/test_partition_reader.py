"""The executor's range reader against the client's in-process fake broker (real gRPC).

Covers the Arrow batches of exactly-[start, end) reads when stored batches
straddle both bounds, several fetches per range, compressed batches, a
range the log cannot satisfy (failOnDataLoss true and false), and a mixed stream with
transactions read as the records path reads it, with the C and the pure-Python columns
builder.  The reading
itself is the client's :class:`~headwater.client.consumer.range_reader.RangeReader`
(tests/unit/client/test_range_reader.py); time is faked: the client's clock
and sleep are passed in.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Iterator

import pyarrow as pa
import pytest
from headwater import records
from headwater.client.consumer.range_reader import RangeReader
from headwater.client.types import TopicPartition
from headwater.records import columns
from headwater.records.control import ControlRecordType
from headwater.v1 import broker_pb2
from headwater_spark import arrow, partition_reader
from headwater_spark.driver import ClusterView
from headwater_spark.options import client_ids
from headwater_spark.partition_reader import ReaderSettings
from headwater_spark.planning import DataLossError, OffsetRange

from tests.unit.client.fake_broker import FakeBroker
from tests.unit.client.test_decode_paths_agree import mixed_stream
from tests.unit.client.test_range_reader import FaultyBroker, marker, txn_batch
from tests.unit.client.test_range_reader import store as store_raw


@pytest.fixture
def broker() -> Iterator[FakeBroker]:
    b = FakeBroker()
    yield b
    partition_reader.close_clients()
    b.stop()


def store(broker: FakeBroker, topic: str, batches: int, per_batch: int) -> None:
    """``batches`` stored batches of ``per_batch`` records; every other one gzip'd."""
    broker.create(topic, 1)
    part = broker.topics[topic][0]
    for i in range(batches):
        base = part.next_offset
        recs = [
            records.Record(
                f"k{base + j}".encode(),
                f"v{base + j}".encode(),
                (("n", str(base + j).encode()),),
                1000 + base + j,
            )
            for j in range(per_batch)
        ]
        codec = "gzip" if i % 2 else "none"
        part.batches.append(records.build_batch(recs, base_offset=base, compression=codec))
        part.timestamps.append((1000 + base + per_batch - 1, base))
        part.next_offset = base + per_batch


def read(
    broker: FakeBroker, r: OffsetRange, *, fail_on_data_loss: bool = True, **kw: int
) -> list[pa.RecordBatch]:
    ticks = itertools.count(0, 1000)
    settings = ReaderSettings(
        bootstrap_servers=broker.bootstrap,
        fail_on_data_loss=fail_on_data_loss,
        include_headers=True,
        poll_timeout_ms=kw.get("poll_timeout_ms", 120000),
        max_partition_fetch_bytes=kw.get("max_partition_fetch_bytes", 4 << 20),
    )
    client = RangeReader(
        broker.bootstrap,
        max_partition_fetch_bytes=settings.max_partition_fetch_bytes,
        clock=lambda: float(next(ticks)),
        sleep=lambda _s: None,
    )
    with client:
        return list(partition_reader.read_range(r, settings, client=client))


def test_reads_exactly_the_range_when_batches_straddle_both_bounds(broker: FakeBroker) -> None:
    store(broker, "t", batches=6, per_batch=10)
    # Small fetches: one or two batches per answer, so the range takes several fetches.
    got = read(broker, OffsetRange("t", 0, 7, 43), max_partition_fetch_bytes=200)
    assert len(got) > 1
    rows = [row for b in got for row in b.to_pylist()]
    assert [row["offset"] for row in rows] == list(range(7, 43))
    assert [row["value"] for row in rows] == [f"v{o}".encode() for o in range(7, 43)]
    assert [row["key"] for row in rows] == [f"k{o}".encode() for o in range(7, 43)]
    assert rows[0]["headers"] == [{"key": "n", "value": b"7"}]
    assert {row["topic"] for row in rows} == {"t"}
    assert rows[-1]["timestamp"].timestamp() * 1000 == pytest.approx(1042)


def test_an_empty_range_reads_nothing(broker: FakeBroker) -> None:
    store(broker, "t", batches=1, per_batch=5)
    assert read(broker, OffsetRange("t", 0, 3, 3)) == []


def test_a_range_past_the_log_is_data_loss(broker: FakeBroker) -> None:
    store(broker, "t", batches=1, per_batch=5)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        read(broker, OffsetRange("t", 0, 2, 9), poll_timeout_ms=1500)


def test_a_range_past_the_log_is_cut_short_without_fail_on_data_loss(
    broker: FakeBroker,
) -> None:
    store(broker, "t", batches=1, per_batch=5)
    got = read(broker, OffsetRange("t", 0, 2, 9), fail_on_data_loss=False, poll_timeout_ms=1500)
    assert [row["offset"] for b in got for row in b.to_pylist()] == [2, 3, 4]


@pytest.mark.parametrize("builder", ["c", "python"])
@pytest.mark.parametrize("read_committed", [False, True])
def test_a_mixed_stream_reads_as_the_decoded_records_do(
    builder: str, read_committed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every codec, headers, null keys and values, a committed transaction and its marker,
    LogAppendTime, then an aborted transaction: the Arrow batches built straight from the
    fetched batches hold what the records path (RangeReader.read_range, then
    ``to_record_batch``) makes of them, column by column, under either isolation level."""
    if builder == "c" and not columns.native_columns_available():
        pytest.skip("native columns builder not built")
    if builder == "python":
        monkeypatch.setenv("HEADWATER_PURE_PYTHON_RECORDS", "1")
    b = FaultyBroker()
    try:
        stored = [x.raw() for x in records.read_batches(mixed_stream())]  # not the cut one
        stored += [
            txn_batch(216, 3, 8),
            marker(219, 8, ControlRecordType.ABORT),
            records.build_batch([records.Record(b"k", b"v")] * 2, base_offset=220),
        ]
        store_raw(b, stored)
        b.aborted = [broker_pb2.AbortedTransaction(producer_id=8, first_offset=216)]
        settings = ReaderSettings(
            bootstrap_servers=b.bootstrap,
            include_headers=True,
            read_committed=read_committed,
            poll_timeout_ms=5000,
        )
        isolation = "read_committed" if read_committed else "read_uncommitted"
        for start in (0, 17, 203):
            r = OffsetRange("t", 0, start, 222)
            with RangeReader(
                b.bootstrap, isolation_level=isolation, max_partition_fetch_bytes=30000
            ) as c:
                got = pa.Table.from_batches(partition_reader.read_range(r, settings, client=c))
            with RangeReader(
                b.bootstrap, isolation_level=isolation, max_partition_fetch_bytes=30000
            ) as c:
                want = pa.Table.from_batches(
                    [
                        arrow.to_record_batch(
                            "t",
                            0,
                            [(d.records, d.timestamp_type) for d in chunk.batches],
                            include_headers=True,
                        )
                        for chunk in c.read_range(("t", 0), start, 222, timeout_ms=5000)
                    ]
                )
            assert got.schema.equals(want.schema)
            for name in want.column_names:
                assert got.column(name).to_pylist() == want.column(name).to_pylist(), name
                assert got.column(name).null_count == want.column(name).null_count, name
            offsets = got.column("offset").to_pylist()
            assert 205 not in offsets and 219 not in offsets  # markers
            aborted = {216, 217, 218}
            assert aborted.isdisjoint(offsets) if read_committed else aborted <= set(offsets)
            assert offsets[0] == start and offsets[-1] == 221
    finally:
        partition_reader.close_clients()
        b.stop()


def test_the_worker_heap_is_frozen_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(partition_reader, "_heap_frozen", False)
    gc.unfreeze()
    try:
        partition_reader.freeze_worker_heap()
        frozen = gc.get_freeze_count()
        assert frozen > 0
        gc.unfreeze()
        partition_reader.freeze_worker_heap()  # a later task leaves the heap alone
        assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


def test_a_reads_driver_and_executors_send_its_client_ids(broker: FakeBroker) -> None:
    """Named as Spark's Kafka source names a read's consumers, one id per read."""
    ids = client_ids(streaming=True, nonce="q1")
    assert ids == ("headwater-spark-source-q1-driver", "headwater-spark-source-q1-executor")
    batch = client_ids(streaming=False)
    assert batch.driver.startswith("headwater-spark-relation-")
    assert batch.executor != client_ids(streaming=False).executor
    store(broker, "t", batches=1, per_batch=5)
    settings = ReaderSettings(bootstrap_servers=broker.bootstrap, client_id=ids.executor)
    got = list(partition_reader.read_range(OffsetRange("t", 0, 0, 5), settings))
    assert sum(b.num_rows for b in got) == 5
    view = ClusterView(broker.bootstrap, client_id=ids.driver)
    try:
        assert view.lookup({TopicPartition("t", 0): -1}) == {TopicPartition("t", 0): 5}
    finally:
        view.close()
    sent = {(method, client_id) for method, client_id in broker.client_ids}
    assert ("Fetch", ids.executor) in sent and ("ListOffsets", ids.driver) in sent
    assert {client_id for _method, client_id in sent} == {ids.driver, ids.executor}
