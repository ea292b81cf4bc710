"""Broker scaling on Kubernetes: what to do next, decided without I/O.

Strimzi users expect that changing the broker count rebalances the cluster,
and that a scale-down never deletes a broker that still holds replicas.  The
chart writes the broker count the user wants as the StatefulSet annotation
``headwater.io/desired-brokers``; the operator owns ``spec.replicas`` and
moves it there one safe step at a time:

* **up** — raise ``spec.replicas`` (:class:`SetReplicas`), wait until every
  broker is Ready and registered, then (with auto-rebalance on) plan and
  execute a throttled rebalance over all brokers (:class:`StartRebalance`),
  wait until no partition is being reassigned, and verify, which removes the
  throttle (:class:`FinishReassignment`);
* **down** — the brokers to be removed are the highest ordinals (a
  StatefulSet only ever removes those).  While any of them holds a replica the
  scale-down is refused (:class:`Refuse`: an Event and a condition), unless
  drain-on-scale-down is on, in which case their replicas are moved onto the
  remaining brokers first (:class:`StartDrain`).  Once they hold nothing —
  drained by the operator or by the user (``headwater cluster drain``) — the
  StatefulSet shrinks.

:func:`decide` maps one :class:`Observed` snapshot (the persisted phase
included) to a :class:`Decision`: the next phase and one action.  The adapter
(:mod:`headwater_operator.scaling_kube`) observes, performs the action,
records the phase, and calls again; every action is safe to repeat after a
crash, because the next observation shows what actually happened.  Phases
follow :data:`TRANSITIONS`; :func:`transition_to` refuses any other move.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple


class ScalingPhase(enum.StrEnum):
    STEADY = "Steady"
    """``spec.replicas`` is the desired count and nothing moves."""
    SCALING_UP = "ScalingUp"
    """``spec.replicas`` raised; waiting for every broker to be Ready and registered."""
    REBALANCING = "Rebalancing"
    """A throttled reassignment onto the new brokers runs."""
    SCALE_DOWN_REFUSED = "ScaleDownRefused"
    """Brokers to be removed hold replicas and draining is off: nothing shrinks."""
    DRAINING = "Draining"
    """A throttled reassignment moves every replica off the brokers to be removed."""
    SCALING_DOWN = "ScalingDown"
    """``spec.replicas`` lowered; waiting for the removed pods to go."""


_P = ScalingPhase

TRANSITIONS: Mapping[ScalingPhase, frozenset[ScalingPhase]] = {
    _P.STEADY: frozenset(
        {_P.STEADY, _P.SCALING_UP, _P.SCALE_DOWN_REFUSED, _P.DRAINING, _P.SCALING_DOWN}
    ),
    _P.SCALING_UP: frozenset(
        {
            _P.SCALING_UP,
            _P.REBALANCING,
            _P.STEADY,
            _P.SCALE_DOWN_REFUSED,
            _P.DRAINING,
            _P.SCALING_DOWN,
        }
    ),
    _P.REBALANCING: frozenset({_P.REBALANCING, _P.STEADY}),
    _P.SCALE_DOWN_REFUSED: frozenset(
        {_P.SCALE_DOWN_REFUSED, _P.STEADY, _P.SCALING_UP, _P.DRAINING, _P.SCALING_DOWN}
    ),
    _P.DRAINING: frozenset({_P.DRAINING, _P.SCALING_DOWN, _P.STEADY}),
    _P.SCALING_DOWN: frozenset(
        {_P.SCALING_DOWN, _P.STEADY, _P.SCALING_UP, _P.SCALE_DOWN_REFUSED, _P.DRAINING}
    ),
}
"""Each phase's allowed next phases (staying put included).  A running
reassignment (REBALANCING, DRAINING) is never abandoned for a new goal: it
completes first, then the goal is looked at again."""

MOVING_PHASES = frozenset({_P.REBALANCING, _P.DRAINING})
"""Phases in which replicas move: no roll starts then.  (Rolls and scaling steps also
never run at the same instant; a reassignment waits for pending restarts, and a roll
waits for a reassignment, so the two never overlap.)"""


class IllegalScalingTransition(ValueError):
    """A move the transition table does not allow (a bug in :func:`decide`)."""


def transition_to(current: ScalingPhase, new: ScalingPhase) -> ScalingPhase:
    """``new`` if the table allows moving there from ``current``; raises otherwise."""
    if new not in TRANSITIONS[current]:
        raise IllegalScalingTransition(f"illegal scaling transition {current} -> {new}")
    return new


# -- what the adapter observes ----------------------------------------------------------


class Observed(NamedTuple):
    """One snapshot of the StatefulSet, its pods and the cluster.

    Brokers are identified by their pod's ordinal (``--broker-id-from-hostname``).
    """

    phase: ScalingPhase
    """The phase recorded by the previous decision (STEADY when none was)."""
    desired: int
    """``headwater.io/desired-brokers`` (``spec.replicas`` when the annotation is absent)."""
    spec_replicas: int
    pods_present: frozenset[int]
    """Ordinals of the pods that exist (terminating ones included)."""
    pods_ready: frozenset[int]
    registered: frozenset[int]
    """Brokers registered in ZooKeeper."""
    hosted: Mapping[int, int]
    """Replicas each broker holds (target replicas of running moves included)."""
    reassigning: int
    """Partitions being reassigned now (``list_partition_reassignments``)."""
    auto_rebalance: bool = True
    drain_on_scale_down: bool = False
    restarts_pending: bool = False
    """A pod awaits a roll restart: no reassignment starts before the roll."""


def is_quiet(*, phase: ScalingPhase, desired: int, spec_replicas: int) -> bool:
    """Nothing to do whatever the cluster says: the adapter need not ask the cluster.

    (STEADY with the StatefulSet at the desired count: :func:`decide` then holds
    for every registered/hosted/reassigning value.)
    """
    return phase is _P.STEADY and desired == spec_replicas


# -- what the adapter does ----------------------------------------------------------------


class Hold(NamedTuple):
    """Do nothing now; look again later."""

    reason: str


class SetReplicas(NamedTuple):
    """Patch the StatefulSet's ``spec.replicas``."""

    replicas: int


class StartRebalance(NamedTuple):
    """Plan a rebalance over ``brokers`` and execute it, throttled."""

    brokers: tuple[int, ...]


class StartDrain(NamedTuple):
    """Plan moving every replica off ``leaving`` onto ``remaining`` and execute it, throttled."""

    leaving: tuple[int, ...]
    remaining: tuple[int, ...]


class FinishReassignment(NamedTuple):
    """Verify the reassignment (which removes its throttle); then set ``then_replicas``."""

    then_replicas: int | None = None


class Refuse(NamedTuple):
    """Refuse the scale-down: a Warning Event and a False condition, nothing changed."""

    reason: str


Action = Hold | SetReplicas | StartRebalance | StartDrain | FinishReassignment | Refuse


class Decision(NamedTuple):
    phase: ScalingPhase
    action: Action
    message: str
    """One line for the status and, on a phase change, the Event."""


# -- the decisions ------------------------------------------------------------------------


def _ids(ids: tuple[int, ...] | list[int]) -> str:
    return ", ".join(map(str, ids))


def holders(observed: Observed, leaving: range) -> dict[int, int]:
    """The brokers of ``leaving`` holding replicas, with how many."""
    return {b: observed.hosted.get(b, 0) for b in leaving if observed.hosted.get(b, 0) > 0}


def refusal_message(held: Mapping[int, int], *, desired: int, current: int) -> str:
    """Why scaling from ``current`` to ``desired`` brokers is refused, and the ways through."""
    listed = ", ".join(
        f"broker {b} holds {n} replica{'s' if n != 1 else ''}" for b, n in held.items()
    )
    return (
        f"refusing to scale the brokers down from {current} to {desired}: {listed}; "
        f"drain them first (headwater cluster drain BROKER), or set "
        f"brokers.drainOnScaleDown=true (annotation headwater.io/drain-on-scale-down) "
        f"to let the operator drain them"
    )


def _goal(observed: Observed, *, entering_from: ScalingPhase) -> Decision:
    """Start towards ``desired`` from a quiet moment (no reassignment of ours running)."""
    o = observed
    if o.desired < 1:
        return Decision(
            _P.STEADY,
            Hold(f"desired broker count {o.desired} is not valid"),
            f"ignoring desired broker count {o.desired}: at least 1 broker is needed",
        )
    if o.desired > o.spec_replicas:
        return Decision(
            _P.SCALING_UP,
            SetReplicas(o.desired),
            f"scaling the brokers up from {o.spec_replicas} to {o.desired}",
        )
    if o.desired < o.spec_replicas:
        leaving = range(o.desired, o.spec_replicas)
        held = holders(o, leaving)
        if not held:
            return Decision(
                _P.SCALING_DOWN,
                SetReplicas(o.desired),
                f"scaling the brokers down from {o.spec_replicas} to {o.desired}: "
                f"brokers {_ids(list(leaving))} hold no replicas",
            )
        if o.drain_on_scale_down:
            if o.restarts_pending or o.reassigning:
                why = "a roll is pending" if o.restarts_pending else "a reassignment runs"
                return Decision(
                    _P.STEADY,
                    Hold(f"draining waits: {why}"),
                    f"draining brokers {_ids(list(leaving))} waits: {why}",
                )
            return Decision(
                _P.DRAINING,
                StartDrain(tuple(leaving), tuple(range(o.desired))),
                f"draining brokers {_ids(list(leaving))} before scaling down to {o.desired}",
            )
        message = refusal_message(held, desired=o.desired, current=o.spec_replicas)
        if entering_from is _P.SCALE_DOWN_REFUSED:
            return Decision(_P.SCALE_DOWN_REFUSED, Hold(message), message)
        return Decision(_P.SCALE_DOWN_REFUSED, Refuse(message), message)
    return Decision(_P.STEADY, Hold("nothing to do"), f"{o.spec_replicas} brokers, as desired")


def _scaling_up(o: Observed) -> Decision:
    if o.desired != o.spec_replicas:
        return _goal(o, entering_from=_P.SCALING_UP)
    wanted = range(o.spec_replicas)
    missing = [b for b in wanted if b not in o.pods_ready or b not in o.registered]
    if missing:
        why = f"waiting for brokers {_ids(missing)} to be Ready and registered"
        return Decision(_P.SCALING_UP, Hold(why), why)
    if not o.auto_rebalance:
        return Decision(
            _P.STEADY,
            Hold("auto-rebalance is off"),
            f"{o.spec_replicas} brokers ready; auto-rebalance is off, nothing moved "
            f"(headwater cluster rebalance moves replicas onto the new brokers)",
        )
    if o.restarts_pending or o.reassigning:
        why = "a roll is pending" if o.restarts_pending else "another reassignment runs"
        return Decision(_P.SCALING_UP, Hold(f"rebalancing waits: {why}"), f"rebalance waits: {why}")
    return Decision(
        _P.REBALANCING,
        StartRebalance(tuple(wanted)),
        f"rebalancing onto {o.spec_replicas} brokers",
    )


def _rebalancing(o: Observed) -> Decision:
    if o.reassigning:
        why = f"{o.reassigning} partitions still moving"
        return Decision(_P.REBALANCING, Hold(why), f"rebalancing: {why}")
    return Decision(_P.STEADY, FinishReassignment(), "rebalance complete, throttle removed")


def _draining(o: Observed) -> Decision:
    if o.reassigning:
        why = f"{o.reassigning} partitions still moving"
        return Decision(_P.DRAINING, Hold(why), f"draining: {why}")
    if o.desired >= o.spec_replicas:
        return Decision(
            _P.STEADY,
            FinishReassignment(),
            f"drain finished; scale-down withdrawn ({o.desired} brokers desired)",
        )
    leaving = range(o.desired, o.spec_replicas)
    held = holders(o, leaving)
    if held:
        # Replicas came back (a topic created meanwhile) or a move failed: end this
        # reassignment and let STEADY drain again.
        listed = ", ".join(f"broker {b}: {n}" for b, n in held.items())
        return Decision(
            _P.STEADY,
            FinishReassignment(),
            f"drain ended with replicas left ({listed}); draining again",
        )
    return Decision(
        _P.SCALING_DOWN,
        FinishReassignment(then_replicas=o.desired),
        f"brokers {_ids(list(leaving))} drained; scaling down to {o.desired}",
    )


def _scaling_down(o: Observed) -> Decision:
    if o.desired != o.spec_replicas:
        return _goal(o, entering_from=_P.SCALING_DOWN)
    gone = [b for b in sorted(o.pods_present) if b >= o.spec_replicas]
    if gone:
        why = f"waiting for pods of brokers {_ids(gone)} to terminate"
        return Decision(_P.SCALING_DOWN, Hold(why), why)
    return Decision(_P.STEADY, Hold("scaled down"), f"scaled down to {o.spec_replicas} brokers")


def decide(observed: Observed) -> Decision:
    """The next phase and action for ``observed`` (see the module docstring).

    The returned phase is always allowed from ``observed.phase`` by
    :data:`TRANSITIONS` (checked here, so a bug raises rather than acts).
    """
    phase = observed.phase
    if phase is _P.SCALING_UP:
        decision = _scaling_up(observed)
    elif phase is _P.REBALANCING:
        decision = _rebalancing(observed)
    elif phase is _P.DRAINING:
        decision = _draining(observed)
    elif phase is _P.SCALING_DOWN:
        decision = _scaling_down(observed)
    else:  # STEADY, SCALE_DOWN_REFUSED
        decision = _goal(observed, entering_from=phase)
        if phase is _P.SCALE_DOWN_REFUSED and decision.phase is _P.STEADY:
            decision = decision._replace(
                message=f"scale-down withdrawn: {observed.spec_replicas} brokers, as desired"
            )
    transition_to(phase, decision.phase)
    return decision
