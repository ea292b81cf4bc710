"""The transactions half of :class:`headwater.Admin`: Kafka's ``describeTransactions`` and
``listTransactions`` (what ``kafka-transactions.sh describe|list`` print).

DescribeTransactions goes to each id's coordinator (FindCoordinator with key type 1);
ListTransactions goes to every live broker, each answering for the ``__transaction_state``
partitions it leads, and the answers are merged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import NamedTuple

from headwater import errors
from headwater.client.transport import connection
from headwater.client.transport.coordinator import find_coordinator
from headwater.client.transport.metadata import MetadataManager
from headwater.client.types import TopicPartition
from headwater.v1 import (
    common_pb2,
    transaction_pb2,
    transaction_pb2_grpc,
)

TRANSACTION_KEY_TYPE = 1


class TransactionDescription(NamedTuple):
    transactional_id: str
    state: str
    """Kafka's state names: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, ..."""
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    """-1 when no transaction is open."""
    partitions: tuple[TopicPartition, ...]
    coordinator: str
    """``host:port`` of the coordinator that answered."""


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class ProducerState(NamedTuple):
    """One active producer of a partition (Kafka's ``ProducerState``)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    current_transaction_start_offset: int
    """-1: no transaction of this producer is open in the partition."""
    last_timestamp: int = -1
    """The timestamp of the producer's last write to the partition (-1: unknown)."""


class TransactionsAdmin:
    """Thread-safe like :class:`headwater.Admin`."""

    def __init__(
        self,
        *,
        channels: connection.Channels,
        metadata: MetadataManager,
        bootstrap: tuple[str, ...],
        request_timeout_ms: int,
    ) -> None:
        self._channels = channels
        self._metadata = metadata
        self._bootstrap = bootstrap
        self._request_timeout_ms = request_timeout_ms

    def _addresses(self) -> list[str]:
        with contextlib.suppress(errors.HeadwaterError):
            self._metadata.maybe_refresh()
        known = [b.address for b in self._metadata.current.brokers.values()]
        return known + [a for a in self._bootstrap if a not in known]

    def _coordinator(self, transactional_id: str) -> str:
        return find_coordinator(
            self._channels,
            self._addresses(),
            key=transactional_id,
            key_type=TRANSACTION_KEY_TYPE,
            timeout_ms=self._request_timeout_ms,
        )

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """Each id's state; raises the id's error (TRANSACTIONAL_ID_NOT_FOUND, ...)."""
        out: dict[str, TransactionDescription] = {}
        for tid in transactional_ids:
            address = self._coordinator(tid)
            stub = transaction_pb2_grpc.TransactionStub(self._channels.channel(address))
            resp = connection.call(
                stub.DescribeTransactions,
                transaction_pb2.DescribeTransactionsRequest(transactional_ids=[tid]),
                address=address,
                timeout_ms=self._request_timeout_ms,
            )
            (state,) = resp.transaction_states
            if state.error:
                raise errors.for_code(state.error, f"transactional id {tid!r}")
            out[tid] = TransactionDescription(
                tid,
                state.transaction_state,
                state.producer_id,
                state.producer_epoch,
                state.transaction_timeout_ms,
                state.transaction_start_time_ms,
                tuple(TopicPartition(p.topic, p.partition) for p in state.partitions),
                address,
            )
        return out

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster passing the filters (KIP-664, KIP-994)."""
        request = transaction_pb2.ListTransactionsRequest(
            state_filters=list(states),
            producer_id_filters=list(producer_ids),
            duration_filter=duration_ms,
        )
        found: dict[str, TransactionListing] = {}
        for address in [b.address for b in self._metadata.current.brokers.values()] or list(
            self._bootstrap
        ):
            stub = transaction_pb2_grpc.TransactionStub(self._channels.channel(address))
            resp = connection.call(
                stub.ListTransactions, request, address=address, timeout_ms=self._request_timeout_ms
            )
            if resp.unknown_state_filters:
                raise errors.InvalidRequestError(
                    f"unknown states: {', '.join(resp.unknown_state_filters)}"
                )
            for t in resp.transaction_states:
                found[t.transactional_id] = TransactionListing(
                    t.transactional_id, t.producer_id, t.transaction_state
                )
        return sorted(found.values())

    def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The active producers of each partition, asked of its leader (KIP-664)."""
        wanted = list(partitions)
        self._metadata.add_topics({tp.topic for tp in wanted})
        self._metadata.fetch(sorted({tp.topic for tp in wanted}))
        meta = self._metadata.current
        out: dict[TopicPartition, list[ProducerState]] = {}
        for tp in wanted:
            leader = meta.leader(tp)
            if leader is None:
                raise errors.LeaderNotAvailableError(f"no leader for {tp}")
            stub = transaction_pb2_grpc.TransactionStub(self._channels.channel(leader.address))
            resp = connection.call(
                stub.DescribeProducers,
                transaction_pb2.DescribeProducersRequest(
                    partitions=[common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)]
                ),
                address=leader.address,
                timeout_ms=self._request_timeout_ms,
            )
            (answer,) = resp.partitions
            if answer.error:
                raise errors.for_code(answer.error, answer.error_message or f"producers of {tp}")
            out[tp] = [
                ProducerState(
                    a.producer_id,
                    a.producer_epoch,
                    a.last_sequence,
                    a.current_txn_start_offset,
                    a.last_timestamp,
                )
                for a in answer.active_producers
            ]
        return out

    def abort_transaction(
        self, tp: TopicPartition, *, producer_id: int, producer_epoch: int
    ) -> None:
        """Write an ABORT marker for the producer's open transaction in ``tp`` (a hanging
        transaction, KIP-664): WriteTxnMarkers to the leader, ALTER on the cluster."""
        self._metadata.add_topics({tp.topic})
        self._metadata.fetch([tp.topic])
        leader = self._metadata.current.leader(tp)
        if leader is None:
            raise errors.LeaderNotAvailableError(f"no leader for {tp}")
        stub = transaction_pb2_grpc.TransactionStub(self._channels.channel(leader.address))
        resp = connection.call(
            stub.WriteTxnMarkers,
            transaction_pb2.WriteTxnMarkersRequest(
                markers=[
                    transaction_pb2.WritableTxnMarker(
                        producer_id=producer_id,
                        producer_epoch=producer_epoch,
                        committed=False,
                        partitions=[
                            common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                        ],
                        coordinator_epoch=-1,
                    )
                ]
            ),
            address=leader.address,
            timeout_ms=self._request_timeout_ms,
        )
        for marker in resp.markers:
            for p in marker.partitions:
                if p.error:
                    raise errors.for_code(p.error, p.error_message or f"aborting in {tp}")
