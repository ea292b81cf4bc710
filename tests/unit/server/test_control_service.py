"""ControlService, the servicer of what the controller tells a broker: LeaderAndIsr,
StopReplica and UpdateMetadata applied to a real ReplicaManager (over logs in a temporary
directory) and MetadataCache, fenced by the controller and broker epochs and the
CLUSTER_ACTION ACL; ControlledShutdown answered only by the active controller.

The coordinator is a fake (the controller's side is tested in tests/unit/coordination).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, cast

import pytest
from headwater import __version__, errors
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import BrokerRegistration
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context, broker_to_proto, partition_state_to_proto
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.hosted import RoleChanges
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.control import ControlService
from headwater.v1 import control_pb2

from .conftest import TP, Harness

NO_CONTEXT = cast("Context", None)  # read only by an authorizer that is on
LEADER = BrokerRegistration(broker_id=1, host="127.0.0.1", port=9093, version=__version__)


class FakeController:
    def __init__(self, remaining: list[tuple[str, int]], error: Exception | None) -> None:
        self.remaining = remaining
        self.error = error
        self.calls: list[tuple[int, int]] = []

    def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        self.calls.append((broker_id, broker_epoch))
        if self.error is not None:
            raise self.error
        return self.remaining


class FakeCoordinator:
    """What the servicer reads of the broker's ZooKeeper coordinator."""

    def __init__(
        self,
        *,
        broker_epoch: int = -1,
        is_controller: bool = False,
        remaining: list[tuple[str, int]] | None = None,
        error: Exception | None = None,
    ) -> None:
        self.broker_epoch = broker_epoch
        self.is_controller = is_controller
        self.controller = FakeController(remaining or [], error)


class DenyAll(RequestAuthorizer):
    def cluster(self, context: Context, operation: AclOperation) -> bool:
        assert operation is AclOperation.CLUSTER_ACTION
        return False


class Service:
    """The servicer and what it called back."""

    def __init__(
        self,
        harness: Harness,
        *,
        coordinator: FakeCoordinator | None = None,
        authz: RequestAuthorizer | None = None,
    ) -> None:
        self.harness = harness
        self.metadata = MetadataCache()
        self.changed = asyncio.Condition()
        self.leaders: list[Mapping[int, BrokerRegistration]] = []
        self.role_changes: list[RoleChanges] = []
        self.applied: list[tuple[str, int]] = []
        extra: dict[str, Any] = {} if authz is None else {"authz": authz}
        self.coordinator = coordinator
        self.service = ControlService(
            replicas=harness.manager,
            metadata=self.metadata,
            metadata_changed=self.changed,
            metrics=BrokerMetrics(),
            coordinator=lambda: cast("BrokerCoordinator | None", self.coordinator),
            on_leaders=self.leaders.append,
            on_role_changes=self.role_changes.append,
            on_applied=self._on_applied,
            **extra,
        )

    async def _on_applied(self, rpc: str, broker_epoch: int) -> None:
        self.applied.append((rpc, broker_epoch))

    def leader_and_isr(
        self, *, leader: int, epoch: int = 1, controller_epoch: int = 1, broker_epoch: int = 7
    ) -> control_pb2.LeaderAndIsrRequest:
        state = self.harness.state(leader=leader, isr=(0, 1), epoch=epoch)
        return control_pb2.LeaderAndIsrRequest(
            controller_id=2,
            controller_epoch=controller_epoch,
            broker_epoch=broker_epoch,
            partition_states=[partition_state_to_proto(state, controller_epoch=controller_epoch)],
            live_leaders=[broker_to_proto(LEADER)],
        )


def test_leader_and_isr_makes_this_broker_leader_and_reports_the_changes(
    harness: Harness,
) -> None:
    async def scenario() -> None:
        s = Service(harness)
        response = await s.service.LeaderAndIsr(s.leader_and_isr(leader=0), NO_CONTEXT)
        assert response.error == ErrorCode.NONE
        assert [(p.topic, p.partition, p.error) for p in response.partitions] == [
            (TP.topic, TP.partition, ErrorCode.NONE)
        ]
        assert harness.manager.partitions[TP].state.is_leader
        assert s.leaders == [{1: LEADER}]
        # A new replica starts as a follower: becoming leader stops its (absent) fetcher.
        assert s.role_changes == [RoleChanges([TP], [(TP, 1)], {})]
        assert s.applied == [("LeaderAndIsr", 7)]

    asyncio.run(scenario())


def test_leader_and_isr_makes_this_broker_a_follower_of_the_leader(harness: Harness) -> None:
    async def scenario() -> None:
        s = Service(harness)
        response = await s.service.LeaderAndIsr(s.leader_and_isr(leader=1, epoch=3), NO_CONTEXT)
        assert response.error == ErrorCode.NONE
        assert not harness.manager.partitions[TP].state.is_leader
        assert s.role_changes == [RoleChanges([], [(TP, None)], {TP: (1, 3)})]

    asyncio.run(scenario())


def test_a_deposed_controller_changes_nothing(harness: Harness) -> None:
    async def scenario() -> None:
        s = Service(harness)
        await s.service.LeaderAndIsr(s.leader_and_isr(leader=0, controller_epoch=5), NO_CONTEXT)
        stale = s.leader_and_isr(leader=1, epoch=2, controller_epoch=4)
        response = await s.service.LeaderAndIsr(stale, NO_CONTEXT)
        assert response.error == ErrorCode.STALE_CONTROLLER_EPOCH
        assert list(response.partitions) == []
        assert harness.manager.partitions[TP].state.is_leader
        assert s.role_changes[-1] == RoleChanges([], [], {})

        stop = control_pb2.StopReplicaRequest(
            controller_epoch=4,
            partitions=[control_pb2.StopReplicaPartition(topic=TP.topic, partition=TP.partition)],
        )
        stopped = await s.service.StopReplica(stop, NO_CONTEXT)
        assert stopped.error == ErrorCode.STALE_CONTROLLER_EPOCH
        assert TP in harness.manager.partitions

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("current", "sent", "refused"),
    [(8, 7, True), (7, 7, False), (8, -1, False), (-1, 7, False)],
    ids=["older-refused", "same-applied", "request-unknown", "own-unknown"],
)
def test_a_request_for_an_older_broker_epoch_is_refused(
    harness: Harness, current: int, sent: int, refused: bool
) -> None:
    """A request the controller addressed to this broker's previous registration (a
    restart in between) is refused; an epoch either side does not know (-1) is not."""

    async def scenario() -> None:
        s = Service(harness, coordinator=FakeCoordinator(broker_epoch=current))
        request = s.leader_and_isr(leader=0, broker_epoch=sent)
        response = await s.service.LeaderAndIsr(request, NO_CONTEXT)
        stop = control_pb2.StopReplicaRequest(controller_epoch=1, broker_epoch=sent)
        stopped = await s.service.StopReplica(stop, NO_CONTEXT)
        expected = ErrorCode.STALE_BROKER_EPOCH if refused else ErrorCode.NONE
        assert (response.error, stopped.error) == (expected, expected)
        assert (TP in harness.manager.partitions) is not refused
        assert bool(s.leaders) is not refused

    asyncio.run(scenario())


def test_stop_replica_forgets_the_partition_and_stops_its_fetcher(harness: Harness) -> None:
    async def scenario() -> None:
        s = Service(harness)
        await s.service.LeaderAndIsr(s.leader_and_isr(leader=1), NO_CONTEXT)
        request = control_pb2.StopReplicaRequest(
            controller_epoch=1,
            broker_epoch=7,
            partitions=[
                control_pb2.StopReplicaPartition(
                    topic=TP.topic, partition=TP.partition, delete_partition=True
                )
            ],
        )
        response = await s.service.StopReplica(request, NO_CONTEXT)
        assert response.error == ErrorCode.NONE
        assert [(p.topic, p.partition, p.error) for p in response.partitions] == [
            (TP.topic, TP.partition, ErrorCode.NONE)
        ]
        assert TP not in harness.manager.partitions
        assert s.role_changes[-1] == RoleChanges([TP], [(TP, None)], {})

    asyncio.run(scenario())


def test_a_stop_replica_waits_for_the_leader_and_isr_being_prepared(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A LeaderAndIsr opens its new logs off the event loop; a StopReplica arriving
    meanwhile is applied after it, never between its preparation and its decision."""
    entered, release = threading.Event(), threading.Event()
    opened_on_loop: list[bool] = []
    open_log = harness.logs.get_or_create_log

    def slow(*args: Any, **kwargs: Any) -> Any:
        opened_on_loop.append(threading.current_thread() is threading.main_thread())
        entered.set()
        release.wait(10)
        return open_log(*args, **kwargs)

    monkeypatch.setattr(harness.logs, "get_or_create_log", slow)

    async def scenario() -> None:
        s = Service(harness)
        lai = asyncio.ensure_future(s.service.LeaderAndIsr(s.leader_and_isr(leader=0), NO_CONTEXT))
        while not entered.is_set():
            await asyncio.sleep(0.001)  # the loop runs while the log is being opened
        request = control_pb2.StopReplicaRequest(
            controller_epoch=1,
            broker_epoch=7,
            partitions=[
                control_pb2.StopReplicaPartition(
                    topic=TP.topic, partition=TP.partition, delete_partition=False
                )
            ],
        )
        stop = asyncio.ensure_future(s.service.StopReplica(request, NO_CONTEXT))
        await asyncio.sleep(0.05)
        assert not lai.done() and not stop.done()
        assert TP not in harness.manager.partitions
        release.set()
        await lai
        await stop
        assert s.role_changes == [
            RoleChanges([TP], [(TP, 1)], {}),
            RoleChanges([TP], [(TP, None)], {}),
        ]
        assert TP not in harness.manager.partitions

    try:
        asyncio.run(scenario())
    finally:
        release.set()
    assert opened_on_loop == [False]


def test_update_metadata_fills_the_cache_and_wakes_its_waiters(harness: Harness) -> None:
    async def scenario() -> None:
        s = Service(harness)
        state = harness.state(leader=1, isr=(0, 1))

        async def waiter() -> int:
            async with s.changed:
                await s.changed.wait()
            return s.metadata.controller_id

        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        request = control_pb2.UpdateMetadataRequest(
            controller_id=2,
            controller_epoch=3,
            broker_epoch=7,
            partition_states=[partition_state_to_proto(state, controller_epoch=3)],
            live_brokers=[broker_to_proto(LEADER)],
            cluster_id="c1",
        )
        response = await s.service.UpdateMetadata(request, NO_CONTEXT)
        assert response.error == ErrorCode.NONE
        assert await asyncio.wait_for(waiting, 5) == 2
        assert s.metadata.brokers == {1: LEADER}
        assert s.metadata.topics[TP.topic][TP.partition].leader_and_isr.leader == 1
        assert s.metadata.cluster_id == "c1"
        assert s.applied == [("UpdateMetadata", 7)]

        stale = control_pb2.UpdateMetadataRequest(controller_id=4, controller_epoch=2)
        refused = await s.service.UpdateMetadata(stale, NO_CONTEXT)
        assert refused.error == ErrorCode.STALE_CONTROLLER_EPOCH
        assert (s.metadata.controller_id, s.metadata.controller_epoch) == (2, 3)
        assert s.applied == [("UpdateMetadata", 7)]

    asyncio.run(scenario())


def test_every_control_rpc_needs_cluster_action(harness: Harness) -> None:
    async def scenario() -> None:
        coordinator = FakeCoordinator(is_controller=True)
        s = Service(harness, coordinator=coordinator, authz=DenyAll())
        denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        leader = await s.service.LeaderAndIsr(s.leader_and_isr(leader=0), NO_CONTEXT)
        stop = await s.service.StopReplica(control_pb2.StopReplicaRequest(), NO_CONTEXT)
        update = await s.service.UpdateMetadata(
            control_pb2.UpdateMetadataRequest(controller_id=2, controller_epoch=1), NO_CONTEXT
        )
        shutdown = await s.service.ControlledShutdown(
            control_pb2.ControlledShutdownRequest(broker_id=1, broker_epoch=3), NO_CONTEXT
        )
        assert [r.error for r in (leader, stop, update, shutdown)] == [denied] * 4
        assert harness.manager.partitions == {}
        assert s.metadata.controller_id == -1
        assert (s.leaders, s.role_changes, s.applied) == ([], [], [])
        assert coordinator.controller.calls == []

    asyncio.run(scenario())


@pytest.mark.parametrize("coordinator", [None, FakeCoordinator(is_controller=False)])
def test_controlled_shutdown_is_answered_by_the_controller_only(
    harness: Harness, coordinator: FakeCoordinator | None
) -> None:
    async def scenario() -> None:
        s = Service(harness, coordinator=coordinator)
        request = control_pb2.ControlledShutdownRequest(broker_id=1, broker_epoch=3)
        response = await s.service.ControlledShutdown(request, NO_CONTEXT)
        assert response.error == ErrorCode.NOT_CONTROLLER
        assert response.error_message == "this broker is not the active controller"

    asyncio.run(scenario())


def test_controlled_shutdown_returns_the_partitions_still_led(harness: Harness) -> None:
    async def scenario() -> None:
        coordinator = FakeCoordinator(is_controller=True, remaining=[("orders", 2)])
        s = Service(harness, coordinator=coordinator)
        request = control_pb2.ControlledShutdownRequest(broker_id=1, broker_epoch=3)
        response = await s.service.ControlledShutdown(request, NO_CONTEXT)
        assert response.error == ErrorCode.NONE
        assert [(p.topic, p.partition) for p in response.remaining_partitions] == [("orders", 2)]
        assert coordinator.controller.calls == [(1, 3)]

    asyncio.run(scenario())


def test_a_refused_controlled_shutdown_carries_the_controllers_error(harness: Harness) -> None:
    async def scenario() -> None:
        refusal = errors.StaleBrokerEpochError("broker 1 epoch 3 is not the registered 4")
        coordinator = FakeCoordinator(is_controller=True, error=refusal)
        s = Service(harness, coordinator=coordinator)
        request = control_pb2.ControlledShutdownRequest(broker_id=1, broker_epoch=3)
        response = await s.service.ControlledShutdown(request, NO_CONTEXT)
        assert response.error == ErrorCode.STALE_BROKER_EPOCH
        assert response.error_message == errors.message_of(refusal)
        assert list(response.remaining_partitions) == []

    asyncio.run(scenario())
