"""The fetcher with isolation_level=read_committed: it asks for READ_COMMITTED, drops the
batches of the aborted transactions the answer names and every control batch, and still
moves the position past them."""

from __future__ import annotations

from typing import Any

from headwater import records
from headwater.client.consumer.fetcher import Fetcher, _Answer
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.transport import connection
from headwater.client.types import TopicPartition
from headwater.records.control import ControlRecordType, build_control_batch, set_batch_flags
from headwater.v1 import broker_pb2

TP = TopicPartition("t", 0)


def txn(base: int, pid: int, *values: bytes) -> bytes:
    batch = records.build_batch(
        [records.Record(None, v, (), 1000) for v in values],
        base_offset=base,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
    )
    return set_batch_flags(batch, transactional=True)


def marker(base: int, pid: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(
        kind, producer_id=pid, producer_epoch=1, coordinator_epoch=0, timestamp_ms=1000,
        base_offset=base,
    )  # fmt: skip


def fetcher(level: str) -> tuple[Fetcher, SubscriptionState]:
    subs = SubscriptionState(default_reset="earliest")
    subs.assign([TP])
    subs.seek(TP, 0)
    metadata: Any = None
    f = Fetcher(
        settings=ConsumerSettings(bootstrap_servers=("127.0.0.1:1",), isolation_level=level),
        subscriptions=subs,
        metadata=metadata,
        channels=connection.Channels(),
    )
    return f, subs


def test_aborted_batches_and_markers_are_dropped_and_passed() -> None:
    f, subs = fetcher("read_committed")
    data = (
        txn(0, 1, b"aborted-1", b"aborted-2")  # producer 1: aborted at 4
        + txn(2, 2, b"committed")  # producer 2: committed at 3
        + marker(3, 2, ControlRecordType.COMMIT)
        + marker(4, 1, ControlRecordType.ABORT)
        + records.build_batch([records.Record(None, b"plain", (), 1000)], base_offset=5)
    )
    response = broker_pb2.FetchResponse(
        partitions=[
            broker_pb2.FetchedPartition(
                topic=TP.topic,
                partition=TP.partition,
                high_watermark=6,
                last_stable_offset=6,
                records=data,
                aborted_transactions=[broker_pb2.AbortedTransaction(producer_id=1, first_offset=0)],
            )
        ]
    )
    f._handle(_Answer("a", {TP: (0, subs.epoch(TP))}, response, None))
    f._decode_pending()
    got = f.take(100, paused=lambda tp: False)
    assert [r.value for r in got] == [b"committed", b"plain"]
    assert subs.position(TP) == 6  # past the markers and the aborted batch


def test_read_uncommitted_returns_aborted_records_but_never_markers() -> None:
    f, subs = fetcher("read_uncommitted")
    data = txn(0, 1, b"aborted") + marker(1, 1, ControlRecordType.ABORT)
    response = broker_pb2.FetchResponse(
        partitions=[
            broker_pb2.FetchedPartition(
                topic=TP.topic, partition=TP.partition, high_watermark=2, records=data
            )
        ]
    )
    f._handle(_Answer("a", {TP: (0, subs.epoch(TP))}, response, None))
    f._decode_pending()
    assert [r.value for r in f.take(100, paused=lambda tp: False)] == [b"aborted"]
    assert subs.position(TP) == 2
