"""The producer and the broker's idempotence under faults, each test on a fresh
3-broker cluster with min.insync.replicas=2: SIGKILL of the leader mid-stream with
acks=all (every acknowledged record readable, in order, exactly once),
delivery_timeout_ms expiring records bound for a paused leader, and a lost
acknowledgement (the same batch bytes resent, before and after a leader failover)
answered with the original offset instead of being appended twice, together with the
leader's refusals of out-of-order sequences and fenced producer epochs."""

from __future__ import annotations

import threading

import headwater
import pytest
from headwater import errors
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.testing import Cluster
from headwater.v1 import broker_pb2

from tests.e2e.client.conftest import make_topic
from tests.e2e.client.raw import batch_headers, produce, stub_for, wait_leader

pytestmark = pytest.mark.e2e
TP = headwater.TopicPartition


def read_values(bootstrap: str, topic: str, n: int) -> list[bytes | None]:
    got: list[bytes | None] = []
    with headwater.Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([TP(topic, 0)])
        for _ in range(300):
            got += [r.value for r in c.poll(200)]
            if len(got) >= n:
                break
        got += [r.value for r in c.poll(300)]  # anything beyond n would be a duplicate
    return got


def test_leader_sigkill_mid_stream_loses_and_duplicates_nothing(trio: Cluster) -> None:
    name = make_topic(trio.bootstrap)
    trio.wait_for(lambda: len(trio.isr_for(name, 0)) == 3, what="a full ISR")
    leader = wait_leader(trio, name)
    total = 3000
    acked = threading.Semaphore(0)
    with headwater.Producer(trio.bootstrap, acks="all", linger_ms=2, retry_backoff_ms=50) as p:
        futs = []
        for i in range(total):
            futs.append(p.send(name, b"%05d" % i, callback=lambda _m, _e: acked.release()))
            if i == total // 3:
                for _ in range(200):  # kill once some records are acknowledged, mid-stream
                    if acked.acquire(timeout=0.1):
                        break
                trio.kill(leader)
        p.flush(120)
    offsets = [f.result(0).offset for f in futs]
    assert offsets == list(range(total))  # acknowledged in order, no gap, no double append
    assert wait_leader(trio, name, not_=leader) != leader
    assert read_values(trio.bootstrap, name, total) == [b"%05d" % i for i in range(total)]


def test_acks_1_pipelines_and_keeps_order_across_a_leader_sigkill(trio: Cluster) -> None:
    """acks=1 numbers its batches (idempotence left unset), so five are in flight per
    partition; a failover may lose what only the dead leader had (acks=1), but what is
    read back is in send order and never twice."""
    name = make_topic(trio.bootstrap)
    trio.wait_for(lambda: len(trio.isr_for(name, 0)) == 3, what="a full ISR")
    leader = wait_leader(trio, name)
    total = 3000
    acked = threading.Semaphore(0)
    with headwater.Producer(
        trio.bootstrap, acks=1, linger_ms=0, batch_size=200, retry_backoff_ms=50
    ) as p:
        assert p.settings.sequenced and p.settings.max_in_flight_per_partition == 5
        futs = []
        for i in range(total):
            futs.append(p.send(name, b"%05d" % i, callback=lambda _m, _e: acked.release()))
            if i == total // 3:
                for _ in range(200):
                    if acked.acquire(timeout=0.1):
                        break
                trio.kill(leader)
        p.flush(120)
    assert all(f.done() for f in futs)
    ok = [f.result(0).offset for f in futs if f.exception(0) is None]
    assert len(ok) > total // 2
    # Offsets the dead leader acknowledged may be lost and handed out again (acks=1).
    # The last acknowledgements came from the new leader, whose high watermark reaches
    # them once its followers have fetched (acks=1 does not wait for that).
    last_acked = max(ok)
    with headwater.Consumer(bootstrap_servers=trio.bootstrap) as c:
        trio.wait_for(
            lambda: c.end_offsets([TP(name, 0)])[TP(name, 0)] > last_acked,
            what="the high watermark to pass the last acknowledged offset",
        )
        end = c.end_offsets([TP(name, 0)])[TP(name, 0)]
    values = read_values(trio.bootstrap, name, end)
    assert len(values) == end
    numbers = [int(v or b"") for v in values]
    assert numbers == sorted(set(numbers))  # in send order, no duplicate
    assert len(numbers) > total // 2


def test_delivery_timeout_expires_records_for_a_paused_leader(trio: Cluster) -> None:
    name = make_topic(trio.bootstrap)
    leader = wait_leader(trio, name)
    with headwater.Producer(
        trio.bootstrap, acks="all", linger_ms=0, request_timeout_ms=800, delivery_timeout_ms=1500
    ) as p:
        assert p.send(name, b"before").result(30).offset == 0
        trio.pause(leader)
        try:
            late = p.send(name, b"during")
            error = late.exception(60)
        finally:
            trio.resume(leader)
        # Retries are unlimited: only delivery_timeout_ms can have ended the attempts
        # (ZooKeeper had not yet noticed the pause, so no other leader took over).
        assert isinstance(error, errors.RequestTimedOutError), error


def test_lost_acknowledgement_is_not_appended_twice_even_after_failover(trio: Cluster) -> None:
    name = make_topic(trio.bootstrap)
    trio.wait_for(lambda: len(trio.isr_for(name, 0)) == 3, what="a full ISR")
    leader = wait_leader(trio, name)
    with stub_for(trio, leader) as stub:
        init = stub.InitProducerId(
            broker_pb2.InitProducerIdRequest(producer_id=-1, producer_epoch=-1), timeout=10
        )
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(seq: int, n: int, *, ep: int = epoch) -> bytes:
        records = [Record(None, b"%d" % (seq + i)) for i in range(n)]
        return build_batch(records, producer_id=pid, producer_epoch=ep, base_sequence=seq)

    first, second = batch(0, 3), batch(3, 2)
    with stub_for(trio, leader) as stub:
        assert produce(stub, name, first).base_offset == 0
        retry = produce(stub, name, first)  # the answer was "lost": the client resends
        assert (retry.error, retry.base_offset) == (ErrorCode.NONE, 0)
        assert produce(stub, name, second).base_offset == 3
        gap = produce(stub, name, batch(9, 1))
        assert gap.error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    trio.kill(leader)
    new_leader = wait_leader(trio, name, not_=leader)
    with stub_for(trio, new_leader) as stub:
        # The new leader rebuilt the producer state from the batch headers in its log.
        for _ in range(200):
            answer = produce(stub, name, second)
            if answer.error != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                break
        assert (answer.error, answer.base_offset) == (ErrorCode.NONE, 3)
        assert produce(stub, name, first).base_offset == 0
        assert produce(stub, name, batch(6, 1)).error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(stub, name, batch(5, 1)).base_offset == 5
        bumped = stub.InitProducerId(
            broker_pb2.InitProducerIdRequest(producer_id=pid, producer_epoch=epoch), timeout=10
        )
        assert bumped.producer_id == pid and bumped.producer_epoch == epoch + 1
        assert produce(stub, name, batch(0, 1, ep=epoch + 1)).base_offset == 6
        fenced = produce(stub, name, batch(6, 1))
        assert fenced.error == ErrorCode.INVALID_PRODUCER_EPOCH
    headers = batch_headers(trio, name)
    assert [(h.base_offset, h.records_count) for h in headers] == [(0, 3), (3, 2), (5, 1), (6, 1)]
    values = read_values(trio.bootstrap, name, 7)
    assert values == [b"0", b"1", b"2", b"3", b"4", b"5", b"0"]
