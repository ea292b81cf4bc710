"""Each producer setting's effect against real brokers: acks 0/1/all, keyed placement
(Kafka's murmur2), linger_ms and batch_size batching seen in the stored batches, every
compression codec round-tripping through the broker, idempotent sequence numbers in
the headers, and buffer_memory/max_block_ms blocking then failing ``send``."""

from __future__ import annotations

import time

import headwater
import pytest
from headwater import errors
from headwater.client.producer.accumulator import BufferExhaustedError
from headwater.client.producer.partitioner import partition_for_key
from headwater.records import BatchHeader, Compression
from headwater.testing import Cluster

from tests.e2e.client.conftest import TopicFactory
from tests.e2e.client.raw import batch_headers

pytestmark = pytest.mark.e2e
TP = headwater.TopicPartition


def poll_n(c: headwater.Consumer, n: int, rounds: int = 150) -> list[headwater.ConsumerRecord]:
    got: list[headwater.ConsumerRecord] = []
    for _ in range(rounds):
        got += c.poll(200)
        if len(got) >= n:
            break
    return got


def read_all(
    bootstrap: str, topic: str, n: int, partition: int = 0
) -> list[headwater.ConsumerRecord]:
    with headwater.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(topic, partition)])
        return poll_n(c, n)


@pytest.mark.parametrize("acks", ["all", 1, 0])
def test_acks_settings(cluster: Cluster, topic: TopicFactory, acks: str | int) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, acks=acks) as p:
        futs = [p.send(name, str(i).encode()) for i in range(100)]
        p.flush(30)
    offsets = [f.result(0).offset for f in futs]
    # acks=0 gets no answer, so no offsets (Kafka reports -1 as well).
    assert offsets == (list(range(100)) if acks != 0 else [-1] * 100)
    assert [r.value for r in read_all(cluster.bootstrap, name, 100)] == [
        str(i).encode() for i in range(100)
    ]


def test_keys_land_where_kafka_puts_them(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic(partitions=6)
    with headwater.Producer(cluster.bootstrap) as p:
        for k in (b"a", b"customer-1", b"zzz"):
            assert p.send(name, b"v", key=k).result(30).partition == partition_for_key(k, 6)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_round_trip(cluster: Cluster, topic: TopicFactory, codec: str) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, compression_type=codec, linger_ms=50) as p:
        for i in range(200):
            p.send(name, b"payload " * 20, key=str(i).encode(), headers={"i": str(i).encode()})
    got = read_all(cluster.bootstrap, name, 200)
    assert [r.key for r in got] == [str(i).encode() for i in range(200)]
    assert all(r.value == b"payload " * 20 for r in got)
    assert got[7].headers == (("i", b"7"),)
    stored = batch_headers(cluster, name)
    assert {h.compression for h in stored} == {Compression.parse(codec)}
    assert sum(h.batch_length for h in stored) < 200 * 160 / 2  # really compressed


def test_linger_ms_gathers_records_into_one_batch(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, linger_ms=1000, batch_size=1 << 20) as p:
        futs = [p.send(name, b"x" * 100) for _ in range(50)]
        assert [f.result(30).offset for f in futs] == list(range(50))
    headers = batch_headers(cluster, name)
    assert [h.records_count for h in headers] == [50]


def test_batch_size_bounds_each_batch(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, linger_ms=1000, batch_size=300) as p:
        futs = [p.send(name, b"x" * 100) for _ in range(50)]
        assert [f.result(30).offset for f in futs] == list(range(50))
    headers = batch_headers(cluster, name)
    assert sum(h.records_count for h in headers) == 50
    assert len(headers) >= 20 and max(h.records_count for h in headers) <= 3


def test_linger_zero_and_waiting_sends_one_batch_per_record(
    cluster: Cluster, topic: TopicFactory
) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, linger_ms=0) as p:
        for i in range(10):
            assert p.send(name, b"r").result(30).offset == i
    assert [h.records_count for h in batch_headers(cluster, name)] == [1] * 10


def test_idempotent_batches_carry_contiguous_sequences(
    cluster: Cluster, topic: TopicFactory
) -> None:
    name = topic()
    with headwater.Producer(cluster.bootstrap, linger_ms=0, batch_size=250) as p:
        for _ in range(30):
            p.send(name, b"y" * 60)
        p.flush(30)
    headers = batch_headers(cluster, name)
    assert len({(h.producer_id, h.producer_epoch) for h in headers}) == 1
    assert headers[0].producer_id >= 0
    expected = 0
    for h in headers:
        assert h.base_sequence == expected
        expected += h.records_count
    with headwater.Producer(cluster.bootstrap, acks=1) as p:
        offset = p.send(name, b"numbered").result(30).offset
    # acks=1 with idempotence left unset: numbered too, so batches can pipeline in order.
    last = header_at(cluster, name, offset)
    assert last.producer_id >= 0 and last.base_sequence == 0
    with headwater.Producer(cluster.bootstrap, acks=1, enable_idempotence=False) as p:
        offset = p.send(name, b"plain").result(30).offset
    assert header_at(cluster, name, offset).producer_id == -1  # explicitly not numbered


def header_at(cluster: Cluster, name: str, offset: int) -> BatchHeader:
    """The header of the batch at ``offset``, once the high watermark passed it: acks=1
    answers before the followers copied the record, and batch_headers reads below the
    high watermark only (reading at once failed under load)."""
    for _ in range(200):  # bounded: 200 x 50 ms
        headers = batch_headers(cluster, name)
        if headers and headers[-1].base_offset >= offset:
            return next(h for h in headers if h.base_offset == offset)
        time.sleep(0.05)
    raise AssertionError(f"the batch at offset {offset} never went below the high watermark")


def test_full_buffer_blocks_send_for_max_block_ms(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    with headwater.Producer(
        cluster.bootstrap,
        linger_ms=60_000,
        batch_size=1 << 20,
        buffer_memory=5000,
        max_block_ms=200,
    ) as p:
        held = [p.send(name, b"z" * 1000) for _ in range(4)]
        refused = p.send(name, b"z" * 1000)
        assert isinstance(refused.exception(5), BufferExhaustedError)
        assert not any(f.done() for f in held)  # still lingering, still holding the memory
        p.flush(30)
        assert [f.result(0).offset for f in held] == [0, 1, 2, 3]
        again = p.send(name, b"z" * 1000)  # the acknowledged batch released its memory
        p.flush(30)
        assert again.result(0).offset == 4
        too_big = p.send(name, b"z" * 6000)
        assert isinstance(too_big.exception(5), errors.RecordListTooLargeError)
