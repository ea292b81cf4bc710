"""The Transaction gRPC service: a thin converter in front of the transaction coordinator.

Every RPC converts protobuf, asks the
:class:`~headwater.transactions.coordinator_runtime.TransactionCoordinatorRuntime` (or,
for WriteTxnMarkers, the ReplicaManager) and converts back (docs/style.md, "Thin
servicers").  ACLs are Kafka's: TRANSACTIONAL_ID WRITE for AddPartitionsToTxn,
AddOffsetsToTxn and EndTxn (plus TOPIC WRITE on each added partition, GROUP READ on the
group of AddOffsetsToTxn), TRANSACTIONAL_ID DESCRIBE for DescribeTransactions and
ListTransactions, CLUSTER_ACTION for the broker-to-broker calls (WriteTxnMarkers --
also ALTER on the cluster, an administrator aborting a hanging transaction, KIP-1037 --
and AddPartitionsToTxn with ``verify_only``; a caller with CLUSTER_ACTION also adds
partitions without the producer's ACLs, a partition leader's implicit add for a
transaction version 2 producer), READ on the topic for DescribeProducers.
TxnOffsetCommit goes to the group coordinator (this broker must coordinate the group),
once the transaction coordinator confirms that AddOffsetsToTxn added the group's
``__consumer_offsets`` partition to the producer's open transaction (KIP-890
verification, Kafka's KAFKA-15449: INVALID_TXN_STATE otherwise): the offsets are written
as the producer's transactional batch and count once the transaction's COMMIT marker
reaches that partition.

FindCoordinator for transactions is served by the Group service, and InitProducerId
with a transactional id by the Broker service; both reach the same runtime.
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.errors import ErrorCode
from headwater.groups import values as gv
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.records.control import ControlRecordType, EndTransactionMarker
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.convert import Context, pb_error
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.transactions.coordinator_runtime import TransactionCoordinatorRuntime
from headwater.v1 import common_pb2, transaction_pb2, transaction_pb2_grpc
from headwater.values import TopicPartition

MARKER_TIMEOUT_MS = 10_000
"""How long a WriteTxnMarkers append waits for the ISR (Kafka: request.timeout.ms)."""


def _tp(p: common_pb2.TopicPartition) -> TopicPartition:
    return TopicPartition(p.topic, p.partition)


def _tp_pb(tp: TopicPartition) -> common_pb2.TopicPartition:
    return common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)


def _partition_errors(
    tps: list[TopicPartition], code: ErrorCode, message: str = ""
) -> list[common_pb2.PartitionError]:
    return [
        common_pb2.PartitionError(
            topic=tp.topic, partition=tp.partition, error=pb_error(code), error_message=message
        )
        for tp in tps
    ]


class TransactionService(transaction_pb2_grpc.TransactionServicer):
    def __init__(
        self,
        *,
        runtime: TransactionCoordinatorRuntime,
        groups: GroupCoordinatorRuntime,
        replicas: ReplicaManager,
        is_known_partition: Callable[[TopicPartition], bool],
        offsets_partition: Callable[[str], TopicPartition],
        authz: RequestAuthorizer = ALLOW_ALL,
    ) -> None:
        """``offsets_partition(group_id)``: the group's ``__consumer_offsets`` partition."""
        self._runtime = runtime
        self._groups = groups
        self._replicas = replicas
        self._is_known = is_known_partition
        self._offsets_partition = offsets_partition
        self._authz = authz

    def _tid_denied(self, context: Context, op: Op, transactional_id: str) -> bool:
        return not self._authz.allowed(context, op, ResourceType.TRANSACTIONAL_ID, transactional_id)

    async def AddPartitionsToTxn(
        self, request: transaction_pb2.AddPartitionsToTxnRequest, context: Context
    ) -> transaction_pb2.AddPartitionsToTxnResponse:
        tps = [_tp(p) for p in request.partitions]

        def whole(code: ErrorCode, message: str) -> transaction_pb2.AddPartitionsToTxnResponse:
            return transaction_pb2.AddPartitionsToTxnResponse(
                error=pb_error(code),
                error_message=message,
                partitions=_partition_errors(tps, code, message),
            )

        if request.verify_only:
            if not self._authz.cluster(context, Op.CLUSTER_ACTION):
                return whole(
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "verify_only is broker to broker"
                )
            return transaction_pb2.AddPartitionsToTxnResponse(
                error=pb_error(ErrorCode.NONE),
                partitions=[
                    common_pb2.PartitionError(
                        topic=tp.topic,
                        partition=tp.partition,
                        error=pb_error(
                            self._runtime.verify_partition(
                                request.transactional_id,
                                producer_id=request.producer_id,
                                producer_epoch=request.producer_epoch,
                                partition=tp,
                            )
                        ),
                    )
                    for tp in tps
                ],
            )
        if self._authz.cluster(context, Op.CLUSTER_ACTION):
            # A partition leader adding a partition for its transaction version 2
            # producer, whose ACLs it checked (Kafka's broker form, CLUSTER_ACTION only).
            refused: frozenset[str] = frozenset()
        elif self._tid_denied(context, Op.WRITE, request.transactional_id):
            return whole(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                f"no ACL allows WRITE on transactional id {request.transactional_id!r}",
            )
        else:
            refused = self._authz.topics(context, Op.WRITE, (tp.topic for tp in tps)) or frozenset()
        unknown = [tp for tp in tps if not self._is_known(tp)]
        if refused or unknown:
            # Kafka: the failing partitions get their error, the others OPERATION_NOT_ATTEMPTED.
            out = []
            for tp in tps:
                if tp.topic in refused:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif tp in unknown:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = ErrorCode.OPERATION_NOT_ATTEMPTED
                out += _partition_errors([tp], code)
            return transaction_pb2.AddPartitionsToTxnResponse(
                error=pb_error(ErrorCode.NONE), partitions=out
            )
        answer = await self._runtime.add_partitions(
            request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            partitions=tps,
        )
        return whole(answer.error, answer.message)

    async def AddOffsetsToTxn(
        self, request: transaction_pb2.AddOffsetsToTxnRequest, context: Context
    ) -> transaction_pb2.AddOffsetsToTxnResponse:
        if self._tid_denied(context, Op.WRITE, request.transactional_id):
            return transaction_pb2.AddOffsetsToTxnResponse(
                error=pb_error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            )
        if not self._authz.group(context, Op.READ, request.group_id):
            return transaction_pb2.AddOffsetsToTxnResponse(
                error=pb_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            )
        if not request.group_id:
            return transaction_pb2.AddOffsetsToTxnResponse(
                error=pb_error(ErrorCode.INVALID_GROUP_ID), error_message="empty group id"
            )
        answer = await self._runtime.add_offsets(
            request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            group_id=request.group_id,
            offsets_partition=self._offsets_partition(request.group_id),
        )
        return transaction_pb2.AddOffsetsToTxnResponse(
            error=pb_error(answer.error), error_message=answer.message
        )

    async def TxnOffsetCommit(
        self, request: transaction_pb2.TxnOffsetCommitRequest, context: Context
    ) -> transaction_pb2.TxnOffsetCommitResponse:
        tps = [TopicPartition(p.topic, p.partition) for p in request.partitions]

        def whole(code: ErrorCode, message: str) -> transaction_pb2.TxnOffsetCommitResponse:
            return transaction_pb2.TxnOffsetCommitResponse(
                error=pb_error(code),
                error_message=message,
                partitions=_partition_errors(tps, code, message),
            )

        if self._tid_denied(context, Op.WRITE, request.transactional_id):
            return whole(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "no WRITE on the id")
        if not self._authz.group(context, Op.READ, request.group_id):
            return whole(ErrorCode.GROUP_AUTHORIZATION_FAILED, "no READ on the group")
        if request.producer_id < 0 or request.producer_epoch < 0:
            return whole(ErrorCode.INVALID_REQUEST, "a producer id and epoch are required")
        offsets_tp = self._offsets_partition(request.group_id)
        verified = await self._replicas.verify_transaction(
            request.transactional_id, request.producer_id, request.producer_epoch, offsets_tp
        )
        if verified is not ErrorCode.NONE:
            return whole(
                verified,
                f"the transaction coordinator has not added group {request.group_id!r} "
                f"({offsets_tp}) to the open transaction (AddOffsetsToTxn first)"
                if verified is ErrorCode.INVALID_TXN_STATE
                else "the transaction coordinator did not verify the transaction",
            )
        r = await self._groups.commit_offsets(
            gv.OffsetCommitRequest(
                group_id=request.group_id,
                partitions=tuple(
                    gv.OffsetCommit(
                        p.topic,
                        p.partition,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata,
                    )
                    for p in request.partitions
                ),
                generation_id=request.generation_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id or None,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
            )
        )
        return transaction_pb2.TxnOffsetCommitResponse(
            error=pb_error(r.error_code),
            error_message=r.error_message,
            partitions=[
                common_pb2.PartitionError(
                    topic=tp.topic, partition=tp.partition, error=pb_error(code)
                )
                for tp, code in r.partitions
            ],
        )

    async def EndTxn(
        self, request: transaction_pb2.EndTxnRequest, context: Context
    ) -> transaction_pb2.EndTxnResponse:
        if self._tid_denied(context, Op.WRITE, request.transactional_id):
            return transaction_pb2.EndTxnResponse(
                error=pb_error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                producer_id=-1,
                producer_epoch=-1,
            )
        answer = await self._runtime.end_transaction(
            request.transactional_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            commit=request.committed,
        )
        return transaction_pb2.EndTxnResponse(
            error=pb_error(answer.error),
            error_message=answer.message,
            producer_id=answer.producer_id,
            producer_epoch=answer.producer_epoch,
        )

    async def WriteTxnMarkers(
        self, request: transaction_pb2.WriteTxnMarkersRequest, context: Context
    ) -> transaction_pb2.WriteTxnMarkersResponse:
        # Brokers (CLUSTER_ACTION), and an administrator aborting a hanging transaction
        # (ALTER on the cluster, KIP-664 / KIP-1037).
        allowed = self._authz.cluster(context, Op.CLUSTER_ACTION) or self._authz.cluster(
            context, Op.ALTER
        )
        out = []
        for m in request.markers:
            tps = [_tp(p) for p in m.partitions]
            if not allowed:
                errs = _partition_errors(tps, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            else:
                marker = EndTransactionMarker(
                    ControlRecordType.COMMIT if m.committed else ControlRecordType.ABORT,
                    m.producer_id,
                    m.producer_epoch,
                    m.coordinator_epoch,
                )
                results = await self._replicas.write_txn_markers(
                    [(tp, marker) for tp in tps], timeout_ms=MARKER_TIMEOUT_MS
                )
                errs = [
                    common_pb2.PartitionError(
                        topic=r.topic_partition.topic,
                        partition=r.topic_partition.partition,
                        error=pb_error(r.error),
                        error_message=r.message,
                    )
                    for r in results
                ]
            out.append(
                transaction_pb2.WritableTxnMarkerResult(producer_id=m.producer_id, partitions=errs)
            )
        return transaction_pb2.WriteTxnMarkersResponse(markers=out)

    async def DescribeTransactions(
        self, request: transaction_pb2.DescribeTransactionsRequest, context: Context
    ) -> transaction_pb2.DescribeTransactionsResponse:
        out = []
        for tid in request.transactional_ids:
            if self._tid_denied(context, Op.DESCRIBE, tid):
                out.append(
                    transaction_pb2.TransactionState(
                        error=pb_error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                        transactional_id=tid,
                    )
                )
                continue
            d = self._runtime.describe(tid)
            out.append(
                transaction_pb2.TransactionState(
                    error=pb_error(d.error),
                    transactional_id=tid,
                    transaction_state=d.state,
                    transaction_timeout_ms=d.transaction_timeout_ms,
                    transaction_start_time_ms=d.transaction_start_time_ms,
                    producer_id=d.producer_id,
                    producer_epoch=d.producer_epoch,
                    partitions=[_tp_pb(tp) for tp in d.partitions],
                )
            )
        return transaction_pb2.DescribeTransactionsResponse(transaction_states=out)

    async def ListTransactions(
        self, request: transaction_pb2.ListTransactionsRequest, context: Context
    ) -> transaction_pb2.ListTransactionsResponse:
        listed, unknown = self._runtime.list_transactions(
            state_filters=list(request.state_filters),
            producer_id_filters=list(request.producer_id_filters),
            duration_filter_ms=request.duration_filter if request.duration_filter > 0 else -1,
        )
        return transaction_pb2.ListTransactionsResponse(
            error=pb_error(ErrorCode.NONE),
            unknown_state_filters=unknown,
            transaction_states=[
                transaction_pb2.ListedTransaction(
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listed
                if not self._tid_denied(context, Op.DESCRIBE, t.transactional_id)
            ],
        )

    async def DescribeProducers(
        self, request: transaction_pb2.DescribeProducersRequest, context: Context
    ) -> transaction_pb2.DescribeProducersResponse:
        refused = self._authz.topics(context, Op.READ, (p.topic for p in request.partitions))
        out = []
        for p in request.partitions:
            tp = _tp(p)
            if refused is not None and tp.topic in refused:
                out.append(
                    transaction_pb2.DescribedPartitionProducers(
                        topic=tp.topic,
                        partition=tp.partition,
                        error=pb_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    )
                )
                continue
            code, message, producers = self._replicas.active_producers(tp)
            out.append(
                transaction_pb2.DescribedPartitionProducers(
                    topic=tp.topic,
                    partition=tp.partition,
                    error=pb_error(code),
                    error_message=message,
                    active_producers=[
                        transaction_pb2.ProducerState(
                            producer_id=a.producer_id,
                            producer_epoch=a.producer_epoch,
                            last_sequence=a.last_sequence,
                            last_timestamp=a.last_timestamp,
                            coordinator_epoch=-1,
                            current_txn_start_offset=a.current_txn_start_offset,
                        )
                        for a in producers
                    ],
                )
            )
        return transaction_pb2.DescribeProducersResponse(partitions=out)
