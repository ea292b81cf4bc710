"""Broker scaling decisions (headwater_operator.scaling): the transition table and every
decision, one test per case, no I/O.

The table is checked both ways: every (from, to) pair it lists is accepted by
``transition_to`` and every other pair is refused; and every decision below
is checked to be a legal move from the phase it starts in (``decide`` raises
otherwise), so the table and the decisions cannot drift apart.
"""

from __future__ import annotations

import itertools

import pytest
from headwater_operator import scaling
from headwater_operator.scaling import (
    Decision,
    FinishReassignment,
    Hold,
    IllegalScalingTransition,
    Observed,
    Refuse,
    ScalingPhase,
    SetReplicas,
    StartDrain,
    StartRebalance,
    decide,
    transition_to,
)

P = ScalingPhase


def obs(
    phase: ScalingPhase = P.STEADY,
    *,
    desired: int = 3,
    spec: int = 3,
    present: int | None = None,
    ready: int | None = None,
    registered: int | None = None,
    hosted: dict[int, int] | None = None,
    reassigning: int = 0,
    auto_rebalance: bool = True,
    drain: bool = False,
    restarts_pending: bool = False,
) -> Observed:
    """Pods 0..present-1 exist, 0..ready-1 are Ready, 0..registered-1 registered."""
    present = spec if present is None else present
    ready = present if ready is None else ready
    registered = ready if registered is None else registered
    return Observed(
        phase=phase,
        desired=desired,
        spec_replicas=spec,
        pods_present=frozenset(range(present)),
        pods_ready=frozenset(range(ready)),
        registered=frozenset(range(registered)),
        hosted=hosted if hosted is not None else {b: 4 for b in range(min(spec, 3))},
        reassigning=reassigning,
        auto_rebalance=auto_rebalance,
        drain_on_scale_down=drain,
        restarts_pending=restarts_pending,
    )


# -- the table ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [(a, b) for a in P for b in P if b in scaling.TRANSITIONS[a]],
    ids=str,
)
def test_listed_transition_is_allowed(old: ScalingPhase, new: ScalingPhase) -> None:
    assert transition_to(old, new) is new


@pytest.mark.parametrize(
    ("old", "new"),
    [(a, b) for a in P for b in P if b not in scaling.TRANSITIONS[a]],
    ids=str,
)
def test_unlisted_transition_is_refused(old: ScalingPhase, new: ScalingPhase) -> None:
    with pytest.raises(IllegalScalingTransition, match=f"{old} -> {new}"):
        transition_to(old, new)


def test_every_phase_has_a_row_and_may_stay() -> None:
    assert set(scaling.TRANSITIONS) == set(P)
    assert all(p in scaling.TRANSITIONS[p] for p in P)


def test_a_running_reassignment_is_never_abandoned() -> None:
    assert scaling.TRANSITIONS[P.REBALANCING] == {P.REBALANCING, P.STEADY}
    assert scaling.TRANSITIONS[P.DRAINING] == {P.DRAINING, P.SCALING_DOWN, P.STEADY}


def test_no_roll_while_the_cluster_changes_shape() -> None:
    assert {P.REBALANCING, P.DRAINING} == scaling.MOVING_PHASES


# -- STEADY ---------------------------------------------------------------------------------


def test_steady_as_desired_holds() -> None:
    d = decide(obs())
    assert d.phase is P.STEADY and isinstance(d.action, Hold)


def test_steady_scale_up_raises_replicas() -> None:
    assert decide(obs(desired=5)) == Decision(
        P.SCALING_UP, SetReplicas(5), "scaling the brokers up from 3 to 5"
    )


def test_steady_scale_down_of_empty_brokers_shrinks_at_once() -> None:
    d = decide(obs(desired=3, spec=5, hosted={0: 4, 1: 4, 2: 4, 3: 0}))
    assert d.phase is P.SCALING_DOWN and d.action == SetReplicas(3)
    assert "brokers 3, 4 hold no replicas" in d.message


def test_steady_scale_down_of_loaded_brokers_is_refused_with_the_ways_through() -> None:
    d = decide(obs(desired=3, spec=5, hosted={0: 4, 3: 2, 4: 1}))
    assert d.phase is P.SCALE_DOWN_REFUSED and isinstance(d.action, Refuse)
    assert "broker 3 holds 2 replicas, broker 4 holds 1 replica" in d.action.reason
    assert "headwater cluster drain" in d.action.reason
    assert "drainOnScaleDown" in d.action.reason and d.message == d.action.reason


def test_steady_scale_down_with_drain_on_starts_a_drain_of_the_highest_ordinals() -> None:
    d = decide(obs(desired=2, spec=4, hosted={3: 1}, drain=True))
    assert d.phase is P.DRAINING and d.action == StartDrain((2, 3), (0, 1))


@pytest.mark.parametrize(
    ("pending", "reassigning", "why"),
    [(True, 0, "a roll is pending"), (False, 2, "a reassignment runs")],
)
def test_drain_waits_for_a_roll_or_another_reassignment(
    pending: bool, reassigning: int, why: str
) -> None:
    d = decide(
        obs(
            desired=2,
            spec=3,
            hosted={2: 1},
            drain=True,
            restarts_pending=pending,
            reassigning=reassigning,
        )
    )
    assert d.phase is P.STEADY and d.action == Hold(f"draining waits: {why}")


def test_steady_scale_up_does_not_wait_for_a_pending_roll() -> None:
    assert decide(obs(desired=4, restarts_pending=True)).action == SetReplicas(4)


def test_an_invalid_desired_count_changes_nothing() -> None:
    d = decide(obs(desired=0))
    assert d.phase is P.STEADY and isinstance(d.action, Hold) and "at least 1" in d.message


# -- SCALING_UP -----------------------------------------------------------------------------


def test_scaling_up_waits_for_the_new_pod_to_be_ready() -> None:
    d = decide(obs(P.SCALING_UP, desired=4, spec=4, present=4, ready=3))
    assert d == Decision(
        P.SCALING_UP,
        Hold("waiting for brokers 3 to be Ready and registered"),
        "waiting for brokers 3 to be Ready and registered",
    )


def test_scaling_up_waits_for_the_new_broker_to_register() -> None:
    d = decide(obs(P.SCALING_UP, desired=4, spec=4, ready=4, registered=3))
    assert d.phase is P.SCALING_UP and isinstance(d.action, Hold) and "3" in d.message


def test_scaling_up_rebalances_over_every_broker_once_all_are_up() -> None:
    d = decide(obs(P.SCALING_UP, desired=4, spec=4))
    assert d.phase is P.REBALANCING and d.action == StartRebalance((0, 1, 2, 3))


def test_scaling_up_without_auto_rebalance_ends_steady_and_says_how_to_rebalance() -> None:
    d = decide(obs(P.SCALING_UP, desired=4, spec=4, auto_rebalance=False))
    assert d.phase is P.STEADY and isinstance(d.action, Hold)
    assert "headwater cluster rebalance" in d.message


@pytest.mark.parametrize(("pending", "reassigning"), [(True, 0), (False, 1)])
def test_rebalance_waits_for_a_pending_roll_or_another_reassignment(
    pending: bool, reassigning: int
) -> None:
    d = decide(
        obs(P.SCALING_UP, desired=4, spec=4, restarts_pending=pending, reassigning=reassigning)
    )
    assert d.phase is P.SCALING_UP and isinstance(d.action, Hold)


def test_scaling_up_further_raises_again() -> None:
    d = decide(obs(P.SCALING_UP, desired=6, spec=4))
    assert d.phase is P.SCALING_UP and d.action == SetReplicas(6)


def test_scaling_up_withdrawn_shrinks_back_when_the_new_brokers_are_empty() -> None:
    d = decide(obs(P.SCALING_UP, desired=3, spec=4, ready=3))
    assert d.phase is P.SCALING_DOWN and d.action == SetReplicas(3)


def test_scaling_up_withdrawn_is_refused_when_the_new_broker_got_replicas() -> None:
    d = decide(obs(P.SCALING_UP, desired=3, spec=4, hosted={3: 1}))
    assert d.phase is P.SCALE_DOWN_REFUSED and isinstance(d.action, Refuse)


def test_scaling_up_withdrawn_drains_when_drain_is_on() -> None:
    d = decide(obs(P.SCALING_UP, desired=3, spec=4, hosted={3: 1}, drain=True))
    assert d.phase is P.DRAINING and d.action == StartDrain((3,), (0, 1, 2))


# -- REBALANCING ----------------------------------------------------------------------------


def test_rebalancing_holds_while_partitions_move() -> None:
    d = decide(obs(P.REBALANCING, desired=4, spec=4, reassigning=5))
    assert d.phase is P.REBALANCING and d.action == Hold("5 partitions still moving")


def test_rebalancing_done_verifies_removes_the_throttle_and_is_steady() -> None:
    d = decide(obs(P.REBALANCING, desired=4, spec=4))
    assert d.phase is P.STEADY and d.action == FinishReassignment()


def test_a_new_goal_during_a_rebalance_waits_for_it_to_finish() -> None:
    moving = decide(obs(P.REBALANCING, desired=2, spec=4, reassigning=1))
    assert moving.phase is P.REBALANCING and isinstance(moving.action, Hold)
    done = decide(obs(P.REBALANCING, desired=2, spec=4))
    assert done.phase is P.STEADY and done.action == FinishReassignment()


# -- SCALE_DOWN_REFUSED ---------------------------------------------------------------------


def test_refused_stays_refused_without_a_second_event() -> None:
    d = decide(obs(P.SCALE_DOWN_REFUSED, desired=3, spec=4, hosted={3: 2}))
    assert d.phase is P.SCALE_DOWN_REFUSED and isinstance(d.action, Hold)
    assert "broker 3 holds 2 replicas" in d.message


def test_refused_then_drained_by_the_user_shrinks() -> None:
    d = decide(obs(P.SCALE_DOWN_REFUSED, desired=3, spec=4, hosted={0: 4, 3: 0}))
    assert d.phase is P.SCALING_DOWN and d.action == SetReplicas(3)


def test_refused_then_drain_turned_on_drains() -> None:
    d = decide(obs(P.SCALE_DOWN_REFUSED, desired=3, spec=4, hosted={3: 2}, drain=True))
    assert d.phase is P.DRAINING and d.action == StartDrain((3,), (0, 1, 2))


def test_refused_then_withdrawn_is_steady() -> None:
    d = decide(obs(P.SCALE_DOWN_REFUSED, desired=4, spec=4, hosted={3: 2}))
    assert d.phase is P.STEADY and d.message.startswith("scale-down withdrawn")


def test_refused_then_scaled_up_instead_raises() -> None:
    d = decide(obs(P.SCALE_DOWN_REFUSED, desired=5, spec=4))
    assert d.phase is P.SCALING_UP and d.action == SetReplicas(5)


# -- DRAINING -------------------------------------------------------------------------------


def test_draining_holds_while_partitions_move() -> None:
    d = decide(obs(P.DRAINING, desired=3, spec=4, hosted={3: 1}, reassigning=1, drain=True))
    assert d.phase is P.DRAINING and isinstance(d.action, Hold)


def test_drained_brokers_finish_then_shrink() -> None:
    d = decide(obs(P.DRAINING, desired=3, spec=4, hosted={0: 4, 3: 0}, drain=True))
    assert d.phase is P.SCALING_DOWN and d.action == FinishReassignment(then_replicas=3)


def test_drain_ending_with_replicas_left_finishes_and_goes_back_to_steady() -> None:
    d = decide(obs(P.DRAINING, desired=3, spec=4, hosted={3: 1}, drain=True))
    assert d.phase is P.STEADY and d.action == FinishReassignment()
    assert "broker 3: 1" in d.message
    again = decide(obs(P.STEADY, desired=3, spec=4, hosted={3: 1}, drain=True))
    assert again.phase is P.DRAINING


def test_drain_finished_after_the_scale_down_was_withdrawn_is_steady() -> None:
    d = decide(obs(P.DRAINING, desired=4, spec=4, hosted={}, drain=True))
    assert d.phase is P.STEADY and d.action == FinishReassignment()


# -- SCALING_DOWN ---------------------------------------------------------------------------


def test_scaling_down_waits_for_the_removed_pods_to_go() -> None:
    d = decide(obs(P.SCALING_DOWN, desired=3, spec=3, present=5))
    assert d.phase is P.SCALING_DOWN and d.action == Hold(
        "waiting for pods of brokers 3, 4 to terminate"
    )


def test_scaling_down_done_is_steady() -> None:
    d = decide(obs(P.SCALING_DOWN, desired=3, spec=3))
    assert d.phase is P.STEADY and d.message == "scaled down to 3 brokers"


def test_scaling_down_then_up_again_raises() -> None:
    d = decide(obs(P.SCALING_DOWN, desired=4, spec=3, present=4))
    assert d.phase is P.SCALING_UP and d.action == SetReplicas(4)


def test_scaling_down_further_with_loaded_brokers_is_refused() -> None:
    d = decide(obs(P.SCALING_DOWN, desired=2, spec=3, hosted={2: 3}))
    assert d.phase is P.SCALE_DOWN_REFUSED and isinstance(d.action, Refuse)


def test_scaling_down_further_with_drain_on_drains() -> None:
    d = decide(obs(P.SCALING_DOWN, desired=2, spec=3, hosted={2: 3}, drain=True))
    assert d.phase is P.DRAINING and d.action == StartDrain((2,), (0, 1))


# -- every decision is a legal move ---------------------------------------------------------


def test_decide_only_makes_legal_moves_over_a_grid_of_observations() -> None:
    """A sweep over phases and small clusters: decide never raises and never leaves the table."""
    seen: set[tuple[ScalingPhase, ScalingPhase]] = set()
    grid = itertools.product(
        P, range(0, 5), range(1, 5), range(0, 5), (0, 2), (0, 1), (False, True), (False, True)
    )
    for phase, desired, spec, ready, held, reassigning, drain, auto in grid:
        o = obs(
            phase,
            desired=desired,
            spec=spec,
            present=max(spec, ready),
            ready=ready,
            hosted={b: held for b in range(5)},
            reassigning=reassigning,
            drain=drain,
            auto_rebalance=auto,
        )
        d = decide(o)
        assert d.phase in scaling.TRANSITIONS[phase]
        if isinstance(d.action, SetReplicas):
            assert d.action.replicas == desired >= 1
        seen.add((phase, d.phase))
    # Every edge of the table is exercised by some observation.
    table = {(a, b) for a in P for b in scaling.TRANSITIONS[a]}
    assert table - seen == set()


@pytest.mark.parametrize("spec", [0, 1, 3])
def test_a_quiet_statefulset_holds_whatever_the_cluster_says(spec: int) -> None:
    assert scaling.is_quiet(phase=P.STEADY, desired=spec, spec_replicas=spec)
    for hosted, reassigning, ready in itertools.product(({}, {0: 3, 5: 1}), (0, 7), (0, spec)):
        d = decide(
            obs(desired=spec, spec=spec, ready=ready, hosted=hosted, reassigning=reassigning)
        )
        assert d.phase is P.STEADY and isinstance(d.action, Hold)
    assert not scaling.is_quiet(phase=P.STEADY, desired=4, spec_replicas=3)
    assert not scaling.is_quiet(phase=P.REBALANCING, desired=3, spec_replicas=3)
