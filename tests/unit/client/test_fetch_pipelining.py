"""The fetcher's buffered answers: pipelined answers of one partition are handed out in
order and move the position to the end of each answer (over control batches too); an
answer that does not continue the partition (a late duplicate, an older epoch) is dropped;
an error is raised only after the records before it were returned; and only large answers
let the next fetch of their partition go out before ``poll`` took them; a broker's
next fetch goes out before the other brokers' waiting answers are checked; decoding
pauses between partitions for an answer that arrived, and a partition's answers are
decoded and handed out in the order they came."""

from __future__ import annotations

from typing import Any

import pytest
from headwater import errors, records
from headwater.client.consumer.fetcher import (
    PIPELINE_MIN_BYTES,
    Fetcher,
    PartitionRecords,
    _Answer,
    records_from,
)
from headwater.client.settings import ConsumerSettings
from headwater.client.subscription import SubscriptionState
from headwater.client.transport import connection
from headwater.client.types import TopicPartition
from headwater.v1 import broker_pb2

TP = TopicPartition("t", 0)


def batch(base: int, n: int) -> bytes:
    return records.build_batch(
        [records.Record(None, str(base + i).encode(), (), 1000 + i) for i in range(n)],
        base_offset=base,
    )


def answer(fetch_offset: int, n: int, *, epoch: int = 1, size_bytes: int = 0) -> PartitionRecords:
    recs = records_from(batch(fetch_offset, n), TP, fetch_offset=fetch_offset)
    return PartitionRecords(
        TP, fetch_offset=fetch_offset, epoch=epoch, records=recs, size_bytes=size_bytes
    )


@pytest.fixture
def subs() -> SubscriptionState:
    s = SubscriptionState(default_reset="earliest")
    s.assign([TP])
    s.seek(TP, 0)  # epoch 1
    return s


@pytest.fixture
def fetcher(subs: SubscriptionState) -> Fetcher:
    metadata: Any = None  # never used: the fetcher thread is not started
    return Fetcher(
        settings=ConsumerSettings(bootstrap_servers=("127.0.0.1:1",)),
        subscriptions=subs,
        metadata=metadata,
        channels=connection.Channels(),
    )


def not_paused(tp: TopicPartition) -> bool:
    return False


def test_pipelined_answers_are_handed_out_in_order(
    fetcher: Fetcher, subs: SubscriptionState
) -> None:
    fetcher._buffer(answer(0, 5))
    fetcher._buffer(answer(5, 5))
    got = fetcher.take(7, paused=not_paused)
    assert [r.offset for r in got] == list(range(7))
    assert subs.position(TP) == 7
    assert [r.offset for r in fetcher.take(100, paused=not_paused)] == [7, 8, 9]
    assert subs.position(TP) == 10
    assert fetcher.buffered_partitions() == set()


def test_a_late_duplicate_answer_is_dropped(fetcher: Fetcher, subs: SubscriptionState) -> None:
    fetcher._buffer(answer(0, 5))
    fetcher._buffer(answer(0, 5))  # the same offsets again, e.g. from the old leader
    assert [r.offset for r in fetcher.take(100, paused=not_paused)] == [0, 1, 2, 3, 4]
    assert fetcher.take(100, paused=not_paused) == []
    assert subs.position(TP) == 5


def test_an_answer_of_an_older_epoch_is_dropped(fetcher: Fetcher, subs: SubscriptionState) -> None:
    fetcher._buffer(answer(0, 5))
    subs.seek(TP, 3)  # epoch 2: the buffered answer is for the old position
    assert fetcher.take(100, paused=not_paused) == []
    fetcher._buffer(answer(0, 5, epoch=1))
    assert fetcher.take(100, paused=not_paused) == []
    assert subs.position(TP) == 3


def test_an_answer_without_records_moves_the_position_past_it(
    fetcher: Fetcher, subs: SubscriptionState
) -> None:
    fetcher._buffer(PartitionRecords(TP, fetch_offset=0, epoch=1, records=[], next_offset=4))
    fetcher._buffer(answer(4, 2))
    assert [r.offset for r in fetcher.take(100, paused=not_paused)] == [4, 5]
    assert subs.position(TP) == 6


def test_an_error_is_raised_after_the_records_before_it(
    fetcher: Fetcher, subs: SubscriptionState
) -> None:
    fetcher._buffer(answer(0, 3))
    bad = errors.CorruptRecordError("batch at offset 3: CRC mismatch")
    fetcher._buffer(PartitionRecords(TP, fetch_offset=3, epoch=1, records=[], error=bad))
    assert [r.offset for r in fetcher.take(100, paused=not_paused)] == [0, 1, 2]
    with pytest.raises(errors.CorruptRecordError):
        fetcher.take(100, paused=not_paused)
    assert subs.position(TP) == 3


def test_paused_partitions_keep_their_answers(fetcher: Fetcher, subs: SubscriptionState) -> None:
    fetcher._buffer(answer(0, 3))
    assert fetcher.take(100, paused=lambda tp: True) == []
    assert [r.offset for r in fetcher.take(100, paused=not_paused)] == [0, 1, 2]


def test_only_large_answers_are_pipelined(fetcher: Fetcher) -> None:
    fetcher._buffer(answer(0, 3, size_bytes=100))
    assert fetcher._pipeline() == {TP: (1, 1, 3, False)}
    fetcher._buffer(answer(3, 3, size_bytes=PIPELINE_MIN_BYTES))
    assert fetcher._pipeline() == {TP: (2, 1, 6, True)}


def test_taking_a_whole_answer_does_not_copy_it() -> None:
    pr = answer(0, 4)
    assert pr.take(10) is pr.records
    assert pr.exhausted


OTHER = TopicPartition("t", 1)


def fetched(tp: TopicPartition, base: int, n: int) -> Any:
    return broker_pb2.FetchResponse(
        partitions=[
            broker_pb2.FetchedPartition(
                topic=tp.topic,
                partition=tp.partition,
                high_watermark=base + n,
                records=batch(base, n),
            )
        ]
    )


def handle(f: Fetcher, subs: SubscriptionState, tp: TopicPartition, base: int, n: int) -> None:
    f._handle(_Answer("a:9092", {tp: (base, subs.epoch(tp))}, fetched(tp, base, n), None))


def test_decoding_stops_between_partitions_when_another_answer_arrived(
    fetcher: Fetcher, subs: SubscriptionState
) -> None:
    subs.assign([TP, OTHER])
    subs.seek(TP, 0)
    subs.seek(OTHER, 0)
    handle(fetcher, subs, TP, 0, 3)
    handle(fetcher, subs, OTHER, 0, 2)
    fetcher._answers.put(_Answer("b:9092", {}, broker_pb2.FetchResponse(), None))
    fetcher._decode_pending()  # one partition, then the answer waiting comes first
    assert list(fetcher._undecoded) == [OTHER]
    assert fetcher.buffered_partitions() == {TP}
    fetcher._answers.get_nowait()
    fetcher._decode_pending()
    assert not fetcher._undecoded and fetcher._undecoded_bytes == 0
    got = fetcher.take(100, paused=not_paused)
    assert sorted((r.partition, r.offset) for r in got) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]


def test_an_answer_behind_an_undecoded_one_is_handed_out_after_it(
    fetcher: Fetcher, subs: SubscriptionState
) -> None:
    handle(fetcher, subs, TP, 0, 3)
    handle(fetcher, subs, TP, 3, 2)  # pipelined: the first answer is decoded first
    assert fetcher.buffered_partitions() == {TP} and list(fetcher._undecoded) == [TP]
    fetcher._decode_pending()
    assert [r.offset for r in fetcher.take(100, paused=not_paused)] == [0, 1, 2, 3, 4]
    assert subs.position(TP) == 5


def large_answer(address: str, tp: TopicPartition, subs: SubscriptionState) -> _Answer:
    """An answer of ``tp`` from ``address`` of at least PIPELINE_MIN_BYTES."""
    value = b"x" * 1000
    n = PIPELINE_MIN_BYTES // len(value) + 1
    data = records.build_batch([records.Record(None, value, (), 1000)] * n, base_offset=0)
    response = broker_pb2.FetchResponse(
        partitions=[
            broker_pb2.FetchedPartition(
                topic=tp.topic, partition=tp.partition, high_watermark=n, records=data
            )
        ]
    )
    return _Answer(address, {tp: (0, subs.epoch(tp) or 0)}, response, None)


class _NoRefresh:
    def maybe_refresh(self) -> None:
        pass


def test_a_large_answer_sends_its_broker_the_next_fetch_before_the_next_answer_is_checked(
    fetcher: Fetcher, subs: SubscriptionState
) -> None:
    """With answers of several brokers waiting, each broker's next fetch goes out right
    after its own answer was checked, not after every waiting answer was."""
    subs.assign([TP, OTHER])
    subs.seek(TP, 0)
    subs.seek(OTHER, 0)
    fetcher._metadata = _NoRefresh()  # type: ignore[assignment]
    for a in (large_answer("a:9092", TP, subs), large_answer("b:9092", OTHER, subs)):
        fetcher._in_flight.add(a.address)
        fetcher._answers.put(a)
    sends: list[tuple[set[str], list[TopicPartition]]] = []

    def send_fetches() -> float:
        sends.append((set(fetcher._in_flight), list(fetcher._undecoded)))
        return 0.0

    fetcher._send_fetches = send_fetches  # type: ignore[method-assign]
    fetcher.run_once()
    # First: a's answer checked, b's still waiting (b in flight, its answer queued).
    assert sends[0] == ({"b:9092"}, [TP])
    assert sends[1] == (set(), [TP, OTHER])
    assert not fetcher._undecoded
    assert fetcher.buffered_partitions() == {TP, OTHER}
