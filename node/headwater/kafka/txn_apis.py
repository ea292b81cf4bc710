"""The Kafka listener's transaction APIs, in front of the transaction coordinator.

InitProducerId with a transactional id, FindCoordinator with key_type 1 (TRANSACTION),
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions,
ListTransactions and DescribeProducers.  A transactional id is one transaction whichever
door its producer uses: the handlers ask the runtimes the gRPC servicers ask (the
:class:`~headwater.transactions.coordinator_runtime.TransactionCoordinatorRuntime`, the
group coordinator for TxnOffsetCommit, the ReplicaManager for DescribeProducers) with the
same ACL checks, Kafka's: TRANSACTIONAL_ID WRITE for the producer's calls (plus TOPIC
WRITE on added partitions and GROUP READ for the offsets), TRANSACTIONAL_ID DESCRIBE for
FindCoordinator and the listings, TOPIC READ for DescribeProducers.

AddPartitionsToTxn v0-v3 is the client's form (one transaction); v4+ is the brokers'
batched form and needs CLUSTER_ACTION, as in Kafka.

Transaction version 2 (KIP-890 part 2; ``transaction.version`` 2 in ApiVersions, see
:mod:`headwater.kafka.protocol`) is decided per request by its version, as Kafka's
broker decides it.  EndTxn v5 bumps the producer's epoch and answers the new producer
id and epoch, as Headwater's own producer gets them over gRPC; a retried EndTxn with
the epoch before the bump is answered with the transaction's result and the current
epoch, and a late request of the ended transaction, carrying that older epoch, is
fenced.  TxnOffsetCommit v5 adds the group's ``__consumer_offsets`` partition to the
transaction itself (the client sends no AddOffsetsToTxn).  Below those versions
(transaction version 1) the producer adds partitions and offsets itself and keeps its
epoch across transactions, so EndTxn does not bump it.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, cast

from headwater.errors import ErrorCode
from headwater.groups import values as gv
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.kafka import coordinators
from headwater.kafka.protocol import (
    Request,
    build,
    error_code,
    response_module,
    transaction_version_2,
)
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context
from headwater.server.runtime import hosted
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.transactions import views
from headwater.transactions.coordinator_runtime import TransactionCoordinatorRuntime
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
"""FindCoordinator's ``CoordinatorType.TRANSACTION``."""

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)
"""The authorizer reads the identity from its context variable, never from this."""

Handler = Callable[[Request], Awaitable[Any]]


def _ms(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def _time_ms(ms: int) -> datetime.datetime:
    """Kafka's ``int64`` milliseconds (-1: no transaction open) as kio's datetime."""
    return datetime.datetime.fromtimestamp(max(ms, -1) / 1000, tz=datetime.UTC)


def _by_topic(
    pairs: list[tuple[str, int, ErrorCode]],
) -> dict[str, list[tuple[int, ErrorCode]]]:
    out: dict[str, list[tuple[int, ErrorCode]]] = {}
    for topic, partition, code in pairs:
        out.setdefault(topic, []).append((partition, code))
    return out


def partition_codes(
    requested: list[tuple[str, int]],
    answered: Iterable[tuple[TopicPartition, ErrorCode]],
    whole: ErrorCode,
) -> list[tuple[str, int, ErrorCode]]:
    """Each requested partition's error: its own from ``answered``, else ``whole`` (the
    request's error, which Kafka reports on every partition)."""
    own = {(tp.topic, tp.partition): code for tp, code in answered}
    return [(t, p, own.get((t, p), whole)) for t, p in requested]


class KafkaTxnApis:
    """Transaction handlers of one Kafka listener (event-loop only)."""

    def __init__(
        self,
        *,
        listener: str,
        runtime: TransactionCoordinatorRuntime,
        groups: GroupCoordinatorRuntime,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        authz: RequestAuthorizer,
        is_known_partition: Callable[[TopicPartition], bool],
        offsets_partition: Callable[[str], TopicPartition],
        ensure_transaction_state: Callable[[], None],
    ) -> None:
        """``groups``: the group coordinator TxnOffsetCommit goes to; ``replicas``: the
        partition leaders DescribeProducers asks; ``offsets_partition(group_id)``: the
        group's ``__consumer_offsets`` partition; ``ensure_transaction_state`` starts
        creating ``__transaction_state``."""
        self._listener = listener
        self._runtime = runtime
        self._groups = groups
        self._replicas = replicas
        self._is_known = is_known_partition
        self._offsets_partition = offsets_partition
        self._metadata = metadata
        self._authz = authz
        self._ensure_transaction_state = ensure_transaction_state

    def handlers(
        self, *, find_coordinator: Handler | None, init_producer_id: Handler
    ) -> dict[int, Handler]:
        """The handlers by API key.  ``find_coordinator`` answers the other key types
        (groups; None: INVALID_REQUEST) and ``init_producer_id`` the requests without a
        transactional id (idempotent producers)."""

        async def find(request: Request) -> Any:
            if find_coordinator is not None and (
                getattr(request.body, "key_type", 0) != TRANSACTION_KEY_TYPE
            ):
                return await find_coordinator(request)
            return self.find_coordinator(request)

        async def init(request: Request) -> Any:
            if request.body.transactional_id is None:
                return await init_producer_id(request)
            return await self.init_producer_id(request)

        return {
            10: find,
            22: init,
            24: self.add_partitions_to_txn,
            25: self.add_offsets_to_txn,
            26: self.end_txn,
            28: self.txn_offset_commit,
            61: self.describe_producers,
            65: self.describe_transactions,
            66: self.list_transactions,
        }

    def _tid_denied(self, op: Op, transactional_id: str) -> bool:
        return not self._authz.allowed(
            _NO_GRPC_CONTEXT, op, ResourceType.TRANSACTIONAL_ID, transactional_id
        )

    # -- FindCoordinator (key_type 1) -----------------------------------------------------

    def find_coordinator(self, request: Request) -> Any:
        return coordinators.answer(request, self._coordinator_of)

    def _coordinator_of(self, transactional_id: str, key_type: int) -> coordinators.Coordinator:
        error = coordinators.no_coordinator
        if key_type != TRANSACTION_KEY_TYPE:
            return error(ErrorCode.INVALID_REQUEST, f"key_type {key_type} is not served here")
        if not transactional_id:
            return error(ErrorCode.INVALID_REQUEST, "the transactional id must not be empty")
        if self._tid_denied(Op.DESCRIBE, transactional_id):
            return error(
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                f"not authorized to DESCRIBE transactional id {transactional_id!r}",
            )
        parts = self._metadata.topics.get(TRANSACTION_STATE_TOPIC)
        if not parts:
            self._ensure_transaction_state()
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {TRANSACTION_STATE_TOPIC}")
        ps = parts.get(self._runtime.partition_for(transactional_id))
        return coordinators.leader_on_listener(self._metadata, self._listener, ps)

    # -- InitProducerId (with a transactional id) -----------------------------------------

    async def init_producer_id(self, request: Request) -> Any:
        body, module = request.body, response_module(22, request.api_version)
        tid: str = body.transactional_id
        if self._tid_denied(Op.WRITE, tid):
            code, pid, epoch = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
        else:
            answer = await self._runtime.init_producer_id(
                tid,
                transaction_timeout_ms=_ms(body.transaction_timeout),
                producer_id=getattr(body, "producer_id", -1),
                producer_epoch=getattr(body, "producer_epoch", -1),
            )
            code, pid, epoch = answer.error, answer.producer_id, answer.producer_epoch
        return build(
            module.InitProducerIdResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            producer_id=pid if code is ErrorCode.NONE else -1,
            producer_epoch=epoch if code is ErrorCode.NONE else -1,
        )

    # -- AddPartitionsToTxn ---------------------------------------------------------------

    async def _add_partitions(
        self, tid: str, pid: int, epoch: int, topics: Any, *, verify_only: bool = False
    ) -> list[tuple[str, int, ErrorCode]]:
        """Each partition's error.  Kafka's rules: TRANSACTIONAL_ID WRITE for the whole
        request; a partition without TOPIC WRITE or unknown gets its error and the others
        OPERATION_NOT_ATTEMPTED; otherwise the coordinator's answer for every partition.
        ``verify_only`` (a broker's question, KIP-890) adds nothing."""
        tps = [TopicPartition(t.name, p) for t in topics for p in t.partitions]

        def each(code: ErrorCode) -> list[tuple[str, int, ErrorCode]]:
            return [(tp.topic, tp.partition, code) for tp in tps]

        if verify_only:
            return [
                (
                    tp.topic,
                    tp.partition,
                    self._runtime.verify_partition(
                        tid, producer_id=pid, producer_epoch=epoch, partition=tp
                    ),
                )
                for tp in tps
            ]
        if self._tid_denied(Op.WRITE, tid):
            return each(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.WRITE, (tp.topic for tp in tps))
        refused = refused or frozenset()
        unknown = {tp for tp in tps if not self._is_known(tp)}
        if refused or unknown:
            return [
                (
                    tp.topic,
                    tp.partition,
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    if tp.topic in refused
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    if tp in unknown
                    else ErrorCode.OPERATION_NOT_ATTEMPTED,
                )
                for tp in tps
            ]
        answer = await self._runtime.add_partitions(
            tid, producer_id=pid, producer_epoch=epoch, partitions=tps
        )
        return each(answer.error)

    async def add_partitions_to_txn(self, request: Request) -> Any:
        body, module = request.body, response_module(24, request.api_version)

        def topic_results(codes: list[tuple[str, int, ErrorCode]]) -> tuple[Any, ...]:
            return tuple(
                build(
                    module.AddPartitionsToTxnTopicResult,
                    name=topic,
                    results_by_partition=tuple(
                        build(
                            module.AddPartitionsToTxnPartitionResult,
                            partition_index=p,
                            partition_error_code=error_code(code),
                        )
                        for p, code in parts
                    ),
                )
                for topic, parts in _by_topic(codes).items()
            )

        if request.api_version <= 3:
            codes = await self._add_partitions(
                body.v3_and_below_transactional_id,
                body.v3_and_below_producer_id,
                body.v3_and_below_producer_epoch,
                body.v3_and_below_topics,
            )
            return build(
                module.AddPartitionsToTxnResponse,
                throttle_time=_NO_THROTTLE,
                results_by_topic_v3_and_below=topic_results(codes),
            )
        # v4+: the brokers' batched form (Kafka: CLUSTER_ACTION for the whole request).
        if not self._authz.cluster(_NO_GRPC_CONTEXT, Op.CLUSTER_ACTION):
            return build(
                module.AddPartitionsToTxnResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                results_by_transaction=(),
            )
        results = []
        for t in body.transactions:
            codes = await self._add_partitions(
                t.transactional_id,
                t.producer_id,
                t.producer_epoch,
                t.topics,
                verify_only=t.verify_only,
            )
            results.append(
                build(
                    module.AddPartitionsToTxnResult,
                    transactional_id=t.transactional_id,
                    topic_results=topic_results(codes),
                )
            )
        return build(
            module.AddPartitionsToTxnResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(ErrorCode.NONE),
            results_by_transaction=tuple(results),
        )

    # -- AddOffsetsToTxn, EndTxn ----------------------------------------------------------

    async def add_offsets_to_txn(self, request: Request) -> Any:
        """TRANSACTIONAL_ID WRITE and GROUP READ, as Kafka asks."""
        body, module = request.body, response_module(25, request.api_version)
        if self._tid_denied(Op.WRITE, body.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not self._authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif not body.group_id:
            code = ErrorCode.INVALID_GROUP_ID
        else:
            answer = await self._runtime.add_offsets(
                body.transactional_id,
                producer_id=body.producer_id,
                producer_epoch=body.producer_epoch,
                group_id=body.group_id,
                offsets_partition=self._offsets_partition(body.group_id),
            )
            code = answer.error
        return build(
            module.AddOffsetsToTxnResponse, throttle_time=_NO_THROTTLE, error_code=error_code(code)
        )

    async def end_txn(self, request: Request) -> Any:
        """EndTxn v0-v4 is transaction version 1: the producer keeps its epoch.  v5
        (transaction version 2) bumps it and answers the producer id and epoch the
        producer's next transaction uses (-1 and -1 with an error)."""
        body, module = request.body, response_module(26, request.api_version)
        pid, epoch = -1, -1
        if self._tid_denied(Op.WRITE, body.transactional_id):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            answer = await self._runtime.end_transaction(
                body.transactional_id,
                producer_id=body.producer_id,
                producer_epoch=body.producer_epoch,
                commit=body.committed,
                bump_epoch=transaction_version_2(26, request.api_version),
            )
            code = answer.error
            if code is ErrorCode.NONE:
                pid, epoch = answer.producer_id, answer.producer_epoch
        return build(
            module.EndTxnResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            producer_id=pid,
            producer_epoch=epoch,
        )

    # -- TxnOffsetCommit ------------------------------------------------------------------

    async def txn_offset_commit(self, request: Request) -> Any:
        """To the group coordinator (TRANSACTIONAL_ID WRITE and GROUP READ): the offsets
        are the producer's transactional batch in ``__consumer_offsets`` and count once the
        transaction's COMMIT marker reaches it.  The transaction coordinator must first
        confirm that AddOffsetsToTxn put the group's ``__consumer_offsets`` partition in
        the producer's open transaction (else INVALID_TXN_STATE, as KIP-890), so that no
        offsets are written outside a transaction the coordinator will finish.  From v5
        (transaction version 2) the coordinator is asked to add that partition instead,
        opening a transaction if none is open, as AddOffsetsToTxn would have."""
        body, module = request.body, response_module(28, request.api_version)
        requested = [(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        if self._tid_denied(Op.WRITE, body.transactional_id):
            codes = [(t, p, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) for t, p in requested]
        elif not self._authz.group(_NO_GRPC_CONTEXT, Op.READ, body.group_id):
            codes = [(t, p, ErrorCode.GROUP_AUTHORIZATION_FAILED) for t, p in requested]
        elif body.producer_id < 0 or body.producer_epoch < 0:
            codes = [(t, p, ErrorCode.INVALID_REQUEST) for t, p in requested]
        elif (verified := await self._offsets_in_transaction(request)) is not ErrorCode.NONE:
            codes = [(t, p, verified) for t, p in requested]
        else:
            r = await self._groups.commit_offsets(
                gv.OffsetCommitRequest(
                    group_id=body.group_id,
                    partitions=tuple(
                        gv.OffsetCommit(
                            t.name,
                            p.partition_index,
                            p.committed_offset,
                            getattr(p, "committed_leader_epoch", -1),
                            p.committed_metadata or "",
                        )
                        for t in body.topics
                        for p in t.partitions
                    ),
                    generation_id=getattr(body, "generation_id", -1),
                    member_id=getattr(body, "member_id", ""),
                    group_instance_id=getattr(body, "group_instance_id", None) or None,
                    producer_id=body.producer_id,
                    producer_epoch=body.producer_epoch,
                )
            )
            codes = partition_codes(requested, r.partitions, r.error_code)
        return build(
            module.TxnOffsetCommitResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                build(
                    module.TxnOffsetCommitResponseTopic,
                    name=topic,
                    partitions=tuple(
                        build(
                            module.TxnOffsetCommitResponsePartition,
                            partition_index=p,
                            error_code=error_code(code),
                        )
                        for p, code in parts
                    ),
                )
                for topic, parts in _by_topic(codes).items()
            ),
        )

    async def _offsets_in_transaction(self, request: Request) -> ErrorCode:
        """The transaction coordinator's answer for the group's ``__consumer_offsets``
        partition: added to the transaction (v5+) or confirmed as added (v0-v4)."""
        body = request.body
        ask = (
            self._replicas.add_to_transaction
            if transaction_version_2(28, request.api_version)
            else self._replicas.verify_transaction
        )
        return await ask(
            body.transactional_id,
            body.producer_id,
            body.producer_epoch,
            self._offsets_partition(body.group_id),
        )

    # -- DescribeTransactions, ListTransactions, DescribeProducers ------------------------

    async def describe_transactions(self, request: Request) -> Any:
        """TRANSACTIONAL_ID DESCRIBE on each id."""
        body, module = request.body, response_module(65, request.api_version)
        states = []
        for tid in body.transactional_ids:
            if self._tid_denied(Op.DESCRIBE, tid):
                d = views.TransactionDescription(
                    tid, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "", 0, 0, 0, 0, ()
                )
            else:
                d = self._runtime.describe(tid)
            # An id in error has Kafka's zero defaults.
            found = d.error is ErrorCode.NONE
            topics: dict[str, list[int]] = {}
            for tp in d.partitions:
                topics.setdefault(tp.topic, []).append(tp.partition)
            states.append(
                build(
                    module.TransactionState,
                    error_code=error_code(d.error),
                    transactional_id=tid,
                    transaction_state=d.state,
                    transaction_timeout=datetime.timedelta(
                        milliseconds=d.transaction_timeout_ms if found else 0
                    ),
                    transaction_start_time=_time_ms(d.transaction_start_time_ms if found else 0),
                    producer_id=d.producer_id if found else 0,
                    producer_epoch=d.producer_epoch if found else 0,
                    topics=tuple(
                        build(module.TopicData, topic=t, partitions=tuple(sorted(ps)))
                        for t, ps in sorted(topics.items())
                    ),
                )
            )
        return build(
            module.DescribeTransactionsResponse,
            throttle_time=_NO_THROTTLE,
            transaction_states=tuple(states),
        )

    async def list_transactions(self, request: Request) -> Any:
        """The ids this coordinator holds that the caller may DESCRIBE."""
        body, module = request.body, response_module(66, request.api_version)
        duration = getattr(body, "duration_filter", -1)
        listed, unknown = self._runtime.list_transactions(
            state_filters=list(body.state_filters),
            producer_id_filters=list(body.producer_id_filters),
            duration_filter_ms=duration if duration > 0 else -1,
        )
        return build(
            module.ListTransactionsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(ErrorCode.NONE),
            unknown_state_filters=tuple(unknown),
            transaction_states=tuple(
                build(
                    module.TransactionState,
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listed
                if not self._tid_denied(Op.DESCRIBE, t.transactional_id)
            ),
        )

    async def describe_producers(self, request: Request) -> Any:
        """Each partition's active producers, from its leader here (TOPIC READ)."""
        body, module = request.body, response_module(61, request.api_version)
        refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.READ, (t.name for t in body.topics))
        topics = []
        for t in body.topics:
            partitions = []
            for index in t.partition_indexes:
                producers: list[hosted.ActiveProducer]
                if refused is not None and t.name in refused:
                    code, message, producers = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "", []
                else:
                    code, message, producers = self._replicas.active_producers(
                        TopicPartition(t.name, index)
                    )
                partitions.append(
                    build(
                        module.PartitionResponse,
                        partition_index=index,
                        error_code=error_code(code),
                        error_message=message or None,
                        active_producers=tuple(
                            build(
                                module.ProducerState,
                                producer_id=a.producer_id,
                                producer_epoch=a.producer_epoch,
                                last_sequence=a.last_sequence,
                                last_timestamp=-1,
                                coordinator_epoch=-1,
                                current_txn_start_offset=a.current_txn_start_offset,
                            )
                            for a in producers
                        ),
                    )
                )
            topics.append(build(module.TopicResponse, name=t.name, partitions=tuple(partitions)))
        return build(
            module.DescribeProducersResponse, throttle_time=_NO_THROTTLE, topics=tuple(topics)
        )
