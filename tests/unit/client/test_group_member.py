"""The consumer's group membership, driven answer by answer with a virtual clock.

Covers :class:`headwater.client.group.classic.member.GroupMember`: what each JoinGroup, SyncGroup
and Heartbeat answer (and each failed call) does to the state, the generation, the member
id and the owned partitions; eager and cooperative revocation; static members; answers
that arrive after the member has moved on.  No I/O and no mocks: the member is the logic.
"""

from __future__ import annotations

import pytest
from headwater.client.group.classic.member import (
    NO_GENERATION,
    AssignmentChange,
    GroupMember,
    IllegalStateTransition,
    Joined,
    MemberState,
    Outcome,
)
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode

S = MemberState
BACKOFF = 100.0
P = [TopicPartition("t", i) for i in range(6)]


def member(*, cooperative: bool = False, static: str | None = None) -> GroupMember:
    return GroupMember(
        group_instance_id=static, cooperative=cooperative, retry_backoff_ms=BACKOFF, now_ms=0.0
    )


def join_answer(
    m: GroupMember,
    code: ErrorCode = ErrorCode.NONE,
    *,
    member_id: str = "m-1",
    generation: int = 1,
    leader: str = "m-1",
    now: float = 0.0,
) -> Joined | Outcome:
    return m.on_join_response(
        error_code=code,
        member_id=member_id,
        generation_id=generation,
        protocol="range",
        leader=leader,
        now_ms=now,
    )


def stable(m: GroupMember, owned: list[TopicPartition], *, generation: int = 1) -> AssignmentChange:
    """Drive ``m`` from UNJOINED (or STABLE with a rejoin due) to STABLE owning ``owned``."""
    m.start_join()
    assert isinstance(join_answer(m, generation=generation), Joined)
    change = m.on_sync_response(
        generation_id=generation, error_code=ErrorCode.NONE, assignment=owned, now_ms=0.0
    )
    assert isinstance(change, AssignmentChange)
    return change


# -- joining ---------------------------------------------------------------------------


def test_a_new_member_is_unjoined_and_joins_at_once() -> None:
    m = member()
    assert m.state is S.UNJOINED and m.generation_id == NO_GENERATION
    assert m.join_due(0.0) and not m.has_generation and m.heartbeat_due() is None
    start = m.start_join()
    assert m.state is S.JOINING
    assert (start.member_id, start.generation_id, start.owned, start.revoke) == (
        "",
        NO_GENERATION,
        frozenset(),
        frozenset(),
    )
    assert not m.join_due(0.0)


def test_member_id_required_takes_the_id_and_rejoins_without_backoff() -> None:
    m = member()
    m.start_join()
    assert join_answer(m, ErrorCode.MEMBER_ID_REQUIRED, member_id="m-9", now=50) is Outcome.RETRY
    assert m.state is S.UNJOINED and m.member_id == "m-9"
    assert m.join_due(50.0)
    assert m.start_join().member_id == "m-9"


@pytest.mark.parametrize("leader", ["m-1", "m-2"])
def test_join_success_moves_to_syncing_with_the_generation(leader: str) -> None:
    m = member()
    m.start_join()
    joined = join_answer(m, generation=7, leader=leader)
    assert joined == Joined(7, "m-1", "range", leader == "m-1")
    assert m.state is S.SYNCING and m.has_generation
    assert (m.generation_id, m.member_id, m.protocol) == (7, "m-1", "range")
    assert m.heartbeat_due() == (7, "m-1")


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (ErrorCode.REBALANCE_IN_PROGRESS, Outcome.RETRY),
        (ErrorCode.ILLEGAL_GENERATION, Outcome.RETRY),
        (ErrorCode.UNKNOWN_MEMBER_ID, Outcome.RETRY),
        (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, Outcome.FIND_COORDINATOR),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Outcome.FIND_COORDINATOR),
        (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, Outcome.FATAL),
        (ErrorCode.INVALID_GROUP_ID, Outcome.FATAL),
    ],
)
def test_join_error_unjoins_and_backs_off(code: ErrorCode, outcome: Outcome) -> None:
    m = member()
    stable(m, P[:2])
    m.request_rejoin()
    m.start_join()
    assert join_answer(m, code, now=1000) is outcome
    assert m.state is S.UNJOINED and m.generation_id == NO_GENERATION
    assert not m.join_due(1000 + BACKOFF - 1) and m.join_due(1000 + BACKOFF)
    assert m.member_id == ("" if code is ErrorCode.UNKNOWN_MEMBER_ID else "m-1")


def test_fenced_join_is_terminal_but_closable() -> None:
    m = member(static="i-1")
    m.start_join()
    assert join_answer(m, ErrorCode.FENCED_INSTANCE_ID) is Outcome.FENCED
    assert m.state is S.FENCED and not m.join_due(10**9)
    with pytest.raises(IllegalStateTransition):
        m.start_join()
    m.close()
    assert m.state is S.CLOSED


def test_a_failed_call_unjoins() -> None:
    m = member()
    m.start_join()
    assert m.on_call_failed(retriable=True, now_ms=0) is Outcome.FIND_COORDINATOR
    assert m.state is S.UNJOINED
    m.start_join()
    join_answer(m)
    assert m.on_call_failed(retriable=False, now_ms=0) is Outcome.FATAL
    assert m.state is S.UNJOINED and m.generation_id == NO_GENERATION


def test_a_failed_call_after_the_member_moved_on_changes_nothing() -> None:
    m = member()
    stable(m, P[:1])
    assert m.on_call_failed(retriable=True, now_ms=0) is Outcome.RETRY
    assert m.state is S.STABLE and m.owned == frozenset(P[:1])


def test_join_answer_after_close_is_ignored() -> None:
    m = member()
    m.start_join()
    m.close()
    assert join_answer(m) is Outcome.RETRY
    assert m.state is S.CLOSED


# -- syncing ---------------------------------------------------------------------------


def test_sync_success_makes_the_member_stable() -> None:
    m = member()
    change = stable(m, P[:3])
    assert change == AssignmentChange(frozenset(P[:3]), frozenset(), frozenset(P[:3]))
    assert m.state is S.STABLE and m.owned == frozenset(P[:3])
    assert not m.join_due(10**9) and m.heartbeat_due() == (1, "m-1")


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (ErrorCode.REBALANCE_IN_PROGRESS, Outcome.RETRY),
        (ErrorCode.ILLEGAL_GENERATION, Outcome.RETRY),
        (ErrorCode.NOT_COORDINATOR, Outcome.FIND_COORDINATOR),
        (ErrorCode.FENCED_INSTANCE_ID, Outcome.FENCED),
    ],
)
def test_sync_error(code: ErrorCode, outcome: Outcome) -> None:
    m = member()
    m.start_join()
    join_answer(m)
    got = m.on_sync_response(generation_id=1, error_code=code, assignment=(), now_ms=5)
    assert got is outcome
    assert m.state is (S.FENCED if outcome is Outcome.FENCED else S.UNJOINED)


def test_sync_answer_for_an_old_generation_is_ignored() -> None:
    m = member()
    m.start_join()
    join_answer(m, generation=3)
    got = m.on_sync_response(generation_id=2, error_code=ErrorCode.NONE, assignment=P, now_ms=0)
    assert got is Outcome.RETRY and m.state is S.SYNCING and m.owned == frozenset()


def test_sync_answer_after_the_member_was_lost_is_ignored() -> None:
    m = member()
    m.start_join()
    join_answer(m)
    assert m.on_heartbeat_response(generation_id=1, error_code=ErrorCode.UNKNOWN_MEMBER_ID)
    assert m.state is S.UNJOINED
    got = m.on_sync_response(generation_id=1, error_code=ErrorCode.NONE, assignment=P, now_ms=0)
    assert got is Outcome.RETRY and m.state is S.UNJOINED


# -- eager and cooperative rebalancing ---------------------------------------------------


def test_eager_rejoin_revokes_everything_before_joining() -> None:
    m = member()
    stable(m, P[:3])
    m.request_rejoin()
    assert m.join_due(0)
    start = m.start_join()
    assert start.revoke == frozenset(P[:3]) and start.owned == frozenset()
    assert m.owned == frozenset()
    change = m.on_sync_response(generation_id=1, error_code=ErrorCode.NONE, assignment=(), now_ms=0)
    assert change is Outcome.RETRY  # still JOINING: no sync answer is expected yet
    join_answer(m, generation=2)
    change = m.on_sync_response(
        generation_id=2, error_code=ErrorCode.NONE, assignment=P[2:4], now_ms=0
    )
    assert change == AssignmentChange(frozenset(P[2:4]), frozenset(), frozenset(P[2:4]))
    assert not m.rejoin_needed


def test_cooperative_rejoin_keeps_partitions_and_revokes_only_what_moved() -> None:
    m = member(cooperative=True)
    stable(m, P[:4])
    m.request_rejoin()
    start = m.start_join()
    assert start.revoke == frozenset() and start.owned == frozenset(P[:4])
    assert start.generation_id == 1
    join_answer(m, generation=2)
    change = m.on_sync_response(
        generation_id=2, error_code=ErrorCode.NONE, assignment=P[:2], now_ms=0
    )
    assert change == AssignmentChange(frozenset(P[:2]), frozenset(P[2:4]), frozenset())
    assert m.rejoin_needed and m.join_due(0)  # the follow-up round
    m.start_join()
    join_answer(m, generation=3)
    change = m.on_sync_response(
        generation_id=3, error_code=ErrorCode.NONE, assignment=P[:3], now_ms=0
    )
    assert change == AssignmentChange(frozenset(P[:3]), frozenset(), frozenset(P[2:3]))
    assert not m.rejoin_needed


def test_cooperative_member_keeps_its_partitions_through_a_failed_join() -> None:
    m = member(cooperative=True)
    stable(m, P[:2])
    m.request_rejoin()
    m.start_join()
    join_answer(m, ErrorCode.REBALANCE_IN_PROGRESS)
    assert m.state is S.UNJOINED and m.owned == frozenset(P[:2])
    assert m.start_join().owned == frozenset(P[:2])


# -- heartbeats ------------------------------------------------------------------------


def test_heartbeat_rebalance_in_progress_asks_for_a_rejoin() -> None:
    m = member()
    stable(m, P[:1])
    assert m.on_heartbeat_response(generation_id=1, error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    assert m.state is S.STABLE and m.join_due(0)


@pytest.mark.parametrize("static", [None, "i-1"])
def test_heartbeat_unknown_member_loses_the_partitions(static: str | None) -> None:
    m = member(static=static)
    stable(m, P[:2])
    outcome = m.on_heartbeat_response(generation_id=1, error_code=ErrorCode.UNKNOWN_MEMBER_ID)
    assert outcome is Outcome.RETRY
    assert m.state is S.UNJOINED and m.owned == frozenset()
    assert m.member_id == ("m-1" if static else "")
    assert m.take_lost() == frozenset(P[:2]) and m.take_lost() == frozenset()
    assert m.join_due(0)


def test_heartbeat_illegal_generation_keeps_the_member_id() -> None:
    m = member()
    stable(m, P[:2])
    m.on_heartbeat_response(generation_id=1, error_code=ErrorCode.ILLEGAL_GENERATION)
    assert m.state is S.UNJOINED and m.member_id == "m-1"
    assert m.take_lost() == frozenset(P[:2])


def test_heartbeat_fenced() -> None:
    m = member(static="i-1")
    stable(m, P[:2])
    outcome = m.on_heartbeat_response(generation_id=1, error_code=ErrorCode.FENCED_INSTANCE_ID)
    assert outcome is Outcome.FENCED and m.state is S.FENCED
    assert m.heartbeat_due() is None


def test_heartbeat_coordinator_errors_ask_for_a_lookup() -> None:
    m = member()
    stable(m, P[:1])
    got = m.on_heartbeat_response(generation_id=1, error_code=ErrorCode.NOT_COORDINATOR)
    assert got is Outcome.FIND_COORDINATOR and m.state is S.STABLE


def test_heartbeat_answers_for_another_generation_change_nothing() -> None:
    m = member()
    stable(m, P[:2], generation=4)
    assert m.on_heartbeat_response(generation_id=3, error_code=ErrorCode.ILLEGAL_GENERATION)
    assert m.state is S.STABLE and m.owned == frozenset(P[:2])
    m.request_rejoin()
    m.start_join()
    assert m.heartbeat_due() is None
    m.on_heartbeat_response(generation_id=4, error_code=ErrorCode.UNKNOWN_MEMBER_ID)
    assert m.state is S.JOINING


def test_mark_lost_outside_a_generation_changes_nothing() -> None:
    m = member()
    m.mark_lost()
    assert m.state is S.UNJOINED
    m.start_join()
    m.mark_lost()
    assert m.state is S.JOINING


# -- closing ---------------------------------------------------------------------------


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
def test_close_from_any_live_state_is_final(steps: int) -> None:
    m = member()
    if steps >= 1:
        m.start_join()
    if steps >= 2:
        join_answer(m)
    if steps >= 3:
        m.on_sync_response(generation_id=1, error_code=ErrorCode.NONE, assignment=P, now_ms=0)
    m.close()
    m.close()
    assert m.state is S.CLOSED and not m.join_due(10**9) and m.heartbeat_due() is None
    with pytest.raises(IllegalStateTransition):
        m.start_join()
    with pytest.raises(IllegalStateTransition):
        m.fence()
