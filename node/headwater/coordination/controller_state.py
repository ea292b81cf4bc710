"""The controller's own state machine: inactive, active, stopped; and what each event may do.

A broker's :class:`~headwater.coordination.controller.Controller` moves ::

    INACTIVE --won the election--> ACTIVE
    ACTIVE --deposed, session expired, /controller taken by another--> INACTIVE
    ACTIVE --found /controller gone and won again--> ACTIVE (a new epoch)
    INACTIVE or ACTIVE --shutdown--> STOPPED (terminal)

Resigning is not a state of its own: it happens within one event on the
controller's event thread (close the senders, forget the view), so no other
event can observe it half done.

Everything here is pure: which events an inactive controller still handles
(:func:`admit`), what the ``/controller`` znode means for this broker
(:func:`after_controller_read`), when the automatic preferred leader election
is due (:func:`idle_wait_ms`, :func:`rebalance_due`, monotonic milliseconds passed in), and how a
failure while handling an event is answered (:func:`on_failure`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from kazoo.exceptions import KazooException

from headwater import errors
from headwater.coordination import events as ev


class IllegalControllerTransition(RuntimeError):
    """A controller state change the table does not allow: a controller bug."""


class ControllerState(enum.Enum):
    INACTIVE = "inactive"
    """Not the controller (or not yet): takes part in elections, handles nothing else."""
    ACTIVE = "active"
    """Holds ``/controller`` for one controller epoch; the view is loaded."""
    STOPPED = "stopped"
    """Shut down: the event thread has exited."""

    def transition_to(self, target: ControllerState) -> ControllerState:
        """Return ``target`` if the move is legal, else raise IllegalControllerTransition."""
        if target not in TRANSITIONS[self]:
            raise IllegalControllerTransition(f"controller {self.name} -> {target.name}")
        return target


TRANSITIONS: Mapping[ControllerState, frozenset[ControllerState]] = {
    ControllerState.INACTIVE: frozenset({ControllerState.ACTIVE, ControllerState.STOPPED}),
    # ACTIVE -> ACTIVE: an active controller that finds /controller gone (its session
    # expired and the news has not reached it yet) campaigns again and wins a new epoch.
    ControllerState.ACTIVE: frozenset(
        {ControllerState.ACTIVE, ControllerState.INACTIVE, ControllerState.STOPPED}
    ),
    ControllerState.STOPPED: frozenset(),
}
"""``state -> states it may move to``."""


class Admission(enum.Enum):
    PROCESS = "process"
    DROP = "drop"
    """A late watch from an earlier term: ignore it."""
    REFUSE = "refuse"
    """An RPC for the controller reached a broker that is not it: NotControllerError."""


_ALWAYS = (
    ev.Startup,
    ev.Shutdown,
    ev.Reelect,
    ev.ControllerChange,
    ev.Expire,
    ev.RegisterBrokerAndReelect,
)
_RPCS = (ev.ControlledShutdown, ev.PreferredReplicaElection, ev.AlterPartitionReassignments)


def admit(state: ControllerState, event: ev.ControllerEvent) -> Admission:
    """Whether a controller in ``state`` handles ``event``.

    Election and session events are handled until the controller stops;
    everything else needs an active controller.  RPC-driven events are
    refused otherwise, and watch- or timer-driven ones dropped.
    """
    if state is ControllerState.ACTIVE:
        return Admission.PROCESS
    if isinstance(event, _ALWAYS) and state is not ControllerState.STOPPED:
        return Admission.PROCESS
    if isinstance(event, _RPCS):
        return Admission.REFUSE
    return Admission.DROP


@dataclasses.dataclass(frozen=True)
class ElectionStep:
    """What to do after reading ``/controller``: resign first, then campaign, or neither."""

    resign: bool = False
    campaign: bool = False


def after_controller_read(
    state: ControllerState,
    broker_id: int,
    current: int | None,
    *,
    on_change: bool,
) -> ElectionStep:
    """Decide from the controller id in ``/controller`` (None: the znode is absent).

    ``on_change``: the read followed a watch on ``/controller``
    (ControllerChange); otherwise it is an election attempt (Startup,
    Reelect, a new session).  An active controller that sees another broker's
    id (or, on a change, no id) resigns; an absent znode starts a campaign.
    """
    active = state is ControllerState.ACTIVE
    if on_change:
        return ElectionStep(resign=active and current != broker_id, campaign=current is None)
    if current is None:
        return ElectionStep(campaign=True)
    return ElectionStep(resign=active and current != broker_id)


def idle_wait_ms(
    state: ControllerState,
    *,
    auto_rebalance: bool,
    next_rebalance_ms: float,
    now_ms: float,
    idle_poll_ms: float,
) -> float:
    """How long the event thread may wait for the next event before checking the timer."""
    if state is ControllerState.ACTIVE and auto_rebalance:
        return max(0.0, min(idle_poll_ms, next_rebalance_ms - now_ms))
    return idle_poll_ms


def rebalance_due(state: ControllerState, *, next_rebalance_ms: float, now_ms: float) -> bool:
    """Whether an idle event thread should run the automatic preferred leader election now."""
    return state is ControllerState.ACTIVE and now_ms >= next_rebalance_ms


@dataclasses.dataclass(frozen=True)
class FailureOutcome:
    """How the controller answers an exception raised while handling an event."""

    error: BaseException
    """Set on the event's future, if it has one."""
    resign: bool = False
    """Deposed: resign and take part in a new election."""
    unexpected: bool = False
    """Not a known failure: logged with its traceback."""


def on_failure(exc: Exception) -> FailureOutcome:
    """Map an exception to the RPC's error and whether to resign.

    A fenced write means another controller was elected (resign, re-elect);
    a ZooKeeper error answers NotControllerError, so the caller tries again.
    """
    if isinstance(exc, errors.StaleControllerEpochError):
        return FailureOutcome(errors.NotControllerError(str(exc)), resign=True)
    if isinstance(exc, errors.HeadwaterError):
        return FailureOutcome(exc)
    if isinstance(exc, KazooException):
        return FailureOutcome(errors.NotControllerError(f"ZooKeeper unavailable: {exc!r}"))
    return FailureOutcome(errors.UnknownServerError(repr(exc)), unexpected=True)
