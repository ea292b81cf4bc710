"""Every record of a mixed fetch answer reads the same through the native decoder and the
pure-Python one, field by field: headers (null values, non-ASCII keys), null and empty
keys and values, each compression codec, a transaction's batches and its control batch
(skipped), LogAppendTime, a first batch cut by the fetch offset and a trailing partial
batch.  The answer goes the consumer's whole way: gRPC bytes through the client's
deserializer (``fetch_response.parse``, compared with the generated ``FromString``),
the fetcher's check, decode and ``take``; the broker's hand-encoded answer
(``fetch_answer``) reads the same as the generated class's."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import pytest
from headwater import records
from headwater.client.consumer import fetcher as fetcher_mod
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.transport import fetch_response
from headwater.client.types import ConsumerRecord, TopicPartition
from headwater.records import NativeRecordCodec, PythonRecordCodec, RecordCodec
from headwater.records.control import ControlRecordType, build_control_batch, set_batch_flags
from headwater.records.header import set_log_append_time
from headwater.server.services.fetch_answer import EncodedPartition, encode_fetch_response
from headwater.v1 import broker_pb2

TP = TopicPartition("mixed-é", 3)
native = pytest.mark.skipif(not records.native_available(), reason="native record codec not built")


def mixed_records(n: int, seed: int) -> list[records.Record]:
    out = []
    for i in range(n):
        j = seed + i
        key = None if j % 3 == 0 else (b"" if j % 7 == 0 else f"k{j}".encode())
        value = None if j % 5 == 0 else (b"" if j % 11 == 0 else os.urandom(j % 1500))
        headers: tuple[records.Header, ...] = ()
        if j % 2:
            headers = (("trace-ü", os.urandom(j % 40)), ("null", None), ("", b""))[: 1 + j % 3]
        out.append(records.Record(key, value, headers, 1_700_000_000_000 + j * (j % 4)))
    return out


def mixed_stream() -> bytes:
    """Batches at offsets 0.. of every kind; the last one cut short."""
    parts: list[bytes] = []
    offset = 0

    def add(batch: bytes, count: int) -> None:
        nonlocal offset
        buf = bytearray(batch)
        records.set_base_offset(buf, 0, offset)
        parts.append(bytes(buf))
        offset += count

    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        add(records.build_batch(mixed_records(40, offset), compression=codec), 40)
    txn = records.build_batch(mixed_records(5, offset), producer_id=9, producer_epoch=1)
    add(set_batch_flags(txn, transactional=True), 5)
    add(
        build_control_batch(
            ControlRecordType.COMMIT,
            producer_id=9,
            producer_epoch=1,
            coordinator_epoch=0,
            timestamp_ms=1_700_000_000_000,
        ),
        1,
    )
    log_append = bytearray(records.build_batch(mixed_records(7, offset), compression="zstd"))
    set_log_append_time(log_append, 0, 1_800_000_000_000)
    add(bytes(log_append), 7)
    add(records.build_batch([records.Record(None, None, (), 5)] * 3), 3)
    cut = records.build_batch(mixed_records(4, offset))
    return b"".join(parts) + cut[: len(cut) - 5]


def answer_bytes(data: bytes) -> bytes:
    return broker_pb2.FetchResponse(
        partitions=[
            broker_pb2.FetchedPartition(
                topic=TP.topic, partition=TP.partition, high_watermark=10**6, records=data
            )
        ]
    ).SerializeToString()


@contextlib.contextmanager
def using(codec: RecordCodec) -> Iterator[None]:
    previous = records.record_codec()
    records.set_record_codec(codec)
    try:
        yield
    finally:
        records.set_record_codec(previous)


class _Metadata:
    def maybe_refresh(self) -> None:
        pass

    def request_update(self) -> None:
        pass


class _Channels:
    def inline_caller(self, method: str) -> None:
        return None


def through_fetcher(raw: bytes, fetch_offset: int, deserialize: Any) -> list[ConsumerRecord]:
    """One answer as the fetcher handles it and ``poll`` takes it, 50 records at a time."""
    subs = SubscriptionState(default_reset="earliest")
    subs.assign([TP])
    subs.seek(TP, fetch_offset)
    f = fetcher_mod.Fetcher(
        settings=ConsumerSettings(bootstrap_servers=("127.0.0.1:1",)),
        subscriptions=subs,
        metadata=_Metadata(),  # type: ignore[arg-type]
        channels=_Channels(),  # type: ignore[arg-type]
        allow_inline=False,
    )
    sent = {TP: (fetch_offset, subs.epoch(TP) or 0)}
    f._handle(fetcher_mod._Answer("a", sent, deserialize(raw), None))
    f._decode_pending()
    out: list[ConsumerRecord] = []
    while chunk := f.take(50, paused=subs.is_paused):
        out += chunk
    return out


def assert_same_records(got: list[ConsumerRecord], want: list[ConsumerRecord]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert type(g) is ConsumerRecord
        for name in ConsumerRecord._fields:
            assert getattr(g, name) == getattr(w, name), (w.offset, name)
        assert type(g.key) is type(w.key) and type(g.value) is type(w.value)
        assert all(type(h) is tuple and len(h) == 2 for h in g.headers)


@native
@pytest.mark.parametrize("fetch_offset", [0, 17, 202])
def test_native_and_python_decoders_agree_on_a_mixed_answer(fetch_offset: int) -> None:
    raw = answer_bytes(mixed_stream())
    with using(PythonRecordCodec()):
        want = through_fetcher(raw, fetch_offset, broker_pb2.FetchResponse.FromString)
    with using(NativeRecordCodec()):
        got = through_fetcher(raw, fetch_offset, fetch_response.parse)
        via_generated = through_fetcher(raw, fetch_offset, broker_pb2.FetchResponse.FromString)
    assert want, "the stream has records past the fetch offset"
    assert_same_records(got, want)
    assert_same_records(via_generated, want)
    offsets = [r.offset for r in want]
    assert offsets == sorted(offsets) and offsets[0] == fetch_offset
    assert 205 not in offsets  # the control batch's record
    assert {r.timestamp_ms for r in want if 206 <= r.offset < 213} == {1_800_000_000_000}
    assert any(r.key is None for r in want) and any(r.value is None for r in want)
    assert any(r.value == b"" for r in want) and any(r.key == b"" for r in want)
    assert any(("null", None) in r.headers for r in want)


def test_python_decoder_reads_the_mixed_answer() -> None:
    """The pure-Python path alone (what ``HEADWATER_PURE_PYTHON_RECORDS=1`` runs)."""
    raw = answer_bytes(mixed_stream())
    with using(PythonRecordCodec()):
        got = through_fetcher(raw, 0, fetch_response.parse)
    assert [r.offset for r in got] == [*range(205), *range(206, 216)]


def encoded_answer_bytes(data: bytes) -> bytes:
    """The broker's hand-encoded answer (``fetch_answer``) of the same partition."""
    return encode_fetch_response(
        [],
        [
            EncodedPartition(
                head=broker_pb2.FetchedPartition(
                    topic=TP.topic, partition=TP.partition, high_watermark=10**6
                ),
                records=data,
            )
        ],
    )


@pytest.mark.parametrize("codec", ["python", "native"])
def test_the_brokers_encoded_answer_reads_as_the_generated_one(codec: str) -> None:
    if codec == "native" and not records.native_available():
        pytest.skip("native record codec not built")
    data = mixed_stream()
    raw, encoded = answer_bytes(data), encoded_answer_bytes(data)
    assert encoded == raw
    chosen = NativeRecordCodec() if codec == "native" else PythonRecordCodec()
    with using(chosen):
        want = through_fetcher(raw, 17, broker_pb2.FetchResponse.FromString)
        for deserialize in (fetch_response.parse, broker_pb2.FetchResponse.FromString):
            assert_same_records(through_fetcher(encoded, 17, deserialize), want)
    assert [r.offset for r in want] == [*range(17, 205), *range(206, 216)]
