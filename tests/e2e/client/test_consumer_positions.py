"""The consumer against real brokers: seek, rewind and re-consumption,
seek_to_beginning/end, offsets_for_times, beginning/end offsets, auto_offset_reset
each way ("none" raising), the long-poll fetch answering as soon as data arrives,
and out-of-range positions after retention deleted the segments they pointed into."""

from __future__ import annotations

import threading
import time

import headwater
import pytest
from headwater import errors
from headwater.testing import Cluster

from tests.e2e.client.conftest import TopicFactory

pytestmark = pytest.mark.e2e
TP = headwater.TopicPartition


def poll_n(c: headwater.Consumer, n: int, rounds: int = 150) -> list[headwater.ConsumerRecord]:
    got: list[headwater.ConsumerRecord] = []
    for _ in range(rounds):
        got += c.poll(200)
        if len(got) >= n:
            break
    return got


def consumer(cluster: Cluster, reset: str = "earliest", **kw: int) -> headwater.Consumer:
    return headwater.Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset=reset, **kw)


def fill(cluster: Cluster, name: str, n: int, *, ts0: int | None = None) -> None:
    """``n`` records a second apart, from ``ts0`` (default: recent).

    Records older than ``retention.ms`` (7 days) go as soon as a later record rolls their
    segment (``segment.ms`` counts from the first batch's timestamp) and the next
    retention pass runs, every 300 ms on this cluster: only a test that writes nothing
    after them may use such timestamps.
    """
    if ts0 is None:
        ts0 = time.time_ns() // 1_000_000 - n * 1000
    with headwater.Producer(cluster.bootstrap, linger_ms=0) as p:
        for i in range(n):
            p.send(name, str(i).encode(), timestamp_ms=ts0 + i * 1000)
        p.flush(30)


def test_seek_rewind_and_reconsume(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    fill(cluster, name, 10)
    tp = TP(name, 0)
    with consumer(cluster) as c:
        c.assign([tp])
        assert [r.offset for r in poll_n(c, 10)] == list(range(10))
        assert c.position(tp) == 10
        c.seek(tp, 4)
        assert [r.value for r in poll_n(c, 6)] == [str(i).encode() for i in range(4, 10)]
        c.seek_to_beginning(tp)
        assert [r.offset for r in poll_n(c, 10)] == list(range(10))
        c.seek(tp, 7)  # a seek into the middle of a batch filters the earlier records
        assert [r.offset for r in poll_n(c, 3)] == [7, 8, 9]
        c.seek_to_end(tp)
        assert c.position(tp) == 10
        assert c.poll(300) == []


def test_offsets_for_times_and_bounds(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    fill(cluster, name, 10, ts0=1_000_000)
    tp = TP(name, 0)
    with consumer(cluster) as c:
        c.assign([tp])
        found = c.offsets_for_times({tp: 1_004_500})[tp]
        assert found is not None and found.offset == 5 and found.timestamp_ms == 1_005_000
        exact = c.offsets_for_times({tp: 1_003_000})[tp]
        assert exact is not None and exact.offset == 3
        assert c.offsets_for_times({tp: 9_999_999_999})[tp] is None
        assert c.beginning_offsets([tp]) == {tp: 0}
        assert c.end_offsets([tp]) == {tp: 10}
        assert found is not None
        c.seek(tp, found.offset)
        assert [r.offset for r in poll_n(c, 5)] == [5, 6, 7, 8, 9]


def test_auto_offset_reset_each_way(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    fill(cluster, name, 5)
    tp = TP(name, 0)
    with consumer(cluster, "earliest") as c:
        c.assign([tp])
        assert c.position(tp) == 0
    with consumer(cluster, "latest") as c:
        c.assign([tp])
        assert c.position(tp) == 5
        with headwater.Producer(cluster.bootstrap) as p:
            p.send(name, b"new").result(30)
        assert [r.value for r in poll_n(c, 1)] == [b"new"]
    with consumer(cluster, "none") as c:
        c.assign([tp])
        with pytest.raises(errors.NoOffsetForPartitionError):
            c.poll(100)
        c.seek(tp, 2)  # an explicit position needs no reset
        assert [r.offset for r in poll_n(c, 4)] == [2, 3, 4, 5]


def test_long_poll_answers_when_data_arrives(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic()
    tp = TP(name, 0)
    max_wait_s = 10.0
    with consumer(cluster, "latest", fetch_max_wait_ms=int(max_wait_s * 1000)) as c:
        c.assign([tp])
        c.position(tp)
        got: list[headwater.ConsumerRecord] = []

        def poll() -> None:
            got.extend(poll_n(c, 1))

        t = threading.Thread(target=poll)
        t.start()
        time.sleep(0.3)  # let the long poll reach the broker and park there
        assert t.is_alive()  # nothing to read yet: the poll waits
        with headwater.Producer(cluster.bootstrap) as p:
            p.send(name, b"now").result(30)
        started = time.monotonic()
        t.join(max_wait_s)
        # Behaviour, not speed: the fetch was parked with a 10 s max wait, and it
        # answered before that wait could expire because the data arrived.
        assert not t.is_alive() and time.monotonic() - started < max_wait_s
    assert [r.value for r in got] == [b"now"]


def test_out_of_range_after_retention(cluster: Cluster, topic: TopicFactory) -> None:
    name = topic(configs={"segment.bytes": "1024", "retention.ms": "60000"})
    tp = TP(name, 0)
    old = time.time_ns() // 1_000_000 - 3_600_000  # an hour old: past retention.ms
    # batch_size below two records: one record per batch, several batches per segment.
    with headwater.Producer(cluster.bootstrap, linger_ms=0, batch_size=150) as p:
        futs = [p.send(name, b"%03d" % i + b"." * 100, timestamp_ms=old + i) for i in range(40)]
        assert [f.result(30).offset for f in futs] == list(range(40))
        p.send(name, b"fresh").result(30)  # a recent record keeps the active segment
    with consumer(cluster) as c:
        # Retention runs every 300 ms on this cluster and may have run while the producer
        # was still rolling segments, so wait until the log start has stayed put for
        # 1 s (three passes): then every expired segment is gone.
        start, stable_since = 0, time.monotonic()
        for _ in range(200):  # bounded: 200 reads of 100 ms
            now_start = c.beginning_offsets([tp])[tp]
            if now_start != start:
                start, stable_since = now_start, time.monotonic()
            elif start > 0 and time.monotonic() - stable_since >= 1.0:
                break
            time.sleep(0.1)
        assert start > 0, "retention never deleted a segment"
    with consumer(cluster, "none") as c:
        c.assign([tp])
        c.seek(tp, 0)
        with pytest.raises(errors.OffsetOutOfRangeError):
            poll_n(c, 1, rounds=50)
    with consumer(cluster, "earliest") as c:
        c.assign([tp])
        c.seek(tp, 0)
        got = poll_n(c, 41 - start)
        assert got[0].offset == start and got[-1].value == b"fresh"
        assert [r.offset for r in got] == list(range(start, 41))
    with consumer(cluster, "latest") as c:
        c.assign([tp])
        c.seek(tp, 0)
        # The reset follows the fetcher thread's OFFSET_OUT_OF_RANGE answer (a fresh
        # consumer: metadata, then the fetch); until then the position is still the
        # seek's 0, so one poll(500) was not always long enough under load.
        got: list[headwater.ConsumerRecord] = []
        for _ in range(50):  # bounded: 50 polls of 200 ms
            got += c.poll(200)
            if c.position(tp) != 0:
                break
        assert got == []
        assert c.position(tp) == 41
