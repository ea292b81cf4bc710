"""The controller's channel to brokers over gRPC (coordination's ``ControllerChannel``).

The controller runs in its own thread and calls these methods synchronously
from per-broker sender threads, so the implementation uses grpc's *sync*
stubs with a timeout on every call and one channel per broker address.  A
failed call raises; the coordination layer retries and drops as it sees fit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import grpc

from headwater import errors
from headwater.coordination.channel import RequestRefused
from headwater.coordination.model import BrokerRegistration, PartitionState
from headwater.errors import ErrorCode
from headwater.server.convert import broker_to_proto, partition_state_to_proto
from headwater.server.runtime import channels
from headwater.server.runtime.channels import channel_options
from headwater.v1 import control_pb2, control_pb2_grpc


class GrpcControllerChannel:
    """Implements :class:`headwater.coordination.channel.ControllerChannel`; thread safe."""

    def __init__(
        self,
        *,
        controller_id: int,
        timeout_ms: int,
        max_message_bytes: int,
        cluster_id: Callable[[], str] = lambda: "",
    ) -> None:
        """``cluster_id`` returns the id UpdateMetadata carries (read when each is sent)."""
        self._controller_id = controller_id
        self._timeout_s = timeout_ms / 1000.0
        # A restarted broker comes back on the same address: reconnect quickly, and let each
        # call wait (up to its timeout) for the connection rather than fail fast while the
        # channel is still backing off from the broker's downtime.
        self._options = [
            *channel_options(max_message_bytes),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        self._cluster_id = cluster_id
        self._lock = threading.Lock()
        self._channels: dict[
            tuple[str, int], tuple[grpc.Channel, control_pb2_grpc.ControlStub, int]
        ] = {}
        """Per broker address: the channel, its stub and the credentials generation it
        was made with (a channel made before the TLS files were rotated is replaced)."""

    def _stub(self, broker: BrokerRegistration) -> control_pb2_grpc.ControlStub:
        address = channels.control_plane_address(broker)
        key = (broker.host, broker.port)
        generation = channels.credentials_generation(control_plane=True)
        stale: grpc.Channel | None = None
        with self._lock:
            entry = self._channels.get(key)
            if entry is not None and entry[2] != generation:
                stale, entry = entry[0], None
            if entry is None:
                channel = channels.sync_channel(address, options=self._options, control_plane=True)
                entry = (channel, control_pb2_grpc.ControlStub(channel), generation)
                self._channels[key] = entry
        if stale is not None:
            stale.close()  # calls already on it fail and are retried on the new channel
        return entry[1]

    @staticmethod
    def _check(error: int, what: str, broker: BrokerRegistration) -> None:
        code = ErrorCode(error)
        if code is not ErrorCode.NONE:
            raise RequestRefused(
                f"{what} to broker {broker.broker_id} refused: {errors.for_code(code, code.name)}"
            )

    def send_leader_and_isr(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        states: Sequence[PartitionState],
        live_leaders: Sequence[BrokerRegistration],
    ) -> None:
        request = control_pb2.LeaderAndIsrRequest(
            controller_id=self._controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker.epoch,
            partition_states=[
                partition_state_to_proto(s, controller_epoch=controller_epoch) for s in states
            ],
            live_leaders=[broker_to_proto(b) for b in live_leaders],
        )
        response = self._stub(broker).LeaderAndIsr(
            request, timeout=self._timeout_s, wait_for_ready=True
        )
        self._check(response.error, "LeaderAndIsr", broker)

    def send_stop_replica(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        partitions: Sequence[tuple[str, int]],
        delete: bool,
    ) -> None:
        request = control_pb2.StopReplicaRequest(
            controller_id=self._controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker.epoch,
            partitions=[
                control_pb2.StopReplicaPartition(
                    topic=t, partition=p, leader_epoch=-1, delete_partition=delete
                )
                for t, p in partitions
            ],
        )
        response = self._stub(broker).StopReplica(
            request, timeout=self._timeout_s, wait_for_ready=True
        )
        self._check(response.error, "StopReplica", broker)

    def send_update_metadata(
        self,
        broker: BrokerRegistration,
        *,
        controller_epoch: int,
        states: Sequence[PartitionState],
        live_brokers: Sequence[BrokerRegistration],
        deleted_topics: Sequence[str],
    ) -> None:
        request = control_pb2.UpdateMetadataRequest(
            controller_id=self._controller_id,
            controller_epoch=controller_epoch,
            broker_epoch=broker.epoch,
            partition_states=[
                partition_state_to_proto(s, controller_epoch=controller_epoch) for s in states
            ],
            live_brokers=[broker_to_proto(b) for b in live_brokers],
            deleted_topics=list(deleted_topics),
            cluster_id=self._cluster_id(),
        )
        response = self._stub(broker).UpdateMetadata(
            request, timeout=self._timeout_s, wait_for_ready=True
        )
        self._check(response.error, "UpdateMetadata", broker)

    def close(self) -> None:
        with self._lock:
            channels = [entry[0] for entry in self._channels.values()]
            self._channels.clear()
        for channel in channels:
            channel.close()
