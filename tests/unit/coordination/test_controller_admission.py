"""Event admission: election and session events are always handled; everything else needs
an active controller, RPC-driven events being refused and watch- or timer-driven ones
dropped when inactive."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from headwater.coordination import events as ev
from headwater.coordination.controller_state import Admission, ControllerState, admit

ALWAYS = [
    ev.Startup(),
    ev.Shutdown(),
    ev.Reelect(),
    ev.ControllerChange(),
    ev.Expire(),
    ev.RegisterBrokerAndReelect(),
]
RPCS = [
    ev.ControlledShutdown(1, 100, Future()),
    ev.PreferredReplicaElection(),
    ev.PreferredReplicaElection(from_zk=True),
]
WATCHES = [
    ev.BrokerChange(),
    ev.TopicChange(),
    ev.PartitionModifications("t"),
    ev.TopicDeletion(),
    ev.IsrChangeNotification(),
    ev.AutoPreferredReplicaLeaderElection(),
]


@pytest.mark.parametrize("event", ALWAYS + RPCS + WATCHES, ids=repr)
def test_an_active_controller_handles_everything(event: ev.ControllerEvent) -> None:
    assert admit(ControllerState.ACTIVE, event) is Admission.PROCESS


@pytest.mark.parametrize("event", ALWAYS, ids=repr)
def test_election_and_session_events_are_handled_when_inactive(event: ev.ControllerEvent) -> None:
    assert admit(ControllerState.INACTIVE, event) is Admission.PROCESS


@pytest.mark.parametrize("state", [ControllerState.INACTIVE, ControllerState.STOPPED])
@pytest.mark.parametrize("event", RPCS, ids=repr)
def test_rpcs_to_a_controller_not_active_are_refused(
    state: ControllerState, event: ev.ControllerEvent
) -> None:
    assert admit(state, event) is Admission.REFUSE


@pytest.mark.parametrize("state", [ControllerState.INACTIVE, ControllerState.STOPPED])
@pytest.mark.parametrize("event", WATCHES, ids=repr)
def test_late_watches_are_dropped_when_not_active(
    state: ControllerState, event: ev.ControllerEvent
) -> None:
    assert admit(state, event) is Admission.DROP


@pytest.mark.parametrize("event", ALWAYS, ids=repr)
def test_a_stopped_controller_takes_part_in_nothing(event: ev.ControllerEvent) -> None:
    assert admit(ControllerState.STOPPED, event) is Admission.DROP
