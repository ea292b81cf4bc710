"""The Kafka listener's request handlers: one broker core behind two front doors.

Each handler turns a decoded request (a ``kio`` entity, any version of its API) into
calls on the same runtime objects the gRPC servicers call (the
:class:`~headwater.server.runtime.replica_manager.ReplicaManager` and the
:class:`~headwater.server.runtime.metadata_cache.MetadataCache`) and builds the
response at the request's version (:func:`headwater.kafka.protocol.build` keeps the
fields each version has).  Records pass through as the RecordBatch bytes the client
sent and the log holds: nothing here decodes a record.

ACLs are those of the gRPC listeners: the connection's identity (``User:ANONYMOUS``
from the peer's host on a PLAINTEXT listener) is in the context variable
:func:`headwater.server.auth.identity.current_identity` reads, so the authorizer is
asked exactly as the servicers ask it.
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

from headwater import errors
from headwater.coordination import names
from headwater.coordination.model import BrokerRegistration
from headwater.errors import ErrorCode
from headwater.fetch_sessions import (
    FINAL_EPOCH,
    FetchSessionCache,
    FetchSessionError,
    Session,
    TopicIdPartition,
    Wanted,
    WantedById,
)
from headwater.kafka import protocol
from headwater.kafka.acl_apis import KafkaAclApis
from headwater.kafka.admin_apis import KafkaAdminApis
from headwater.kafka.cluster_apis import KafkaClusterApis
from headwater.kafka.group_apis import KafkaGroupApis
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.kafka.quota_apis import KafkaQuotaApis
from headwater.kafka.topic_ids import TopicIds
from headwater.kafka.txn_apis import KafkaTxnApis
from headwater.kafka.user_apis import KafkaUserApis
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import ResourceType
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context
from headwater.server.metrics import BrokerMetrics, Timer
from headwater.server.runtime import hosted
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.values import TopicPartition

ZERO_UUID = uuid.UUID(int=0)
"""Kafka's "no topic id": a topic Metadata does not know has none."""

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)
"""The authorizer reads the identity from its context variable, never from this."""


def kafka_address(reg: BrokerRegistration, listener: str) -> tuple[str, int] | None:
    """Where a client of Kafka listener ``listener`` reaches broker ``reg``; None when that
    broker has no such listener (a broker registered without named endpoints has only its
    gRPC listener)."""
    if not reg.endpoints:
        return None
    return reg.endpoint_for(listener)


def _ms(value: datetime.timedelta) -> int:
    return int(value.total_seconds() * 1000)


def _time_or_none(ms: int) -> datetime.datetime | None:
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _adds_partitions(request: Request) -> bool:
    """Whether a Produce request's transactional batches add their partitions to the
    producer's transaction (transaction version 2, Produce v12+) rather than only being
    checked against an earlier AddPartitionsToTxn (KIP-890 part 1)."""
    return bool(request.body.transactional_id) and protocol.transaction_version_2(
        request.api_key, request.api_version
    )


_VERIFICATION_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


def produce_error(code: ErrorCode, api_version: int) -> ErrorCode:
    """A partition's Produce error as Kafka's broker answers it: the transaction
    coordinator's retriable answers to the leader's check (a produce never gets them
    otherwise) become NOT_ENOUGH_REPLICAS, which every client retries without a metadata
    refresh; a transaction version 2 producer (v12+) gets CONCURRENT_TRANSACTIONS as is."""
    if code not in _VERIFICATION_RETRIABLE:
        return code
    if code is ErrorCode.CONCURRENT_TRANSACTIONS and protocol.transaction_version_2(0, api_version):
        return code
    return ErrorCode.NOT_ENOUGH_REPLICAS


def sasl_illegal_state(request: Request) -> Any:
    """SaslHandshake or SaslAuthenticate answered ILLEGAL_SASL_STATE."""
    module = response_module(request.api_key, request.api_version)
    if request.api_key == 17:
        return build(
            module.SaslHandshakeResponse,
            error_code=error_code(ErrorCode.ILLEGAL_SASL_STATE),
            mechanisms=(),
        )
    return build(
        module.SaslAuthenticateResponse,
        error_code=error_code(ErrorCode.ILLEGAL_SASL_STATE),
        error_message="no SASL exchange in progress on this connection",
        auth_bytes=b"",
        session_lifetime=_NO_THROTTLE,
    )


class KafkaApis:
    """Answers the requests of one Kafka listener (event-loop only)."""

    def __init__(
        self,
        *,
        listener: str,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        metrics: BrokerMetrics,
        authz: RequestAuthorizer,
        next_producer_id: Callable[[], int],
        groups: KafkaGroupApis | None = None,
        admin: KafkaAdminApis | None = None,
        acls: KafkaAclApis | None = None,
        cluster: KafkaClusterApis | None = None,
        transactions: KafkaTxnApis | None = None,
        users: KafkaUserApis | None = None,
        quotas: KafkaQuotaApis | None = None,
    ) -> None:
        """``next_producer_id``: the broker's producer id allocator, shared with the gRPC
        listeners so that no two producers get the same id; ``groups``, ``admin``,
        ``acls`` and ``cluster``: the group, topic and config, ACL and replica
        administration APIs (:mod:`headwater.kafka.group_apis`,
        :mod:`headwater.kafka.admin_apis`, :mod:`headwater.kafka.acl_apis`,
        :mod:`headwater.kafka.cluster_apis`); ``transactions``: the transaction APIs
        (:mod:`headwater.kafka.txn_apis`), which answer FindCoordinator's key_type 1 and
        InitProducerId with a transactional id and leave the rest to the handlers here;
        ``users``: SCRAM credentials (:mod:`headwater.kafka.user_apis`); ``quotas``:
        client quota administration (:mod:`headwater.kafka.quota_apis`)."""
        self._next_producer_id = next_producer_id
        self._fetch_sessions = FetchSessionCache(first_id=random.randrange(1, 1 << 31))
        self._topic_ids = TopicIds(metadata)
        self._request_counts: dict[tuple[int, int], Any] = {}
        self._listener = listener
        self._replicas = replicas
        self._metadata = metadata
        self._metrics = metrics
        self._authz = authz
        self._handlers: dict[int, Callable[[Request], Awaitable[Any]]] = {
            0: self._produce,
            1: self._fetch,
            2: self._list_offsets,
            3: self._metadata_answer,
            17: self._sasl_out_of_place,
            18: self._api_versions,
            21: self._delete_records,
            23: self._offset_for_leader_epoch,
            36: self._sasl_out_of_place,
            22: self._init_producer_id,
            60: self._describe_cluster,
            **(groups.handlers() if groups is not None else {}),
            **(admin.handlers() if admin is not None else {}),
            **(acls.handlers() if acls is not None else {}),
            **(cluster.handlers() if cluster is not None else {}),
            **(users.handlers() if users is not None else {}),
            **(quotas.handlers() if quotas is not None else {}),
        }
        if transactions is not None:
            self._handlers.update(
                transactions.handlers(
                    find_coordinator=self._handlers.get(10),
                    init_producer_id=self._init_producer_id,
                )
            )

    @property
    def api_keys(self) -> frozenset[int]:
        return frozenset(self._handlers)

    def count(self, request: Request) -> None:
        """Counts a request received, by API and version (Kafka's ``RequestsPerSec`` with
        its ``request`` and ``version`` tags): which versions clients speak."""
        key = (request.api_key, request.api_version)
        counter = self._request_counts.get(key)
        if counter is None:
            counter = self._request_counts[key] = self._metrics.kafka_requests.labels(
                self._listener, request.api_name, str(request.api_version)
            )
        counter.inc()

    async def handle(self, request: Request) -> Any | None:
        """The response entity, or None when the request gets none (Produce with acks=0)."""
        if request.version_fallback:
            return protocol.unsupported_api_versions_response()
        return await self._handlers[request.api_key](request)

    # -- ApiVersions ------------------------------------------------------------------------

    async def _api_versions(self, request: Request) -> Any:
        return protocol.api_versions_response(request.api_version)

    # -- SaslHandshake, SaslAuthenticate ----------------------------------------------------

    async def _sasl_out_of_place(self, request: Request) -> Any:
        """A SASL request the connection's authentication did not take (a PLAINTEXT or SSL
        listener, or an authenticated connection that cannot re-authenticate): Kafka's
        ILLEGAL_SASL_STATE.  The SASL_* listeners' exchanges are
        :mod:`headwater.kafka.server`'s."""
        return sasl_illegal_state(request)

    # -- InitProducerId ---------------------------------------------------------------------

    async def _init_producer_id(self, request: Request) -> Any:
        body, authz = request.body, self._authz
        module = response_module(22, request.api_version)
        pid, epoch, code = -1, -1, ErrorCode.NONE
        if body.transactional_id is not None:
            code = ErrorCode.INVALID_REQUEST  # no transaction coordinator on this listener
        elif authz.enabled and not (
            authz.cluster(_NO_GRPC_CONTEXT, Op.IDEMPOTENT_WRITE)
            or authz.by_resource_type(_NO_GRPC_CONTEXT, Op.WRITE, ResourceType.TOPIC)
        ):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # Kafka 3.x (KIP-679)
        elif getattr(body, "producer_id", -1) >= 0 and body.producer_epoch < 32767:
            pid, epoch = body.producer_id, body.producer_epoch + 1  # an epoch bump (KIP-360)
        else:
            pid, epoch = self._next_producer_id(), 0
        return build(
            module.InitProducerIdResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            producer_id=pid,
            producer_epoch=epoch,
        )

    # -- Metadata ---------------------------------------------------------------------------

    async def _metadata_answer(self, request: Request) -> Any:
        timer = Timer(self._metrics, "Metadata")
        version, body, cache, authz = request.api_version, request.body, self._metadata, self._authz
        module = response_module(3, version)
        listing = body.topics is None or (version == 0 and not body.topics)
        wanted: list[str] = (
            sorted(cache.topics) if listing else [t.name for t in body.topics if t.name]
        )
        if listing and authz.enabled:
            wanted = [n for n in wanted if authz.topic(_NO_GRPC_CONTEXT, Op.DESCRIBE, n)]
        topics = []
        for name in wanted:
            code = ErrorCode.NONE
            if not listing and not authz.topic(_NO_GRPC_CONTEXT, Op.DESCRIBE, name):
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            parts = cache.topics.get(name) if code is ErrorCode.NONE else None
            if parts is None:
                if code is ErrorCode.NONE:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    try:
                        names.validate_topic_name(name)
                    except errors.InvalidTopicError:
                        code = ErrorCode.INVALID_TOPIC_EXCEPTION
                topics.append(
                    build(
                        module.MetadataResponseTopic,
                        error_code=error_code(code),
                        name=name,
                        topic_id=ZERO_UUID,
                        is_internal=False,
                        partitions=(),
                    )
                )
                continue
            partitions = []
            for p in sorted(parts):
                ps = parts[p]
                lai = ps.leader_and_isr
                leader, leader_code = self._leader_here(lai.leader, version)
                partitions.append(
                    build(
                        module.MetadataResponsePartition,
                        error_code=error_code(leader_code),
                        partition_index=p,
                        leader_id=leader,
                        leader_epoch=lai.leader_epoch,
                        replica_nodes=tuple(ps.replicas),
                        isr_nodes=tuple(lai.isr),
                        offline_replicas=tuple(cache.offline_replicas(ps)),
                    )
                )
            topics.append(
                build(
                    module.MetadataResponseTopic,
                    error_code=error_code(ErrorCode.NONE),
                    name=name,
                    topic_id=self._topic_ids.id_of(name),
                    is_internal=names.is_internal(name),
                    partitions=tuple(partitions),
                )
            )
        brokers = [
            build(module.MetadataResponseBroker, node_id=b, host=host, port=port, rack=rack)
            for b, host, port, rack in self._brokers()
        ]
        timer.done()
        return build(
            module.MetadataResponse,
            throttle_time=_NO_THROTTLE,
            brokers=tuple(brokers),
            cluster_id=cache.cluster_id or None,
            controller_id=cache.controller_id,
            topics=tuple(topics),
        )

    def _leader_here(self, leader: int, version: int) -> tuple[int, ErrorCode]:
        """The leader Metadata names to a client of this listener, and the partition's
        error: a leader that is not live, or (during a roll that adds this listener) has
        no endpoint on it, is none, as in Kafka: LEADER_NOT_AVAILABLE, and from v6 on
        LISTENER_NOT_FOUND for the missing endpoint."""
        reg = self._metadata.brokers.get(leader)
        if reg is None:
            return -1, ErrorCode.LEADER_NOT_AVAILABLE
        if kafka_address(reg, self._listener) is None:
            return -1, (
                ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
            )
        return leader, ErrorCode.NONE

    def _brokers(self) -> list[tuple[int, str, int, str | None]]:
        """``(id, host, port, rack)`` of every live broker with this Kafka listener."""
        out = []
        for reg in sorted(self._metadata.brokers.values(), key=lambda r: r.broker_id):
            address = kafka_address(reg, self._listener)
            if address is not None:
                out.append((reg.broker_id, address[0], address[1], reg.rack))
        return out

    # -- DescribeCluster --------------------------------------------------------------------

    async def _describe_cluster(self, request: Request) -> Any:
        body, module = request.body, response_module(60, request.api_version)
        cache = self._metadata
        if getattr(body, "endpoint_type", 1) != 1:  # 2 asks for KRaft controllers
            code, message = ErrorCode.INVALID_REQUEST, "only broker endpoints (endpoint_type 1)"
        elif not self._authz.cluster(_NO_GRPC_CONTEXT, Op.DESCRIBE):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            message = "not authorized to DESCRIBE CLUSTER the cluster"
        else:
            code, message = ErrorCode.NONE, None
        return build(
            module.DescribeClusterResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            error_message=message,
            endpoint_type=1,
            cluster_id=cache.cluster_id,
            controller_id=cache.controller_id,
            brokers=tuple(
                build(module.DescribeClusterBroker, broker_id=b, host=host, port=port, rack=rack)
                for b, host, port, rack in (self._brokers() if code is ErrorCode.NONE else ())
            ),
        )

    # -- Produce ----------------------------------------------------------------------------

    async def _produce(self, request: Request) -> Any | None:
        timer = Timer(self._metrics, "Produce")
        body = request.body
        module = response_module(0, request.api_version)
        requested = [(t.name, p) for t in body.topic_data for p in t.partition_data]
        refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.WRITE, (name for name, _ in requested))
        if body.transactional_id and not self._authz.allowed(
            _NO_GRPC_CONTEXT, Op.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id
        ):
            refused = frozenset(name for name, _ in requested)
            denied = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        else:
            denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        results = await self._replicas.append_records(
            acks=body.acks,
            timeout_ms=_ms(body.timeout),
            entries=[
                (TopicPartition(name, p.index), p.records if p.records is not None else b"")
                for name, p in requested
                if refused is None or name not in refused
            ],
            transactional_id=body.transactional_id or "",
            add_to_transaction=_adds_partitions(request),
        )
        timer.done()
        if body.acks == 0:
            return None
        answers: dict[str, list[Any]] = {}
        for name, p in requested:
            if refused is not None and name in refused:
                answers.setdefault(name, []).append(
                    build(
                        module.PartitionProduceResponse,
                        index=p.index,
                        error_code=error_code(denied),
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                        error_message=None,
                    )
                )
        # KIP-951 (v10+): a partition led elsewhere names its current leader.
        leaders = _LeaderHints(self, module) if request.api_version >= 10 else None
        for r in results:
            code = produce_error(r.error, request.api_version)
            hint = (
                leaders.hint(r.topic_partition, code, moved=_NOT_LEADER)
                if leaders is not None
                else None
            )
            answers.setdefault(r.topic_partition.topic, []).append(
                build(
                    module.PartitionProduceResponse,
                    **({"current_leader": hint} if hint is not None else {}),
                    index=r.topic_partition.partition,
                    error_code=error_code(code),
                    base_offset=r.base_offset,
                    log_append_time=_time_or_none(r.log_append_time_ms),
                    log_start_offset=r.log_start_offset,
                    record_errors=(),
                    error_message=r.message or None,
                )
            )
        return build(
            module.ProduceResponse,
            responses=tuple(
                build(module.TopicProduceResponse, name=name, partition_responses=tuple(parts))
                for name, parts in answers.items()
            ),
            throttle_time=_NO_THROTTLE,
            node_endpoints=leaders.endpoints() if leaders is not None else (),
        )

    # -- Fetch ------------------------------------------------------------------------------

    async def _fetch(self, request: Request) -> Any:
        """Fetch v4-v17: v13+ names topics by id (UNKNOWN_TOPIC_ID for an id no topic has),
        its sessions hold partitions by id; from v16 a NOT_LEADER_OR_FOLLOWER or
        FENCED_LEADER_EPOCH partition names the current leader and the response its
        endpoint (KIP-951).  A replica's fetch (replica id >= 0; v15+ carries it in
        ``replica_state``) is answered as Kafka answers a replica it does not recognise:
        Headwater's followers replicate over gRPC, so none fetches here."""
        timer = Timer(self._metrics, "Fetch")
        body, version = request.body, request.api_version
        module = response_module(1, version)
        replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
        if replica_id >= 0:
            timer.done("replica")
            return self._replica_fetch(module, body)
        try:
            session = self._fetch_session(body, version)
        except FetchSessionError as exc:
            timer.done("session")
            return build(
                module.FetchResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(exc.code),
                session_id=0,
                responses=(),
            )
        reading = session.to_read()
        refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.READ, (w.tp.topic for w in reading))
        results = await self._replicas.fetch(
            replica_id=-1,
            max_wait_ms=_ms(body.max_wait),
            min_bytes=body.min_bytes,
            max_bytes=body.max_bytes,
            specs=[
                hosted.FetchSpec(w.tp, w.fetch_offset, w.current_leader_epoch, w.max_bytes)
                for w in reading
                if refused is None or w.tp.topic not in refused
            ],
            isolation_level=getattr(body, "isolation_level", 0),
        )
        timer.done()
        answers: dict[str, list[Any]] = {}
        for w in reading:
            if refused is not None and w.tp.topic in refused:
                answers.setdefault(w.tp.topic, []).append(
                    _partition_data(
                        module,
                        w.tp.partition,
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        hosted.FetchResult(w.tp, ErrorCode.NONE),
                    )
                )
        leaders = _LeaderHints(self, module) if version >= 16 else None
        for r in results:
            if session.keep(r):
                tp = r.topic_partition
                hint = leaders.hint(tp, r.error) if leaders is not None else None
                answers.setdefault(tp.topic, []).append(
                    _partition_data(module, tp.partition, r.error, r, hint)
                )
        ids = self._topic_ids
        topics = [
            build(
                module.FetchableTopicResponse,
                topic=name,
                topic_id=ids.id_of(name),
                partitions=tuple(parts),
            )
            for name, parts in answers.items()
        ]
        unknown: dict[uuid.UUID, list[Any]] = {}
        for key in session.unknown_topic_ids():
            unknown.setdefault(key.topic_id, []).append(
                _partition_data(
                    module,
                    key.partition,
                    ErrorCode.UNKNOWN_TOPIC_ID,
                    hosted.FetchResult(TopicPartition("", key.partition), ErrorCode.NONE),
                )
            )
        topics += [
            build(module.FetchableTopicResponse, topic_id=tid, partitions=tuple(parts))
            for tid, parts in unknown.items()
        ]
        return build(
            module.FetchResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(ErrorCode.NONE),
            session_id=session.session_id,
            responses=tuple(topics),
            node_endpoints=leaders.endpoints() if leaders is not None else (),
        )

    def _fetch_session(self, body: Any, version: int) -> Session:
        """The fetch session of a consumer's Fetch (:mod:`headwater.fetch_sessions`): by
        topic id from v13, by name before; raises :class:`FetchSessionError`."""
        session_id = getattr(body, "session_id", 0)  # v7+
        epoch = getattr(body, "session_epoch", FINAL_EPOCH)
        if version >= 13:
            return self._fetch_sessions.begin_by_id(
                session_id=session_id,
                epoch=epoch,
                wanted=[
                    WantedById(
                        TopicIdPartition(t.topic_id or ZERO_UUID, p.partition),
                        p.fetch_offset,
                        p.partition_max_bytes,
                        p.current_leader_epoch,
                    )
                    for t in body.topics
                    for p in t.partitions
                ],
                forgotten=[
                    TopicIdPartition(t.topic_id or ZERO_UUID, p)
                    for t in body.forgotten_topics_data
                    for p in t.partitions
                ],
                topic_name=self._topic_ids.name_of,
            )
        return self._fetch_sessions.begin(
            session_id=session_id,
            epoch=epoch,
            wanted=[
                Wanted(
                    TopicPartition(t.topic, p.partition),
                    p.fetch_offset,
                    p.partition_max_bytes,
                    getattr(p, "current_leader_epoch", -1),
                )
                for t in body.topics
                for p in t.partitions
            ],
            forgotten=[
                TopicPartition(t.topic, p)
                for t in getattr(body, "forgotten_topics_data", ())
                for p in t.partitions
            ],
        )

    def _replica_fetch(self, module: Any, body: Any) -> Any:
        """A replica's Fetch, sessionless: every partition TOPIC_AUTHORIZATION_FAILED
        without CLUSTER_ACTION, else NOT_LEADER_OR_FOLLOWER (Kafka's answer to a replica
        that is not one of the partition's)."""
        code = (
            ErrorCode.NOT_LEADER_OR_FOLLOWER
            if self._authz.cluster(_NO_GRPC_CONTEXT, Op.CLUSTER_ACTION)
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        empty = hosted.FetchResult(TopicPartition("", 0), ErrorCode.NONE)
        return build(
            module.FetchResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(ErrorCode.NONE),
            session_id=0,
            responses=tuple(
                build(
                    module.FetchableTopicResponse,
                    topic=getattr(t, "topic", None),
                    topic_id=getattr(t, "topic_id", None),
                    partitions=tuple(
                        _partition_data(module, p.partition, code, empty) for p in t.partitions
                    ),
                )
                for t in body.topics
            ),
        )

    def current_leader(
        self, tp: TopicPartition
    ) -> tuple[int, int, tuple[str, int, str | None] | None]:
        """``(leader id, leader epoch, (host, port, rack) on this listener)`` of ``tp`` as
        the metadata cache knows it: what KIP-951 tells a client that asked the wrong
        broker (-1, -1 and no endpoint when unknown; no endpoint when the leader is not
        live or has no endpoint on this listener)."""
        ps = self._metadata.topics.get(tp.topic, {}).get(tp.partition)
        if ps is None:
            return -1, -1, None
        lai = ps.leader_and_isr
        reg = self._metadata.brokers.get(lai.leader)
        address = kafka_address(reg, self._listener) if reg is not None else None
        endpoint = (address[0], address[1], reg.rack) if address is not None and reg else None
        return lai.leader, lai.leader_epoch, endpoint

    # -- ListOffsets ------------------------------------------------------------------------

    async def _list_offsets(self, request: Request) -> Any:
        timer = Timer(self._metrics, "ListOffsets")
        body = request.body
        module = response_module(2, request.api_version)
        refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.DESCRIBE, (t.name for t in body.topics))
        topics = []
        for t in body.topics:
            partitions = []
            for p in t.partitions:
                if refused is not None and t.name in refused:
                    found = hosted.OffsetLookup(
                        TopicPartition(t.name, p.partition_index),
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                else:
                    found = self._replicas.list_offset(
                        TopicPartition(t.name, p.partition_index),
                        timestamp=p.timestamp,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        replica_id=-1,
                        isolation_level=getattr(body, "isolation_level", 0),
                    )
                partitions.append(
                    build(
                        module.ListOffsetsPartitionResponse,
                        partition_index=p.partition_index,
                        error_code=error_code(found.error),
                        timestamp=found.timestamp,
                        offset=found.offset,
                        leader_epoch=found.leader_epoch,
                    )
                )
            topics.append(
                build(module.ListOffsetsTopicResponse, name=t.name, partitions=tuple(partitions))
            )
        timer.done()
        return build(module.ListOffsetsResponse, throttle_time=_NO_THROTTLE, topics=tuple(topics))

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------

    async def _offset_for_leader_epoch(self, request: Request) -> Any:
        """Each partition's end offset of the asked leader epoch, on its leader: what a
        consumer checks its position against after a leader change (KIP-320), the gRPC
        door's OffsetsForLeaderEpoch.  Kafka's ACLs: CLUSTER_ACTION allows every topic,
        else DESCRIBE on each (a consumer's); ``replica_id`` (v3+) changes nothing, as in
        Kafka's broker, which answers a follower's request from the leader as it answers
        a consumer's.  A stale or newer ``current_leader_epoch`` is FENCED_LEADER_EPOCH
        or UNKNOWN_LEADER_EPOCH, a partition not led here NOT_LEADER_OR_FOLLOWER."""
        timer = Timer(self._metrics, "OffsetsForLeaderEpoch")
        body = request.body
        module = response_module(23, request.api_version)
        refused = (
            None
            if self._authz.cluster(_NO_GRPC_CONTEXT, Op.CLUSTER_ACTION)
            else self._authz.topics(_NO_GRPC_CONTEXT, Op.DESCRIBE, (t.topic for t in body.topics))
        )
        topics = []
        for t in body.topics:
            partitions = []
            for p in t.partitions:
                if refused is not None and t.topic in refused:
                    code, epoch, end = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1
                else:
                    code, epoch, end = self._replicas.offset_for_leader_epoch(
                        TopicPartition(t.topic, p.partition),
                        current_leader_epoch=p.current_leader_epoch,
                        leader_epoch=p.leader_epoch,
                    )
                partitions.append(
                    build(
                        module.EpochEndOffset,
                        error_code=error_code(code),
                        partition=p.partition,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                )
            topics.append(
                build(
                    module.OffsetForLeaderTopicResult, topic=t.topic, partitions=tuple(partitions)
                )
            )
        timer.done()
        return build(
            module.OffsetForLeaderEpochResponse, throttle_time=_NO_THROTTLE, topics=tuple(topics)
        )

    # -- DeleteRecords ----------------------------------------------------------------------

    async def _delete_records(self, request: Request) -> Any:
        """Each partition's log start moves on its leader (DELETE on the topic)."""
        timer = Timer(self._metrics, "DeleteRecords")
        body = request.body
        module = response_module(21, request.api_version)
        refused = self._authz.topics(_NO_GRPC_CONTEXT, Op.DELETE, (t.name for t in body.topics))
        topics = []
        for t in body.topics:
            partitions = []
            for p in t.partitions:
                if refused is not None and t.name in refused:
                    code, low = ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1
                else:
                    code, low, _message = await self._replicas.delete_records(
                        TopicPartition(t.name, p.partition_index), p.offset
                    )
                partitions.append(
                    build(
                        module.DeleteRecordsPartitionResult,
                        partition_index=p.partition_index,
                        low_watermark=low,
                        error_code=error_code(code),
                    )
                )
            topics.append(
                build(module.DeleteRecordsTopicResult, name=t.name, partitions=tuple(partitions))
            )
        timer.done()
        return build(module.DeleteRecordsResponse, throttle_time=_NO_THROTTLE, topics=tuple(topics))


_LEADER_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})
"""The errors whose answer names the current leader (KIP-951): Fetch's."""
_NOT_LEADER = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER})
"""Produce's."""


class _LeaderHints:
    """KIP-951's answer to a client that asked the wrong broker, for one response: each
    moved partition's current leader and epoch, and the endpoints of those leaders."""

    def __init__(self, apis: KafkaApis, module: Any) -> None:
        self._apis = apis
        self._module = module
        self._endpoints: dict[int, Any] = {}

    def hint(
        self, tp: TopicPartition, code: ErrorCode, *, moved: frozenset[ErrorCode] = _LEADER_MOVED
    ) -> Any | None:
        """The ``current_leader`` of a partition answered ``code``; None when ``code``
        does not say the leader moved."""
        if code not in moved:
            return None
        leader, epoch, endpoint = self._apis.current_leader(tp)
        if endpoint is not None and leader not in self._endpoints:
            host, port, rack = endpoint
            self._endpoints[leader] = build(
                self._module.NodeEndpoint, node_id=leader, host=host, port=port, rack=rack
            )
        return build(self._module.LeaderIdAndEpoch, leader_id=leader, leader_epoch=epoch)

    def endpoints(self) -> tuple[Any, ...]:
        return tuple(self._endpoints[b] for b in sorted(self._endpoints))


def _partition_data(
    module: Any, partition: int, code: ErrorCode, r: hosted.FetchResult, leader: Any = None
) -> Any:
    return build(
        module.PartitionData,
        **({"current_leader": leader} if leader is not None else {}),
        partition_index=partition,
        error_code=error_code(code),
        high_watermark=r.high_watermark,
        last_stable_offset=r.last_stable_offset if r.last_stable_offset >= 0 else r.high_watermark,
        log_start_offset=r.log_start_offset,
        # READ_COMMITTED: the aborted transactions the records overlap.
        aborted_transactions=tuple(
            build(module.AbortedTransaction, producer_id=pid, first_offset=first)
            for pid, first in r.aborted
        ),
        preferred_read_replica=-1,
        records=r.records,
    )
