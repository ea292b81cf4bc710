"""Fetch sessions, KIP-227 (headwater.fetch_sessions)."""

from __future__ import annotations

import uuid

import pytest
from headwater.errors import ErrorCode
from headwater.fetch_sessions import (
    FetchSessionCache,
    FetchSessionError,
    TopicIdPartition,
    Wanted,
    WantedById,
)
from headwater.server.runtime.hosted import FetchResult
from headwater.values import TopicPartition

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def want(tp: TopicPartition, offset: int) -> Wanted:
    return Wanted(tp, offset, 1 << 20, -1)


def got(
    tp: TopicPartition,
    *,
    hw: int,
    records: bytes = b"",
    error: ErrorCode = ErrorCode.NONE,
    last_stable: int = -1,
) -> FetchResult:
    """A fetch result as the replica manager gives it (log start 0)."""
    return FetchResult(
        tp, error, high_watermark=hw, log_start_offset=0, records=records,
        last_stable_offset=last_stable,
    )  # fmt: skip


def test_a_sessionless_fetch_reads_what_it_names_and_answers_everything() -> None:
    cache = FetchSessionCache()
    s = cache.begin(session_id=0, epoch=-1, wanted=[want(A, 3)], forgotten=[])
    assert s.session_id == 0 and len(cache) == 0
    assert [w.fetch_offset for w in s.to_read()] == [3]
    assert s.keep(got(A, hw=3))


def test_an_incremental_fetch_reads_the_whole_session_and_answers_only_changes() -> None:
    cache = FetchSessionCache(first_id=7)
    full = cache.begin(session_id=0, epoch=0, wanted=[want(A, 0), want(B, 0)], forgotten=[])
    assert full.session_id == 7
    assert full.keep(got(A, hw=5))
    assert full.keep(got(B, hw=0))
    # Only A moved: the client names it alone, and the session still reads B.
    inc = cache.begin(session_id=7, epoch=1, wanted=[want(A, 2)], forgotten=[])
    assert inc is full
    assert [(w.tp, w.fetch_offset) for w in inc.to_read()] == [(A, 2), (B, 0)]
    assert inc.keep(got(A, hw=5, records=b"r"))
    assert not inc.keep(got(B, hw=0))
    # A new high watermark, or an error, is news even without records.
    inc = cache.begin(session_id=7, epoch=2, wanted=[], forgotten=[])
    assert inc.keep(got(B, hw=1))
    assert inc.keep(got(A, hw=5, error=ErrorCode.NOT_LEADER_OR_FOLLOWER))


def test_forgotten_partitions_leave_and_new_ones_join() -> None:
    cache = FetchSessionCache(first_id=1)
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0), want(B, 0)], forgotten=[])
    s = cache.begin(session_id=1, epoch=1, wanted=[want(C, 4)], forgotten=[B])
    assert [w.tp for w in s.to_read()] == [A, C]


@pytest.mark.parametrize(
    ("session_id", "epoch", "code"),
    [
        (99, 1, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (1, 5, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (1, 1, None),
    ],
)
def test_an_unknown_session_or_a_wrong_epoch_is_refused(
    session_id: int, epoch: int, code: ErrorCode | None
) -> None:
    cache = FetchSessionCache(first_id=1)
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    if code is None:
        cache.begin(session_id=session_id, epoch=epoch, wanted=[], forgotten=[])
        return
    with pytest.raises(FetchSessionError) as caught:
        cache.begin(session_id=session_id, epoch=epoch, wanted=[], forgotten=[])
    assert caught.value.code is code


def test_final_and_initial_epochs_close_the_named_session() -> None:
    cache = FetchSessionCache(first_id=1)
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    assert len(cache) == 1
    assert cache.begin(session_id=1, epoch=-1, wanted=[want(A, 0)], forgotten=[]).session_id == 0
    assert len(cache) == 0
    with pytest.raises(FetchSessionError):
        cache.begin(session_id=1, epoch=1, wanted=[], forgotten=[])
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    renewed = cache.begin(session_id=2, epoch=0, wanted=[want(B, 0)], forgotten=[])
    assert renewed.session_id == 3 and len(cache) == 1


def test_a_full_cache_evicts_the_least_recently_used_session() -> None:
    cache = FetchSessionCache(max_sessions=2, first_id=1)
    for _ in range(2):
        cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    cache.begin(session_id=1, epoch=1, wanted=[], forgotten=[])  # 1 is used again
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])  # evicts 2
    cache.begin(session_id=1, epoch=2, wanted=[], forgotten=[])
    with pytest.raises(FetchSessionError):
        cache.begin(session_id=2, epoch=1, wanted=[], forgotten=[])
    assert len(cache) == 2


def test_a_session_belongs_to_the_replica_that_opened_it() -> None:
    cache = FetchSessionCache(first_id=1)
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[], replica_id=2)
    with pytest.raises(FetchSessionError) as caught:
        cache.begin(session_id=1, epoch=1, wanted=[want(B, 0)], forgotten=[A], replica_id=3)
    assert caught.value.code is ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # Another replica's epoch 0 or -1 naming it does not close it.
    cache.begin(session_id=1, epoch=0, wanted=[want(B, 0)], forgotten=[], replica_id=3)
    cache.begin(session_id=1, epoch=-1, wanted=[want(B, 0)], forgotten=[], replica_id=3)
    s = cache.begin(session_id=1, epoch=1, wanted=[], forgotten=[], replica_id=2)
    assert [w.tp for w in s.to_read()] == [A]


def test_a_refused_request_changes_nothing() -> None:
    cache = FetchSessionCache(first_id=1)
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    for session_id, epoch in ((1, 5), (1, -2), (2, 1)):
        with pytest.raises(FetchSessionError):
            cache.begin(session_id=session_id, epoch=epoch, wanted=[want(B, 9)], forgotten=[A])
    s = cache.begin(session_id=1, epoch=1, wanted=[], forgotten=[])
    assert [(w.tp, w.fetch_offset) for w in s.to_read()] == [(A, 0)]


def test_a_changed_last_stable_offset_is_news() -> None:
    cache = FetchSessionCache(first_id=1)
    s = cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    s.keep(got(A, hw=5, last_stable=3))
    s = cache.begin(session_id=1, epoch=1, wanted=[], forgotten=[])
    assert not s.keep(got(A, hw=5, last_stable=3))
    assert s.keep(got(A, hw=5, last_stable=5))


def test_the_session_epoch_wraps_to_one() -> None:
    cache = FetchSessionCache(first_id=1)
    s = cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    s.epoch = 0x7FFFFFFF
    cache.begin(session_id=1, epoch=0x7FFFFFFF, wanted=[], forgotten=[])
    assert s.epoch == 1


# -- sessions by topic id (Fetch v13+) ---------------------------------------------------------

T_ID, U_ID, GONE_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
NAMES = {T_ID: "t", U_ID: "u"}


def by_id(topic_id: uuid.UUID, partition: int, offset: int) -> WantedById:
    return WantedById(TopicIdPartition(topic_id, partition), offset, 1 << 20, -1)


def test_a_session_by_id_reads_by_name_and_holds_an_unknown_id_until_forgotten() -> None:
    cache = FetchSessionCache(first_id=1)
    names = dict(NAMES)
    s = cache.begin_by_id(
        session_id=0,
        epoch=0,
        wanted=[by_id(T_ID, 0, 4), by_id(GONE_ID, 0, 0)],
        forgotten=[],
        topic_name=names.get,
    )
    assert s.session_id == 1 and s.uses_topic_ids
    assert [(w.tp, w.fetch_offset) for w in s.to_read()] == [(A, 4)]
    assert s.unknown_topic_ids() == [TopicIdPartition(GONE_ID, 0)]
    assert s.keep(got(A, hw=4))
    # Incremental: the unknown id is still answered; a new partition by id joins.
    s = cache.begin_by_id(
        session_id=1, epoch=1, wanted=[by_id(U_ID, 0, 2)], forgotten=[], topic_name=names.get
    )
    assert [(w.tp, w.fetch_offset) for w in s.to_read()] == [(A, 4), (C, 2)]
    assert s.unknown_topic_ids() == [TopicIdPartition(GONE_ID, 0)]
    assert not s.keep(got(A, hw=4))
    # The id comes to name a topic: read from then on, by its name.
    names[GONE_ID] = "g"
    s = cache.begin_by_id(session_id=1, epoch=2, wanted=[], forgotten=[], topic_name=names.get)
    assert TopicPartition("g", 0) in s.partitions and s.unknown_topic_ids() == []
    # Forgotten by id: the partition leaves, whatever its topic is called now.
    del names[T_ID]
    s = cache.begin_by_id(
        session_id=1,
        epoch=3,
        wanted=[],
        forgotten=[TopicIdPartition(T_ID, 0), TopicIdPartition(GONE_ID, 0)],
        topic_name=names.get,
    )
    assert [w.tp for w in s.to_read()] == [C]
    assert s.by_id is not None and list(s.by_id) == [TopicIdPartition(U_ID, 0)]


def test_a_session_is_continued_only_by_requests_naming_topics_its_way() -> None:
    cache = FetchSessionCache(first_id=1)
    cache.begin(session_id=0, epoch=0, wanted=[want(A, 0)], forgotten=[])
    cache.begin_by_id(
        session_id=0, epoch=0, wanted=[by_id(T_ID, 0, 7)], forgotten=[], topic_name=NAMES.get
    )
    with pytest.raises(FetchSessionError) as caught:
        cache.begin_by_id(
            session_id=1,
            epoch=1,
            wanted=[by_id(U_ID, 0, 0)],
            forgotten=[TopicIdPartition(T_ID, 0)],
            topic_name=NAMES.get,
        )
    assert caught.value.code is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    with pytest.raises(FetchSessionError) as caught:
        cache.begin(session_id=2, epoch=1, wanted=[want(B, 0)], forgotten=[A])
    assert caught.value.code is ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # Both refusals changed nothing: each session continues at epoch 1 as it was.
    s = cache.begin(session_id=1, epoch=1, wanted=[], forgotten=[])
    assert [(w.tp, w.fetch_offset) for w in s.to_read()] == [(A, 0)]
    s = cache.begin_by_id(session_id=2, epoch=1, wanted=[], forgotten=[], topic_name=NAMES.get)
    assert [(w.tp, w.fetch_offset) for w in s.to_read()] == [(A, 7)]


def test_a_sessionless_fetch_by_id_answers_unknown_ids_and_keeps_nothing() -> None:
    cache = FetchSessionCache(first_id=1)
    s = cache.begin_by_id(
        session_id=0,
        epoch=-1,
        wanted=[by_id(uuid.UUID(int=0), 0, 0), by_id(U_ID, 0, 1)],
        forgotten=[],
        topic_name=NAMES.get,
    )
    assert s.session_id == 0 and len(cache) == 0
    assert [w.tp for w in s.to_read()] == [C]
    assert s.unknown_topic_ids() == [TopicIdPartition(uuid.UUID(int=0), 0)]
