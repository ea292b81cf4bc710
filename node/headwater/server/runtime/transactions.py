"""The transaction coordinator wired to this broker: its log, its leaderships, its markers.

:class:`~headwater.transactions.coordinator_runtime.TransactionCoordinatorRuntime` knows
nothing of the broker: it appends and reads ``__transaction_state`` through two
callables, writes markers through a third, and is told when this broker gains or loses
the leadership of one of that topic's partitions.  This module supplies them:

- :func:`transaction_coordinator`: the runtime with the broker's settings, appending as
  leader with ``acks=all`` through the
  :class:`~headwater.server.runtime.replica_manager.ReplicaManager`;
- :class:`MarkerWriter`: a transaction's markers to each partition's leader -- appended
  here when this broker leads the partition, else sent as WriteTxnMarkers;
- :class:`TransactionStateLeadership`: leaderships of ``__transaction_state`` become
  loads and unloads of the coordinator's partitions;
- :class:`TransactionVerifier`: a partition leader's KIP-890 question to the
  coordinator of a transactional id (asked here when this broker is it, else sent as
  AddPartitionsToTxn with ``verify_only``), and its transaction version 2 request
  (:meth:`TransactionVerifier.add_partition`: add the partition, an AddPartitionsToTxn
  without ``verify_only``).

Thread model: event loop only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

import grpc

from headwater import errors
from headwater.errors import ErrorCode
from headwater.records.control import ControlRecordType, EndTransactionMarker
from headwater.server.config import BrokerConfig
from headwater.server.runtime import channels
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.runtime.role_changes import CoordinatorLeadership
from headwater.transactions.coordinator_runtime import (
    MarkerRequest,
    TransactionCoordinatorRuntime,
)
from headwater.transactions.metadata import TransactionConfig
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC
from headwater.transactions.state import TransactionResult
from headwater.v1 import common_pb2, transaction_pb2, transaction_pb2_grpc
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_STATE_READ_MAX_BYTES = 4 << 20
"""How much of ``__transaction_state`` one read returns while a partition loads."""

INTER_BROKER_TIMEOUT_S = 10.0
"""How long a WriteTxnMarkers or verification call to another broker may take."""


def transaction_coordinator(
    config: BrokerConfig,
    replicas: ReplicaManager,
    *,
    write_markers: Callable[[MarkerRequest], Awaitable[Mapping[TopicPartition, ErrorCode]]],
    allocate_producer_id: Callable[[], int],
) -> TransactionCoordinatorRuntime:
    """The runtime over ``replicas`` with the broker's transaction settings."""
    timeout_ms = config.offsets_commit_timeout_ms

    async def append(partition: int, data: bytes) -> None:
        (result,) = await replicas.append_records(
            acks=-1,
            timeout_ms=timeout_ms,
            entries=[(TopicPartition(TRANSACTION_STATE_TOPIC, partition), data)],
        )
        if result.error is not ErrorCode.NONE:
            raise errors.for_code(result.error, result.message)

    async def read(partition: int, offset: int) -> bytes:
        return replicas.read_local(
            TopicPartition(TRANSACTION_STATE_TOPIC, partition),
            offset,
            TRANSACTION_STATE_READ_MAX_BYTES,
        )

    return TransactionCoordinatorRuntime(
        num_partitions=config.transaction_state_log_num_partitions,
        append=append,
        read=read,
        write_markers=write_markers,
        allocate_producer_id=allocate_producer_id,
        config=TransactionConfig(
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        ),
    )


def _control_type(result: TransactionResult) -> ControlRecordType:
    return (
        ControlRecordType.COMMIT if result is TransactionResult.COMMIT else ControlRecordType.ABORT
    )


class PeerChannels:
    """Long-lived asyncio channels to other brokers, one per address, for the marker
    writes and the verifications: a channel per call would connect again (TCP, HTTP/2,
    TLS, SASL) for every transaction.  A channel made before the broker's TLS material
    was rotated, or one whose call failed, is replaced; the old one is closed after a
    grace period for the calls still on it."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[int, grpc.aio.Channel]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, address: str) -> grpc.aio.Channel:
        generation = channels.credentials_generation()
        held = self._open.get(address)
        if held is not None and held[0] == generation:
            return held[1]
        channel = channels.aio_channel(address)
        self._open[address] = (generation, channel)
        if held is not None:
            self._close_later(held[1])
        return channel

    def failed(self, address: str, channel: grpc.aio.Channel) -> None:
        """A call on ``channel`` failed: the next call to ``address`` reconnects."""
        held = self._open.get(address)
        if held is not None and held[1] is channel:
            del self._open[address]
            self._close_later(channel)

    def _close_later(self, channel: grpc.aio.Channel) -> None:
        task = asyncio.ensure_future(channel.close(grace=INTER_BROKER_TIMEOUT_S))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        for _generation, channel in self._open.values():
            await channel.close(grace=None)
        self._open.clear()
        for task in list(self._closing):
            task.cancel()


class MarkerWriter:
    """Writes a transaction's markers to the leaders of its partitions.

    A partition whose topic no longer exists counts as written (Kafka's rule: a deleted
    partition needs no marker); one without a live leader is left for the retry.
    """

    def __init__(
        self,
        *,
        broker_id: int,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        timeout_ms: int,
        peers: PeerChannels | None = None,
    ) -> None:
        self._broker_id = broker_id
        self._replicas = replicas
        self._metadata = metadata
        self._timeout_ms = timeout_ms
        self._peers = peers or PeerChannels()

    async def __call__(self, request: MarkerRequest) -> dict[TopicPartition, ErrorCode]:
        marker = EndTransactionMarker(
            _control_type(request.result),
            request.producer_id,
            request.producer_epoch,
            request.coordinator_epoch,
        )
        out: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in request.partitions:
            if not self._metadata.contains(tp):
                out[tp] = ErrorCode.NONE
                continue
            by_leader.setdefault(self._metadata.leader_of(tp), []).append(tp)
        sends = [self._send(leader, tps, marker) for leader, tps in by_leader.items()]
        for part in await asyncio.gather(*sends):
            out.update(part)
        return out

    async def _send(
        self, leader: int, tps: list[TopicPartition], marker: EndTransactionMarker
    ) -> dict[TopicPartition, ErrorCode]:
        if leader == self._broker_id:
            results = await self._replicas.write_txn_markers(
                [(tp, marker) for tp in tps], timeout_ms=self._timeout_ms
            )
            return {r.topic_partition: r.error for r in results}
        broker = self._metadata.brokers.get(leader)
        if broker is None:
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        request = transaction_pb2.WriteTxnMarkersRequest(
            markers=[
                transaction_pb2.WritableTxnMarker(
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    committed=marker.type is ControlRecordType.COMMIT,
                    partitions=[
                        common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                        for tp in tps
                    ],
                    coordinator_epoch=marker.coordinator_epoch,
                )
            ]
        )
        address = f"{broker.host}:{broker.port}"
        channel = self._peers.get(address)
        try:
            stub = transaction_pb2_grpc.TransactionStub(channel)
            response = await stub.WriteTxnMarkers(request, timeout=INTER_BROKER_TIMEOUT_S)
        except grpc.RpcError as exc:
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            self._peers.failed(address, channel)
            return dict.fromkeys(tps, ErrorCode.NETWORK_EXCEPTION)
        out = dict.fromkeys(tps, ErrorCode.UNKNOWN_SERVER_ERROR)
        for m in response.markers:
            for p in m.partitions:
                out[TopicPartition(p.topic, p.partition)] = ErrorCode(p.error)
        return out


class TransactionVerifier:
    """Asks the coordinator of a transactional id whether a partition is in the
    producer's open transaction (KIP-890), for this broker's partition leaders."""

    def __init__(
        self,
        *,
        broker_id: int,
        runtime: TransactionCoordinatorRuntime,
        metadata: MetadataCache,
        peers: PeerChannels | None = None,
    ) -> None:
        self._broker_id = broker_id
        self._runtime = runtime
        self._metadata = metadata
        self._peers = peers or PeerChannels()

    async def __call__(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """Whether ``tp`` is in the producer's open transaction (adds nothing)."""
        return await self._ask(transactional_id, producer_id, producer_epoch, tp, verify_only=True)

    async def add_partition(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> ErrorCode:
        """Add ``tp`` to the producer's transaction, opening one if none is open: the
        partition leader's implicit AddPartitionsToTxn for a transaction version 2
        producer (KIP-890 part 2).  The leader has checked the producer's ACLs."""
        return await self._ask(transactional_id, producer_id, producer_epoch, tp, verify_only=False)

    async def _ask(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        tp: TopicPartition,
        *,
        verify_only: bool,
    ) -> ErrorCode:
        coordinator_tp = TopicPartition(
            TRANSACTION_STATE_TOPIC, self._runtime.partition_for(transactional_id)
        )
        leader = self._metadata.leader_of(coordinator_tp)
        if leader == self._broker_id:
            if not verify_only:
                answer = await self._runtime.add_partitions(
                    transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    partitions=[tp],
                )
                return answer.error
            return self._runtime.verify_partition(
                transactional_id,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                partition=tp,
            )
        broker = self._metadata.brokers.get(leader)
        if broker is None:
            return ErrorCode.NOT_COORDINATOR
        request = transaction_pb2.AddPartitionsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            partitions=[common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)],
            verify_only=verify_only,
        )
        address = f"{broker.host}:{broker.port}"
        channel = self._peers.get(address)
        try:
            stub = transaction_pb2_grpc.TransactionStub(channel)
            response = await stub.AddPartitionsToTxn(request, timeout=INTER_BROKER_TIMEOUT_S)
        except grpc.RpcError as exc:
            log.info("verifying with broker %d failed: %s", leader, exc)
            self._peers.failed(address, channel)
            return ErrorCode.NOT_COORDINATOR
        if response.error != common_pb2.NONE:
            return ErrorCode(response.error)
        return next(
            (ErrorCode(p.error) for p in response.partitions), ErrorCode.UNKNOWN_SERVER_ERROR
        )


class TransactionStateLeadership(CoordinatorLeadership):
    """Follows this broker's leaderships of ``__transaction_state`` for the coordinator."""

    def __init__(self, runtime: TransactionCoordinatorRuntime) -> None:
        super().__init__(TRANSACTION_STATE_TOPIC, runtime)
