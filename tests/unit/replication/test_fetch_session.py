"""A follower's fetch session (headwater.replication.fetch_session): one test per edge of
the module's transition table."""

from __future__ import annotations

from headwater.errors import ErrorCode
from headwater.replication.fetch_session import FollowerFetchSession, PartitionFetch
from headwater.values import TopicPartition

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def at(offset: int, epoch: int = 1) -> PartitionFetch:
    return PartitionFetch(offset, epoch, epoch, 0, 1 << 20)


def opened(session_id: int = 7) -> FollowerFetchSession:
    s = FollowerFetchSession()
    plan = s.build({A: at(0), B: at(0)})
    s.on_response(plan, error=ErrorCode.NONE, session_id=session_id)
    return s


def test_the_first_fetch_is_full_and_its_answer_opens_the_session() -> None:
    s = FollowerFetchSession()
    plan = s.build({A: at(0), B: at(3)})
    assert plan.full and (plan.session_id, plan.epoch) == (0, 0)
    assert dict(plan.partitions) == {A: at(0), B: at(3)} and plan.forgotten == ()
    s.on_response(plan, error=ErrorCode.NONE, session_id=7)
    assert (s.session_id, s.epoch, s.is_open) == (7, 1, True)


def test_an_incremental_fetch_lists_only_changes_and_forgets_what_left() -> None:
    s = opened()
    plan = s.build({A: at(5), C: at(0)})  # A moved, B left, C is new
    assert not plan.full and (plan.session_id, plan.epoch) == (7, 1)
    assert dict(plan.partitions) == {A: at(5), C: at(0)}
    assert plan.forgotten == (B,)
    s.on_response(plan, error=ErrorCode.NONE, session_id=7)
    assert s.epoch == 2
    quiet = s.build({A: at(5), C: at(0)})
    assert dict(quiet.partitions) == {} and quiet.forgotten == ()


def test_a_new_leader_epoch_is_a_change() -> None:
    s = opened()
    plan = s.build({A: at(0, epoch=2), B: at(0)})
    assert dict(plan.partitions) == {A: at(0, epoch=2)}


def test_a_sessionless_answer_keeps_every_fetch_full() -> None:
    s = FollowerFetchSession()
    plan = s.build({A: at(0)})
    s.on_response(plan, error=ErrorCode.NONE, session_id=0)
    assert (s.session_id, s.epoch) == (0, 0) and s.build({A: at(0)}).full


def test_an_incremental_answer_from_another_session_starts_over() -> None:
    s = opened()
    plan = s.build({A: at(1), B: at(0)})
    s.on_response(plan, error=ErrorCode.NONE, session_id=8)
    assert (s.session_id, s.epoch) == (0, 0)
    s = opened()
    plan = s.build({A: at(1), B: at(0)})
    s.on_response(plan, error=ErrorCode.NONE, session_id=0)
    assert (s.session_id, s.epoch) == (0, 0)


def test_an_unknown_session_falls_back_to_a_full_fetch_of_a_new_one() -> None:
    s = opened()
    plan = s.build({A: at(1), B: at(0)})
    s.on_response(plan, error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    full = s.build({A: at(1), B: at(0)})
    assert full.full and full.session_id == 0
    assert dict(full.partitions) == {A: at(1), B: at(0)}


def test_a_wrong_epoch_closes_the_session_with_a_full_fetch() -> None:
    s = opened()
    plan = s.build({A: at(1), B: at(0)})
    s.on_response(plan, error=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    full = s.build({A: at(1), B: at(0)})
    assert full.full and full.session_id == 7  # the leader closes 7 and opens another
    assert dict(full.partitions) == {A: at(1), B: at(0)}


def test_any_other_top_level_error_also_falls_back_to_a_full_fetch() -> None:
    s = opened()
    plan = s.build({A: at(1), B: at(0)})
    s.on_response(plan, error=ErrorCode.UNKNOWN_SERVER_ERROR, session_id=0)
    assert s.build({A: at(1), B: at(0)}).full


def test_a_fetch_without_an_answer_makes_the_next_one_full() -> None:
    s = opened()
    s.build({A: at(1), B: at(0)})
    s.on_failure()
    full = s.build({A: at(1), B: at(0)})
    assert full.full and full.session_id == 7 and len(full.partitions) == 2
    fresh = FollowerFetchSession()
    fresh.on_failure()
    assert (fresh.session_id, fresh.epoch) == (0, 0)


def test_a_full_fetch_after_closing_opens_the_leaders_new_session() -> None:
    s = opened()
    s.on_failure()
    plan = s.build({A: at(1)})
    s.on_response(plan, error=ErrorCode.NONE, session_id=9)
    assert (s.session_id, s.epoch) == (9, 1) and s.sent == {A: at(1)}


def test_the_epoch_wraps_to_one() -> None:
    s = opened()
    s.epoch = 0x7FFFFFFF
    plan = s.build({A: at(0), B: at(0)})
    s.on_response(plan, error=ErrorCode.NONE, session_id=7)
    assert s.epoch == 1
