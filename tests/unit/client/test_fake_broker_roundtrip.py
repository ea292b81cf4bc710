"""Producer -> broker -> consumer round trips against the in-process fake broker.

Covers the client's wiring end to end without broker processes: metadata
discovery, keyed partitioning, acknowledgements with offsets, idempotent
retries after a lost acknowledgement (no duplicate), retriable per-partition
errors, compression, seek/rewind, offsets_for_times, auto_offset_reset, the
long poll returning when data arrives, and the admin's typed errors.
"""

from __future__ import annotations

import threading

import headwater
import pytest
from headwater import errors
from headwater.client.producer.partitioner import partition_for_key

from tests.unit.client.fake_broker import FakeBroker

TP = headwater.TopicPartition


def test_send_returns_offsets_in_order(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with headwater.Producer(broker.bootstrap, linger_ms=0) as p:
        futs = [p.send("t", f"v{i}".encode()) for i in range(20)]
        offsets = [f.result(10).offset for f in futs]
    assert offsets == list(range(20))
    assert broker.values("t", 0) == [f"v{i}".encode() for i in range(20)]


def test_keyed_records_land_on_kafka_partition(broker: FakeBroker) -> None:
    broker.create("t", 7)
    with headwater.Producer(broker.bootstrap) as p:
        md = p.send("t", b"x", key=b"customer-42").result(10)
    assert md.partition == partition_for_key(b"customer-42", 7)


def test_lost_ack_is_retried_without_duplicate(broker: FakeBroker) -> None:
    broker.create("t", 1)
    broker.drop_acks = 1
    with headwater.Producer(broker.bootstrap, retry_backoff_ms=10) as p:
        md = p.send("t", b"once").result(10)
        md2 = p.send("t", b"twice").result(10)
    assert (md.offset, md2.offset) == (0, 1)
    assert broker.values("t", 0) == [b"once", b"twice"]
    assert len(broker.produce_requests) >= 3  # the first was appended but its answer lost


def test_retriable_error_then_success_keeps_order(broker: FakeBroker) -> None:
    broker.create("t", 1)
    broker.fail_produce = [6, 6]  # NOT_LEADER_OR_FOLLOWER twice
    with headwater.Producer(broker.bootstrap, retry_backoff_ms=5, linger_ms=0) as p:
        futs = [p.send("t", str(i).encode()) for i in range(50)]
        p.flush(10)
    assert [f.result(0).offset for f in futs] == list(range(50))
    assert broker.values("t", 0) == [str(i).encode() for i in range(50)]


def test_non_retriable_error_fails_future(broker: FakeBroker) -> None:
    broker.create("t", 1)
    broker.fail_produce = [10]  # MESSAGE_TOO_LARGE
    seen: list[BaseException | None] = []
    with headwater.Producer(broker.bootstrap) as p:
        fut = p.send("t", b"x", callback=lambda md, exc: seen.append(exc))
        with pytest.raises(errors.MessageTooLargeError):
            fut.result(10)
    assert isinstance(seen[0], errors.MessageTooLargeError)


def test_unknown_topic_raises_after_max_block(broker: FakeBroker) -> None:
    with (
        headwater.Producer(broker.bootstrap, max_block_ms=200, retry_backoff_ms=20) as p,
        pytest.raises(errors.UnknownTopicOrPartitionError),
    ):
        p.send("missing", b"x")


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_compression_round_trip(broker: FakeBroker, codec: str) -> None:
    broker.create("t", 1)
    with headwater.Producer(broker.bootstrap, compression_type=codec) as p:
        for i in range(10):
            p.send("t", b"v" * 100, key=str(i).encode(), headers={"h": b"1"})
        p.flush(10)
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP("t", 0)])
        got = _poll_n(c, 10)
    assert [r.key for r in got] == [str(i).encode() for i in range(10)]
    assert got[0].headers == (("h", b"1"),)


def _poll_n(c: headwater.Consumer, n: int) -> list[headwater.ConsumerRecord]:
    got: list[headwater.ConsumerRecord] = []
    for _ in range(50):
        got += c.poll(200)
        if len(got) >= n:
            break
    return got


def test_seek_and_rewind(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with headwater.Producer(broker.bootstrap, linger_ms=0) as p:
        for i in range(30):
            p.send("t", str(i).encode())
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP("t", 0)])
        first = _poll_n(c, 30)
        assert [r.offset for r in first] == list(range(30))
        c.seek(TP("t", 0), 17)  # lands inside a batch: earlier records are filtered
        again = _poll_n(c, 13)
        assert [r.offset for r in again] == list(range(17, 30))
        c.seek_to_beginning()
        assert c.position(TP("t", 0)) == 0
        c.seek_to_end()
        assert c.position(TP("t", 0)) == 30
        assert c.beginning_offsets([TP("t", 0)]) == {TP("t", 0): 0}
        assert c.end_offsets([TP("t", 0)]) == {TP("t", 0): 30}


def test_auto_offset_reset(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with headwater.Producer(broker.bootstrap) as p:
        p.send("t", b"old").result(10)
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="latest") as c:
        c.assign([TP("t", 0)])
        assert c.position(TP("t", 0)) == 1
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none") as c:
        c.assign([TP("t", 0)])
        with pytest.raises(errors.NoOffsetForPartitionError):
            c.poll(0)
        c.seek(TP("t", 0), 99)
        with pytest.raises(errors.OffsetOutOfRangeError):
            for _ in range(20):
                c.poll(200)
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP("t", 0)])
        c.seek(TP("t", 0), 99)  # out of range: reset to earliest
        assert [r.value for r in _poll_n(c, 1)] == [b"old"]


def test_offsets_for_times(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with headwater.Producer(broker.bootstrap, linger_ms=0) as p:
        for i, ts in enumerate((1000, 2000, 3000)):
            p.send("t", str(i).encode(), timestamp_ms=ts).result(10)
    with headwater.Consumer(bootstrap_servers=broker.bootstrap) as c:
        found = c.offsets_for_times(
            {
                TP("t", 0): 1500,
            }
        )
        assert found[TP("t", 0)] is not None and found[TP("t", 0)].offset == 1  # type: ignore[union-attr]
        assert c.offsets_for_times({TP("t", 0): 9000})[TP("t", 0)] is None


def test_long_poll_returns_when_data_arrives(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, fetch_max_wait_ms=60000) as c:
        c.assign([TP("t", 0)])
        assert c.position(TP("t", 0)) == 0
        got: list[headwater.ConsumerRecord] = []
        done = threading.Event()

        def consume() -> None:
            got.extend(_poll_n(c, 1))
            done.set()

        t = threading.Thread(target=consume)
        t.start()
        with headwater.Producer(broker.bootstrap) as p:
            p.send("t", b"now").result(10)
        # fetch_max_wait_ms is a minute: finishing at all proves the broker answered
        # the held fetch when the record arrived, not when the wait expired.
        assert done.wait(30)
        t.join()
    assert [r.value for r in got] == [b"now"]


def test_subscribe_reads_all_partitions(broker: FakeBroker) -> None:
    broker.create("t", 3)
    with headwater.Producer(broker.bootstrap) as p:
        for i in range(3):
            p.send("t", b"x", partition=i)
    with headwater.Consumer(
        "t", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest"
    ) as c:
        got = _poll_n(c, 3)
        assert c.assignment() == {TP("t", 0), TP("t", 1), TP("t", 2)}
    assert sorted(r.partition for r in got) == [0, 1, 2]


def test_pause_and_resume(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with headwater.Producer(broker.bootstrap) as p:
        p.send("t", b"x").result(10)
    with headwater.Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP("t", 0)])
        c.pause(TP("t", 0))
        assert c.poll(300) == []
        c.resume(TP("t", 0))
        assert len(_poll_n(c, 1)) == 1


def test_admin_errors_are_kafka_classes(broker: FakeBroker) -> None:
    with headwater.Admin(broker.bootstrap) as a:
        a.create_topic("t", 2)
        with pytest.raises(errors.TopicAlreadyExistsError):
            a.create_topic("t", 2)
        assert a.list_topics() == ["t"]
        desc = a.describe_topics(["t"])["t"]
        assert [pm.leader for pm in desc.partitions] == [1, 1]
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            a.describe_topics(["nope"])
        assert a.describe_cluster().controller_id == 1


def test_unreachable_bootstrap_is_network_error() -> None:
    with (
        headwater.Admin("127.0.0.1:1", default_api_timeout_ms=300) as a,
        pytest.raises(errors.NetworkError),
    ):
        a.list_topics()
