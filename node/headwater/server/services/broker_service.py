"""The Broker gRPC service (data plane): protobuf in, domain calls, protobuf out.

Thin by design (docs/style.md, "Thin servicers"): every decision lives in :class:`ReplicaManager`
and the replication state machines; this module only converts.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, cast

import grpc

from headwater import errors
from headwater.coordination import names
from headwater.errors import ErrorCode
from headwater.fetch_sessions import (
    FINAL_EPOCH,
    FetchSessionCache,
    FetchSessionError,
    Session,
    Wanted,
)
from headwater.quotas.entities import QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.records.allocator import tune_allocator
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context, brokers_to_proto, pb_error
from headwater.server.metrics import BrokerMetrics, Timer
from headwater.server.runtime import hosted
from headwater.server.runtime import replica_manager as rm
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services import throttling
from headwater.server.services.fetch_answer import (
    EncodedPartition,
    encode_fetch_response,
    encode_throttle_time,
)
from headwater.transactions.coordinator_runtime import TransactionCoordinatorRuntime
from headwater.v1 import broker_pb2, broker_pb2_grpc
from headwater.values import TopicPartition

PRODUCER_ID_BITS = 40
"""Producer ids are ``broker_id << 40 | counter``: unique per broker without ZooKeeper.

The counter starts from the broker's start time in milliseconds (mod 2^40), so
a restarted broker does not hand out ids it gave out before (clocks permitting).
"""


class ProducerIdAllocator:
    """Per-broker producer id blocks (see :data:`PRODUCER_ID_BITS`)."""

    def __init__(self, broker_id: int, *, start_ms: int) -> None:
        self._base = broker_id << PRODUCER_ID_BITS
        self._counter = itertools.count(start_ms % (1 << PRODUCER_ID_BITS))

    def next_id(self) -> int:
        return self._base | (next(self._counter) % (1 << PRODUCER_ID_BITS))


class BrokerService(broker_pb2_grpc.BrokerServicer):
    def __init__(
        self,
        *,
        replicas: rm.ReplicaManager,
        metadata: MetadataCache,
        metrics: BrokerMetrics,
        producer_ids: ProducerIdAllocator,
        auto_create: Callable[[str], None] | None = None,
        authz: RequestAuthorizer = ALLOW_ALL,
        transactions: TransactionCoordinatorRuntime | None = None,
        quotas: ClientQuotas | None = None,
    ) -> None:
        """``authz`` answers Kafka's ACL checks (docs/security.md), one line per RPC;
        ``quotas``: the broker's client quotas (:mod:`.throttling`)."""
        self._replicas = replicas
        self._authz = authz
        self._metadata = metadata
        self._metrics = metrics
        self._producer_ids = producer_ids
        self._auto_create = auto_create
        self._transactions_runtime = transactions
        self._quotas = quotas
        self._fetch_sessions = FetchSessionCache(first_id=random.randrange(1, 1 << 31))
        tune_allocator()  # once per broker process in practice; see its docstring

    @property
    def _transactions(self) -> TransactionCoordinatorRuntime:
        if self._transactions_runtime is None:
            raise RuntimeError("this broker runs no transaction coordinator")
        return self._transactions_runtime

    async def Metadata(
        self, request: broker_pb2.MetadataRequest, context: Context
    ) -> broker_pb2.MetadataResponse:
        timer = Timer(self._metrics, "Metadata")
        cache = self._metadata
        authz = self._authz
        listing = request.all_topics or not request.topics
        wanted = sorted(cache.topics) if listing else request.topics
        if listing and authz.enabled:  # Kafka hides the topics one may not describe
            wanted = [n for n in wanted if authz.topic(context, Op.DESCRIBE, n)]
        topics = []
        for name in wanted:
            if not listing and not authz.topic(context, Op.DESCRIBE, name):
                topics.append(_topic_denied(name))
                continue
            parts = cache.topics.get(name)
            if parts is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                try:
                    names.validate_topic_name(name)
                except errors.InvalidTopicError:
                    code = ErrorCode.INVALID_TOPIC_EXCEPTION
                if code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._auto_create is not None:
                    if not (
                        authz.cluster(context, Op.CREATE) or authz.topic(context, Op.CREATE, name)
                    ):
                        topics.append(_topic_denied(name))
                        continue
                    self._auto_create(name)
                    code = ErrorCode.LEADER_NOT_AVAILABLE
                topics.append(broker_pb2.TopicMetadata(error=pb_error(code), name=name))
                continue
            partitions = []
            for p in sorted(parts):
                ps = parts[p]
                lai = ps.leader_and_isr
                leader = lai.leader if lai.leader in cache.brokers else -1
                partitions.append(
                    broker_pb2.PartitionMetadata(
                        error=pb_error(
                            ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                        ),
                        partition=p,
                        leader=leader,
                        leader_epoch=lai.leader_epoch,
                        replicas=list(ps.replicas),
                        isr=list(lai.isr),
                        offline_replicas=cache.offline_replicas(ps),
                    )
                )
            topics.append(
                broker_pb2.TopicMetadata(
                    name=name, internal=names.is_internal(name), partitions=partitions
                )
            )
        timer.done()
        return broker_pb2.MetadataResponse(
            # Kafka: the endpoints of the listener the request came in on.
            brokers=brokers_to_proto(
                cache.brokers.values(), listener=current_identity(context).listener
            ),
            controller_id=cache.controller_id,
            cluster_id=cache.cluster_id,
            topics=topics,
        )

    async def Produce(
        self, request: broker_pb2.ProduceRequest, context: Context
    ) -> broker_pb2.ProduceResponse:
        timer = Timer(self._metrics, "Produce")
        refused = self._authz.topics(context, Op.WRITE, (p.topic for p in request.partitions))
        if request.transactional_id and not self._authz.allowed(
            context, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            refused, denied = frozenset(p.topic for p in request.partitions), code
        else:
            denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        results = await self._replicas.append_records(
            acks=request.acks,
            timeout_ms=request.timeout_ms,
            entries=[
                (TopicPartition(p.topic, p.partition), p.records)
                for p in request.partitions
                if refused is None or p.topic not in refused
            ],
            transactional_id=request.transactional_id,
        )
        timer.done()
        throttle_ms = 0
        if self._quotas is not None and self._quotas.quotas:  # else nothing to record
            throttle_ms = throttling.record(
                self._quotas,
                QuotaKey.PRODUCER_BYTE_RATE,
                context,
                sum(len(p.records) for p in request.partitions),
            )
            await throttling.hold(throttle_ms)
        return broker_pb2.ProduceResponse(
            throttle_time_ms=throttle_ms,
            partitions=_refused(
                request.partitions, refused, denied, broker_pb2.ProducePartitionResponse
            )
            + [
                broker_pb2.ProducePartitionResponse(
                    topic=r.topic_partition.topic,
                    partition=r.topic_partition.partition,
                    error=pb_error(r.error),
                    error_message=r.message,
                    base_offset=r.base_offset,
                    log_append_time_ms=r.log_append_time_ms,
                    log_start_offset=r.log_start_offset,
                )
                for r in results
            ],
        )

    async def Fetch(
        self, request: broker_pb2.FetchRequest, context: Context
    ) -> broker_pb2.FetchResponse:
        """The answer as a message, for callers in this process; the gRPC handlers
        (:func:`add_broker_service`) send :meth:`fetch_encoded`'s bytes."""
        return broker_pb2.FetchResponse.FromString(await self.fetch_encoded(request, context))

    async def FetchStream(
        self, requests: AsyncIterator[broker_pb2.FetchRequest], context: Context
    ) -> AsyncIterator[broker_pb2.FetchResponse]:
        """:meth:`Fetch` for each request of the stream, answered in order."""
        async for request in requests:
            yield await self.Fetch(request, context)

    async def fetch_stream_encoded(
        self, requests: AsyncIterator[broker_pb2.FetchRequest], context: Context
    ) -> AsyncIterator[bytes]:
        """:meth:`fetch_encoded` (a long poll) for each request of the stream, in order.

        A follower's stream (the replica fetchers keep one open per leader) ends after
        the answer that finds this broker stopping, so that stopping the server does not
        wait out its grace period on it; the follower opens a new one (refused until this
        broker is back), as its next unary call would be refused."""
        async for request in requests:
            yield await self.fetch_encoded(request, context)
            if request.replica_id >= 0 and self._replicas.stopped:
                return

    async def fetch_encoded(self, request: broker_pb2.FetchRequest, context: Context) -> bytes:
        """The Fetch answer as ``FetchResponse`` wire bytes, the record bytes copied
        once (:mod:`~headwater.server.services.fetch_answer`)."""
        timer = Timer(self._metrics, "Fetch" if request.replica_id < 0 else "FollowerFetch")
        if request.replica_id >= 0:  # a follower: CLUSTER_ACTION, else all refused (Kafka)
            refused = (
                None
                if self._authz.cluster(context, Op.CLUSTER_ACTION)
                else frozenset(p.topic for p in request.partitions)
            )
        else:
            refused = self._authz.topics(context, Op.READ, (p.topic for p in request.partitions))
        try:
            session = self._fetch_session(request, sessions_allowed=refused is None)
        except FetchSessionError as exc:
            timer.done("session")
            return broker_pb2.FetchResponse(error=pb_error(exc.code)).SerializeToString()
        if session is None:
            specs = [
                hosted.FetchSpec(
                    TopicPartition(p.topic, p.partition),
                    p.fetch_offset,
                    p.current_leader_epoch,
                    p.partition_max_bytes,
                )
                for p in request.partitions
                if refused is None or p.topic not in refused
            ]
        else:
            specs = [
                hosted.FetchSpec(tp, s.fetch_offset, s.current_leader_epoch, s.max_bytes)
                for tp, s in session.partitions.items()
            ]
        results = await self._replicas.fetch(
            replica_id=request.replica_id,
            may_join_isr=not request.shutting_down,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            specs=specs,
            isolation_level=request.isolation_level,
        )
        if session is not None:
            kept = [session.keep(r) for r in results]
            results = [r for r, keep in zip(results, kept, strict=True) if keep]
        timer.done()
        throttle_ms = 0
        if request.replica_id < 0 and self._quotas is not None and self._quotas.quotas:
            throttle_ms = throttling.record(
                self._quotas,
                QuotaKey.CONSUMER_BYTE_RATE,
                context,
                sum(len(r.records) for r in results),
            )
            await throttling.hold(throttle_ms)
        FetchedPartition = broker_pb2.FetchedPartition
        head = encode_throttle_time(throttle_ms)
        if session is not None:
            head += broker_pb2.FetchResponse(session_id=session.session_id).SerializeToString()
        return head + encode_fetch_response(
            _refused(
                request.partitions, refused, ErrorCode.TOPIC_AUTHORIZATION_FAILED, FetchedPartition
            ),
            (
                EncodedPartition(
                    head=FetchedPartition(
                        topic=r.topic_partition.topic,
                        partition=r.topic_partition.partition,
                        error=pb_error(r.error),
                        error_message=r.message,
                        high_watermark=r.high_watermark,
                        last_stable_offset=(
                            r.last_stable_offset if r.last_stable_offset >= 0 else r.high_watermark
                        ),
                        log_start_offset=r.log_start_offset,
                    ),
                    records=r.records,
                    tail=FetchedPartition(
                        preferred_read_replica=-1,
                        log_end_offset=r.log_end_offset,
                        aborted_transactions=[
                            broker_pb2.AbortedTransaction(producer_id=pid, first_offset=first)
                            for pid, first in r.aborted
                        ],
                    ),
                )
                for r in results
            ),
        )

    def _fetch_session(
        self, request: broker_pb2.FetchRequest, *, sessions_allowed: bool
    ) -> Session | None:
        """The fetch session ``request`` runs in (:mod:`headwater.fetch_sessions`), or None
        for a sessionless fetch; raises :class:`FetchSessionError`.  Only followers allowed
        CLUSTER_ACTION get sessions: for others no session exists, and an epoch 0 fetch
        is answered sessionless (session id 0), as Kafka's broker may."""
        epoch = request.session_epoch if request.HasField("session_epoch") else FINAL_EPOCH
        if epoch == FINAL_EPOCH and not request.session_id:
            return None
        if epoch < FINAL_EPOCH:
            raise FetchSessionError(
                ErrorCode.INVALID_FETCH_SESSION_EPOCH, f"no fetch session epoch {epoch}"
            )
        if request.replica_id < 0 or not sessions_allowed:
            if epoch > 0:
                raise FetchSessionError(
                    ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                    f"no fetch session {request.session_id}",
                )
            return None
        session = self._fetch_sessions.begin(
            session_id=request.session_id,
            epoch=epoch,
            wanted=[
                Wanted(
                    TopicPartition(p.topic, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                )
                for p in request.partitions
            ],
            forgotten=[TopicPartition(f.topic, f.partition) for f in request.forgotten],
            replica_id=request.replica_id,
        )
        return session if session.session_id else None

    async def ProduceStream(
        self, requests: AsyncIterator[broker_pb2.ProduceRequest], context: Context
    ) -> AsyncIterator[broker_pb2.ProduceResponse]:
        """:meth:`Produce` for each request of the stream, answered in order."""
        async for request in requests:
            yield await self.Produce(request, context)

    async def ListOffsets(
        self, request: broker_pb2.ListOffsetsRequest, context: Context
    ) -> broker_pb2.ListOffsetsResponse:
        timer = Timer(self._metrics, "ListOffsets")
        refused = self._authz.topics(context, Op.DESCRIBE, (p.topic for p in request.partitions))
        out = _refused(
            request.partitions,
            refused,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            broker_pb2.ListOffsetsPartitionResponse,
        )
        for p in request.partitions:
            if refused is not None and p.topic in refused:
                continue
            r = self._replicas.list_offset(
                TopicPartition(p.topic, p.partition),
                timestamp=p.timestamp,
                current_leader_epoch=p.current_leader_epoch,
                replica_id=request.replica_id,
                isolation_level=request.isolation_level,
            )
            out.append(
                broker_pb2.ListOffsetsPartitionResponse(
                    topic=p.topic,
                    partition=p.partition,
                    error=pb_error(r.error),
                    error_message=r.message,
                    timestamp=r.timestamp,
                    offset=r.offset,
                    leader_epoch=r.leader_epoch,
                )
            )
        timer.done()
        return broker_pb2.ListOffsetsResponse(partitions=out)

    async def OffsetsForLeaderEpoch(
        self, request: broker_pb2.OffsetsForLeaderEpochRequest, context: Context
    ) -> broker_pb2.OffsetsForLeaderEpochResponse:
        timer = Timer(self._metrics, "OffsetsForLeaderEpoch")
        if request.replica_id >= 0 and self._authz.cluster(context, Op.CLUSTER_ACTION):
            refused = None
        else:  # Kafka: a follower without CLUSTER_ACTION still may with DESCRIBE on the topic
            refused = self._authz.topics(
                context, Op.DESCRIBE, (p.topic for p in request.partitions)
            )
        out = _refused(
            request.partitions,
            refused,
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            broker_pb2.EpochEndOffsetResult,
        )
        for p in request.partitions:
            if refused is not None and p.topic in refused:
                continue
            code, epoch, end = self._replicas.offset_for_leader_epoch(
                TopicPartition(p.topic, p.partition),
                current_leader_epoch=p.current_leader_epoch,
                leader_epoch=p.leader_epoch,
            )
            out.append(
                broker_pb2.EpochEndOffsetResult(
                    topic=p.topic,
                    partition=p.partition,
                    error=pb_error(code),
                    leader_epoch=epoch,
                    end_offset=end,
                )
            )
        timer.done()
        return broker_pb2.OffsetsForLeaderEpochResponse(partitions=out)

    async def InitProducerId(
        self, request: broker_pb2.InitProducerIdRequest, context: Context
    ) -> broker_pb2.InitProducerIdResponse:
        timer = Timer(self._metrics, "InitProducerId")
        denied = self._init_producer_id_denied(request, context)
        if denied is not None:
            timer.done("unauthorized")
            return broker_pb2.InitProducerIdResponse(
                error=pb_error(denied),
                error_message="no ACL allows this producer id",
                producer_id=-1,
                producer_epoch=-1,
            )
        if request.transactional_id:
            answer = await self._transactions.init_producer_id(
                request.transactional_id,
                transaction_timeout_ms=request.transaction_timeout_ms,
                producer_id=request.producer_id,
                producer_epoch=request.producer_epoch,
            )
            timer.done("ok" if answer.error is ErrorCode.NONE else answer.error.name.lower())
            return broker_pb2.InitProducerIdResponse(
                error=pb_error(answer.error),
                error_message=answer.message,
                producer_id=answer.producer_id,
                producer_epoch=answer.producer_epoch,
            )
        if request.producer_id >= 0:
            # Bumping an existing producer's epoch (Kafka KIP-360).
            epoch = request.producer_epoch + 1
            if epoch > 32767:
                pid, epoch = self._producer_ids.next_id(), 0
            else:
                pid = request.producer_id
        else:
            pid, epoch = self._producer_ids.next_id(), 0
        timer.done()
        return broker_pb2.InitProducerIdResponse(
            error=pb_error(ErrorCode.NONE), producer_id=pid, producer_epoch=epoch
        )

    def _init_producer_id_denied(
        self, request: broker_pb2.InitProducerIdRequest, context: Context
    ) -> ErrorCode | None:
        """Kafka 3.x: a transactional id needs WRITE on it; an idempotent producer
        IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679)."""
        authz = self._authz
        if not authz.enabled:
            return None
        if request.transactional_id:
            if authz.allowed(
                context, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
            ):
                return None
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if authz.cluster(context, Op.IDEMPOTENT_WRITE) or authz.by_resource_type(
            context, Op.WRITE, ResourceType.TOPIC
        ):
            return None
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _topic_denied(name: str) -> broker_pb2.TopicMetadata:
    return broker_pb2.TopicMetadata(error=pb_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name)


def _refused(
    partitions: Iterable[Any], refused: frozenset[str] | None, code: ErrorCode, message: Any
) -> list[Any]:
    """One ``message(topic, partition, error)`` per requested partition of a refused topic."""
    if refused is None:
        return []
    return [
        message(topic=p.topic, partition=p.partition, error=pb_error(code))
        for p in partitions
        if p.topic in refused
    ]


BROKER_SERVICE = "headwater.v1.Broker"


def add_broker_service(service: BrokerService, server: Any) -> None:
    """Register ``service`` with ``server`` (a gRPC server, or anything with its two
    registration methods): the generated handlers, except that Fetch and
    FetchStream send the bytes :meth:`BrokerService.fetch_encoded` builds as they
    are (no response serializer) instead of serializing a ``FetchResponse``."""
    handlers = _GeneratedHandlers()
    # The generated function only calls the two registration methods, which it has.
    broker_pb2_grpc.add_BrokerServicer_to_server(service, cast("grpc.aio.Server", handlers))
    methods = dict(handlers.methods)
    methods["Fetch"] = grpc.unary_unary_rpc_method_handler(
        service.fetch_encoded,
        request_deserializer=broker_pb2.FetchRequest.FromString,
        response_serializer=None,
    )
    methods["FetchStream"] = grpc.stream_stream_rpc_method_handler(
        service.fetch_stream_encoded,
        request_deserializer=broker_pb2.FetchRequest.FromString,
        response_serializer=None,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(BROKER_SERVICE, methods),)
    )
    server.add_registered_method_handlers(BROKER_SERVICE, methods)


class _GeneratedHandlers:
    """Collects the method handlers the generated ``add_BrokerServicer_to_server`` makes."""

    def __init__(self) -> None:
        self.methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Iterable[Any]) -> None:
        """The same handlers as :meth:`add_registered_method_handlers`'s: not kept twice."""

    def add_registered_method_handlers(
        self, service_name: str, methods: dict[str, grpc.RpcMethodHandler[Any, Any]]
    ) -> None:
        if service_name != BROKER_SERVICE:
            raise ValueError(f"expected the {BROKER_SERVICE} service, got {service_name}")
        self.methods.update(methods)
