"""The Control gRPC service: what the controller tells this broker, and ControlledShutdown.

Every request carries the controller epoch; a request from an older epoch
than one already seen is refused with STALE_CONTROLLER_EPOCH and changes
nothing (Kafka's fencing of deposed controllers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from headwater import errors
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import BrokerRegistration
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.convert import (
    Context,
    broker_from_proto,
    partition_states_from_proto,
    pb_error,
)
from headwater.server.metrics import BrokerMetrics, Timer
from headwater.server.runtime.hosted import RoleChanges
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.v1 import common_pb2, control_pb2, control_pb2_grpc
from headwater.values import TopicPartition

ControlApplied = Callable[[str, int], Awaitable[None]]
"""``(rpc name, broker epoch of the request)`` after a LeaderAndIsr or UpdateMetadata applied."""


class ControlService(control_pb2_grpc.ControlServicer):
    def __init__(
        self,
        *,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        metadata_changed: asyncio.Condition,
        metrics: BrokerMetrics,
        coordinator: Callable[[], BrokerCoordinator | None],
        on_leaders: Callable[[Mapping[int, BrokerRegistration]], None],
        on_role_changes: Callable[[RoleChanges], None],
        on_applied: ControlApplied | None = None,
        authz: RequestAuthorizer = ALLOW_ALL,
    ) -> None:
        """``on_leaders`` gets a LeaderAndIsr's live leaders before its states are
        applied; ``on_role_changes`` the replica manager's decision right after."""
        self._replicas = replicas
        self._metadata = metadata
        self._changed = metadata_changed
        self._metrics = metrics
        self._coordinator = coordinator
        self._on_leaders = on_leaders
        self._on_role_changes = on_role_changes
        self._on_applied = on_applied
        self._authz = authz
        self._role_changes = asyncio.Lock()
        """Held by a LeaderAndIsr from its preparation to its decision's application, and by
        a StopReplica: each applies alone (a prepared partition is the one decided)."""

    def _refused(self, context: Context) -> bool:
        """Every Control RPC needs CLUSTER_ACTION on the cluster (Kafka's inter-broker ACL)."""
        return not self._authz.cluster(context, AclOperation.CLUSTER_ACTION)

    async def _applied(self, rpc: str, broker_epoch: int) -> None:
        if self._on_applied is not None:
            await self._on_applied(rpc, broker_epoch)

    def _stale_broker_epoch(self, broker_epoch: int) -> bool:
        coordinator = self._coordinator()
        return (
            coordinator is not None
            and broker_epoch >= 0
            and coordinator.broker_epoch >= 0
            and broker_epoch < coordinator.broker_epoch
        )

    async def LeaderAndIsr(
        self, request: control_pb2.LeaderAndIsrRequest, context: Context
    ) -> control_pb2.LeaderAndIsrResponse:
        timer = Timer(self._metrics, "LeaderAndIsr")
        if self._refused(context):
            timer.done("unauthorized")
            return control_pb2.LeaderAndIsrResponse(
                error=pb_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            )
        if self._stale_broker_epoch(request.broker_epoch):
            timer.done("stale")
            return control_pb2.LeaderAndIsrResponse(error=pb_error(ErrorCode.STALE_BROKER_EPOCH))
        states = partition_states_from_proto(request.partition_states)
        async with self._role_changes:
            self._on_leaders({b.id: broker_from_proto(b) for b in request.live_leaders})
            if request.controller_epoch >= self._replicas.controller_epoch:
                await self._replicas.prepare_topics(p.topic for p in states)
                await self._replicas.prepare_partitions(states)
            error, results, changes = self._replicas.become_leader_or_follower(
                controller_epoch=request.controller_epoch, states=states
            )
            self._on_role_changes(changes)
        timer.done()
        await self._applied("LeaderAndIsr", request.broker_epoch)
        return control_pb2.LeaderAndIsrResponse(
            error=pb_error(error),
            partitions=[
                common_pb2.PartitionError(topic=tp.topic, partition=tp.partition, error=pb_error(c))
                for tp, c in results
            ],
        )

    async def StopReplica(
        self, request: control_pb2.StopReplicaRequest, context: Context
    ) -> control_pb2.StopReplicaResponse:
        timer = Timer(self._metrics, "StopReplica")
        if self._refused(context):
            timer.done("unauthorized")
            return control_pb2.StopReplicaResponse(
                error=pb_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            )
        if self._stale_broker_epoch(request.broker_epoch):
            timer.done("stale")
            return control_pb2.StopReplicaResponse(error=pb_error(ErrorCode.STALE_BROKER_EPOCH))
        async with self._role_changes:
            error, results, changes = self._replicas.stop_replicas(
                controller_epoch=request.controller_epoch,
                partitions=[
                    (TopicPartition(p.topic, p.partition), p.delete_partition)
                    for p in request.partitions
                ],
            )
            self._on_role_changes(changes)
        timer.done()
        return control_pb2.StopReplicaResponse(
            error=pb_error(error),
            partitions=[
                common_pb2.PartitionError(topic=tp.topic, partition=tp.partition, error=pb_error(c))
                for tp, c in results
            ],
        )

    async def UpdateMetadata(
        self, request: control_pb2.UpdateMetadataRequest, context: Context
    ) -> control_pb2.UpdateMetadataResponse:
        timer = Timer(self._metrics, "UpdateMetadata")
        if self._refused(context):
            timer.done("unauthorized")
            return control_pb2.UpdateMetadataResponse(
                error=pb_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            )
        applied = self._metadata.update(
            controller_id=request.controller_id,
            controller_epoch=request.controller_epoch,
            states=partition_states_from_proto(request.partition_states),
            live_brokers=[broker_from_proto(b) for b in request.live_brokers] or None,
            deleted_topics=request.deleted_topics,
            cluster_id=request.cluster_id,
        )
        if not applied:
            timer.done("stale")
            return control_pb2.UpdateMetadataResponse(
                error=pb_error(ErrorCode.STALE_CONTROLLER_EPOCH)
            )
        async with self._changed:
            self._changed.notify_all()
        timer.done()
        await self._applied("UpdateMetadata", request.broker_epoch)
        return control_pb2.UpdateMetadataResponse(error=pb_error(ErrorCode.NONE))

    async def ControlledShutdown(
        self, request: control_pb2.ControlledShutdownRequest, context: Context
    ) -> control_pb2.ControlledShutdownResponse:
        timer = Timer(self._metrics, "ControlledShutdown")
        if self._refused(context):
            timer.done("unauthorized")
            return control_pb2.ControlledShutdownResponse(
                error=pb_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            )
        coordinator = self._coordinator()
        if coordinator is None or not coordinator.is_controller:
            timer.done("not_controller")
            return control_pb2.ControlledShutdownResponse(
                error=pb_error(ErrorCode.NOT_CONTROLLER),
                error_message="this broker is not the active controller",
            )
        try:
            remaining = await run_blocking(
                coordinator.controller.controlled_shutdown, request.broker_id, request.broker_epoch
            )
        except errors.HeadwaterError as exc:
            timer.done("error")
            return control_pb2.ControlledShutdownResponse(
                error=pb_error(exc.code), error_message=errors.message_of(exc)
            )
        timer.done()
        return control_pb2.ControlledShutdownResponse(
            error=pb_error(ErrorCode.NONE),
            remaining_partitions=[
                common_pb2.TopicPartition(topic=t, partition=p) for t, p in remaining
            ],
        )
