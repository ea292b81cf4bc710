"""The consumer-protocol member (KIP-848): its state table edge by edge, and each rule.

The table in :mod:`headwater.client.group.consumer.member` is checked pair by pair (as
``test_group_member_transitions.py`` does for the classic member), then every edge is
taken by the member itself: join at epoch 0, deltas afterwards, revoke before assign,
fencing, fatal answers, coordinator moves, leaving with -1/-2, the poll timer.
"""

from __future__ import annotations

import itertools

import pytest
from headwater.client.group.consumer.member import (
    TRANSITIONS,
    ConsumerMember,
    HeartbeatPlan,
    IllegalStateTransition,
    MemberState,
    Outcome,
    Subscription,
)
from headwater.client.types import TopicPartition
from headwater.errors import ErrorCode

S = MemberState
_ALWAYS = {S.FATAL, S.CLOSED}
LEGAL = {
    *((S.UNJOINED, t) for t in {S.JOINING, *_ALWAYS}),
    *((S.JOINING, t) for t in {S.UNJOINED, S.RECONCILING, S.STABLE, S.FENCED, S.LEAVING, *_ALWAYS}),
    *((S.RECONCILING, t) for t in {S.ACKNOWLEDGING, S.FENCED, S.STALE, S.LEAVING, *_ALWAYS}),
    *(
        (S.ACKNOWLEDGING, t)
        for t in {S.RECONCILING, S.STABLE, S.FENCED, S.STALE, S.LEAVING, *_ALWAYS}
    ),
    *((S.STABLE, t) for t in {S.RECONCILING, S.FENCED, S.STALE, S.LEAVING, *_ALWAYS}),
    *((s, t) for s in (S.FENCED, S.STALE, S.LEAVING) for t in {S.UNJOINED, *_ALWAYS}),
    (S.FATAL, S.CLOSED),
}
ALL = list(itertools.product(MemberState, MemberState))


def tps(*ps: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition("t", p) for p in ps)


def test_table_is_exactly_the_documented_edges() -> None:
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == LEGAL
    assert set(TRANSITIONS) == set(MemberState)


@pytest.mark.parametrize(("source", "target"), sorted(LEGAL, key=str), ids=str)
def test_legal_transition(source: MemberState, target: MemberState) -> None:
    assert source.transition_to(target) is target


@pytest.mark.parametrize(("source", "target"), [p for p in ALL if p not in LEGAL], ids=str)
def test_illegal_transition_raises(source: MemberState, target: MemberState) -> None:
    with pytest.raises(IllegalStateTransition, match=f"{source.name} -> {target.name}"):
        source.transition_to(target)


def test_no_state_moves_to_itself_and_closed_is_terminal() -> None:
    assert TRANSITIONS[S.CLOSED] == frozenset()
    for state in MemberState:
        assert state not in TRANSITIONS[state]


# -- the member's own moves ----------------------------------------------------------------


def new(instance: str | None = None) -> ConsumerMember:
    m = ConsumerMember(
        group_instance_id=instance,
        rebalance_timeout_ms=30000,
        server_assignor="range",
        retry_backoff_ms=100,
        heartbeat_interval_ms=3000,
        now_ms=0,
    )
    m.subscribe(Subscription(topics=frozenset({"t"})))
    return m


def answer(
    m: ConsumerMember,
    plan: HeartbeatPlan,
    *,
    epoch: int = 1,
    assignment: frozenset[TopicPartition] | None = None,
    code: ErrorCode = ErrorCode.NONE,
    now: float = 0,
) -> Outcome:
    return m.on_heartbeat_response(
        sent_epoch=plan.member_epoch,
        error_code=code,
        member_id="m1",
        member_epoch=epoch,
        heartbeat_interval_ms=500,
        assignment=assignment,
        now_ms=now,
    )


def joined(m: ConsumerMember, assignment: frozenset[TopicPartition]) -> None:
    plan = m.heartbeat_due(0)
    assert plan is not None
    answer(m, plan, assignment=assignment)


def test_join_sends_everything_at_epoch_0_then_only_changes() -> None:
    m = new()
    assert m.state is S.UNJOINED
    plan = m.heartbeat_due(0)
    assert plan == HeartbeatPlan("", 0, None, 30000, frozenset({"t"}), None, "range", None)
    assert m.state is S.JOINING and m.heartbeat_due(0) is None  # one in flight at a time
    answer(m, plan, assignment=tps(0, 1))
    assert (m.member_id, m.member_epoch, m.state) == ("m1", 1, S.RECONCILING)
    assert m.heartbeat_interval_ms == 500 and m.next_heartbeat_ms == 500
    m.assigned(tps(0, 1))
    assert m.state is S.ACKNOWLEDGING and m.next_heartbeat_ms == 0
    ack = m.heartbeat_due(1)
    assert ack == HeartbeatPlan("m1", 1, None, None, None, None, None, tps(0, 1))
    answer(m, ack, assignment=tps(0, 1), now=1)
    assert m.state is S.STABLE
    assert m.heartbeat_due(100) is None  # not due before the interval
    plain = m.heartbeat_due(501)
    assert plain == HeartbeatPlan("m1", 1, None, None, None, None, None, None)


def test_a_join_without_partitions_is_stable_at_once() -> None:
    m = new()
    joined(m, frozenset())
    assert m.state is S.STABLE


def test_unsubscribed_members_do_not_join() -> None:
    m = new()
    m.subscribe(None)
    assert m.heartbeat_due(0) is None and m.state is S.UNJOINED


def test_regex_subscription_and_changes_are_sent() -> None:
    m = new()
    m.subscribe(Subscription(regex="t.*"))
    plan = m.heartbeat_due(0)
    assert plan is not None and (plan.topics, plan.regex) == (None, "t.*")
    answer(m, plan, assignment=frozenset())
    m.subscribe(Subscription(topics=frozenset({"u"})))
    change = m.heartbeat_due(0)
    assert change is not None and (change.topics, change.regex) == (frozenset({"u"}), "")


def test_reconciliation_revokes_first_and_reports_the_smaller_set() -> None:
    m = new()
    joined(m, tps(0, 1))
    m.assigned(tps(0, 1))
    plan = m.heartbeat_due(0)
    assert plan is not None
    answer(m, plan, epoch=2, assignment=tps(1, 2))
    assert m.state is S.RECONCILING and m.reconciliation() == (tps(0), tps(2))
    m.revoked(tps(0))
    assert m.owned == tps(1) and m.next_heartbeat_ms == 0
    report = m.heartbeat_due(0)
    assert report is not None and report.owned == tps(1)
    answer(m, report, epoch=2, assignment=tps(1, 2))
    assert m.state is S.RECONCILING  # still to take partition 2
    m.assigned(tps(2))
    assert m.state is S.ACKNOWLEDGING and m.reconciliation() == (frozenset(), frozenset())


def test_a_target_back_to_what_is_owned_ends_the_reconciliation() -> None:
    m = new()
    joined(m, tps(0))
    m.assigned(tps(0))
    ack = m.heartbeat_due(0)
    assert ack is not None
    answer(m, ack, epoch=2, assignment=tps(0, 1))
    assert m.state is S.RECONCILING
    beat = m.heartbeat_due(10_000)
    assert beat is not None
    answer(m, beat, epoch=3, assignment=tps(0))
    assert m.state is S.STABLE and m.reconciliation() == (frozenset(), frozenset())


def test_an_answer_for_an_epoch_the_member_left_is_ignored() -> None:
    m = new()
    joined(m, frozenset())
    plan = m.heartbeat_due(10_000)
    assert plan is not None
    m.fence()
    assert answer(m, plan, assignment=tps(0)) is Outcome.NONE
    assert m.state is S.FENCED and m.target is None


@pytest.mark.parametrize("code", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_members_lose_their_partitions_and_rejoin_at_epoch_0(code: ErrorCode) -> None:
    m = new()
    joined(m, tps(0))
    m.assigned(tps(0))
    plan = m.heartbeat_due(0)
    assert plan is not None
    answer(m, plan, code=code)
    assert m.state is S.FENCED and m.owned == frozenset() and m.member_epoch == 0
    assert m.heartbeat_due(10_000) is None  # not before the consumer released them
    assert m.take_lost(5) == tps(0)
    assert m.state is S.UNJOINED
    rejoin = m.heartbeat_due(5)
    assert rejoin is not None and (rejoin.member_id, rejoin.member_epoch) == ("", 0)


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ],
)
def test_coordinator_errors_find_it_again(code: ErrorCode) -> None:
    m = new()
    plan = m.heartbeat_due(0)
    assert plan is not None
    assert answer(m, plan, code=code, now=10) is Outcome.FIND_COORDINATOR
    assert m.state is S.UNJOINED and m.heartbeat_due(50) is None  # backoff
    assert m.heartbeat_due(110) is not None


def test_unreleased_instance_id_is_retried() -> None:
    m = new("i1")
    plan = m.heartbeat_due(0)
    assert plan is not None and plan.instance_id == "i1"
    assert answer(m, plan, code=ErrorCode.UNRELEASED_INSTANCE_ID) is Outcome.NONE
    assert m.state is S.UNJOINED and m.fatal_error is None


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.GROUP_ID_NOT_FOUND,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
    ],
)
def test_fatal_answers(code: ErrorCode) -> None:
    m = new()
    plan = m.heartbeat_due(0)
    assert plan is not None
    answer(m, plan, code=code)
    assert m.state is S.FATAL and m.fatal_error is code
    assert m.heartbeat_due(10_000) is None
    m.close()
    assert m.state is S.CLOSED


def test_a_failed_call_finds_the_coordinator_and_resends_everything() -> None:
    m = new()
    joined(m, tps(0))
    m.assigned(tps(0))
    plan = m.heartbeat_due(0)
    assert plan is not None
    assert m.on_call_failed(now_ms=0) is Outcome.FIND_COORDINATOR
    assert m.state is S.ACKNOWLEDGING and not m.in_flight
    again = m.heartbeat_due(100)
    assert again is not None and again.owned == tps(0) and again.topics == frozenset({"t"})


@pytest.mark.parametrize(("instance", "epoch"), [(None, -1), ("i1", -2)])
def test_leaving_sends_epoch_minus_1_or_minus_2(instance: str | None, epoch: int) -> None:
    m = new(instance)
    joined(m, tps(0))
    leave = m.leave(closing=False)
    assert leave is not None and (leave.member_id, leave.member_epoch) == ("m1", epoch)
    assert m.state is S.LEAVING and m.heartbeat_due(10_000) is None
    m.on_left()
    assert m.state is S.UNJOINED and m.subscription is None and m.member_id == ""


def test_closing_a_member_that_never_joined_sends_nothing() -> None:
    m = new()
    assert m.leave(closing=True) is None
    assert m.state is S.CLOSED


def test_closing_after_leaving() -> None:
    m = new()
    joined(m, frozenset())
    assert m.leave(closing=True) is not None
    m.on_left()
    assert m.state is S.CLOSED


def test_the_poll_timer_leaves_and_the_next_poll_rejoins() -> None:
    m = new()
    joined(m, tps(0))
    m.assigned(tps(0))
    leave = m.poll_expired()
    assert leave is not None and leave.member_epoch == -1
    assert m.state is S.STALE and m.heartbeat_due(10_000) is None
    assert m.take_lost(0) == tps(0) and m.state is S.UNJOINED
    assert m.poll_expired() is None


def test_illegal_moves_from_the_member_raise() -> None:
    m = new()
    m.close()
    with pytest.raises(IllegalStateTransition):
        m._move(S.JOINING)
