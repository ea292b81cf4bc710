"""The Admin gRPC service: validates and writes ZooKeeper through the coordinator.

Any broker accepts these (docs/design.md): the coordinator writes the znodes, the
controller notices and acts.  CreateTopics and CreatePartitions then wait,
bounded by the request's ``timeout_ms``, until this broker's metadata cache
shows a leader for every new partition, so a client can produce right after.
Blocking ZooKeeper calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc

from headwater import errors
from headwater.coordination import reassignment_admin
from headwater.coordination.admin import NewTopic
from headwater.coordination.broker import BrokerCoordinator
from headwater.errors import ErrorCode
from headwater.security.acls import AclOperation as Op
from headwater.server import log_dirs
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.auth.identity import current_identity
from headwater.server.config import BrokerConfig
from headwater.server.convert import Context, brokers_to_proto, pb_error
from headwater.server.metrics import BrokerMetrics, Timer
from headwater.server.runtime import config_admin
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.offload import run_blocking
from headwater.storage import LogManager
from headwater.v1 import admin_pb2, admin_pb2_grpc, common_pb2
from headwater.values import TopicPartition

DEFAULT_TIMEOUT_MS = 30000


class AdminService(admin_pb2_grpc.AdminServicer):
    def __init__(
        self,
        *,
        coordinator: Callable[[], BrokerCoordinator | None],
        metadata: MetadataCache,
        metadata_changed: asyncio.Condition,
        metrics: BrokerMetrics,
        config: BrokerConfig,
        authz: RequestAuthorizer = ALLOW_ALL,
        log_manager: Callable[[], LogManager | None] = lambda: None,
    ) -> None:
        """``authz`` answers Kafka's ACL checks (docs/security.md), one line per RPC;
        ``log_manager``: this broker's logs, for DescribeLogDirs (None: not open yet)."""
        self._coordinator = coordinator
        self._log_manager = log_manager
        self._authz = authz
        self._metadata = metadata
        self._changed = metadata_changed
        self._metrics = metrics
        self._config = config
        self._configs = config_admin.ConfigAdmin(
            coordinator=coordinator, config=config, authz=authz
        )

    def _coord(self) -> BrokerCoordinator:
        coordinator = self._coordinator()
        if coordinator is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return coordinator

    async def _wait_for(self, predicate: Callable[[], bool], timeout_ms: int) -> bool:
        timeout = (timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS) / 1000.0
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(predicate), timeout)
        return predicate()

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: Context
    ) -> admin_pb2.CreateTopicsResponse:
        timer = Timer(self._metrics, "CreateTopics")
        coordinator = self._coord()
        may_create_any = self._authz.cluster(context, Op.CREATE)
        refused = [
            t.name
            for t in request.topics
            if not may_create_any and not self._authz.topic(context, Op.CREATE, t.name)
        ]
        topics = [
            NewTopic(
                name=t.name,
                num_partitions=t.num_partitions if t.num_partitions != 0 else -1,
                replication_factor=t.replication_factor if t.replication_factor != 0 else -1,
                assignments={a.partition: tuple(a.broker_ids) for a in t.assignments} or None,
                configs=dict(t.configs),
            )
            for t in request.topics
            if t.name not in refused
        ]
        results = await run_blocking(
            coordinator.create_topics, topics, validate_only=request.validate_only
        )
        late: dict[str, errors.HeadwaterError] = {}
        if not request.validate_only:
            created = [(r.name, r.num_partitions) for r in results if r.error is None]
            late = await self._wait_for_leaders(created, request.timeout_ms, "created")
        timer.done()
        outcomes = [(r, r.error if r.error is not None else late.get(r.name)) for r in results]
        return admin_pb2.CreateTopicsResponse(
            topics=[
                admin_pb2.CreatableTopicResult(
                    name=r.name,
                    error=pb_error(error.code if error is not None else ErrorCode.NONE),
                    error_message=errors.message_of(error),
                    num_partitions=r.num_partitions,
                    replication_factor=r.replication_factor,
                )
                for r, error in outcomes
            ]
            + [
                admin_pb2.CreatableTopicResult(
                    name=name,
                    error=pb_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    error_message=f"not authorized to CREATE TOPIC {name!r}",
                )
                for name in refused
            ]
        )

    async def _wait_for_leaders(
        self, topics: list[tuple[str, int]], timeout_ms: int, what: str
    ) -> dict[str, errors.HeadwaterError]:
        """Wait until every partition of ``topics`` has a leader; REQUEST_TIMED_OUT for the rest.

        As in Kafka, the change stays written: the controller goes on with it,
        and the error only says it was not finished within ``timeout_ms``.
        """
        if not topics:
            return {}
        await self._wait_for(
            lambda: all(self._metadata.topic_has_leaders(n, k) for n, k in topics), timeout_ms
        )
        waited_ms = timeout_ms if timeout_ms > 0 else DEFAULT_TIMEOUT_MS
        return {
            name: errors.RequestTimedOutError(
                f"topic {name!r} was {what}, but not all of its {count} partitions had a "
                f"leader within {waited_ms} ms; the controller is still working on it"
            )
            for name, count in topics
            if not self._metadata.topic_has_leaders(name, count)
        }

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: Context
    ) -> admin_pb2.DeleteTopicsResponse:
        timer = Timer(self._metrics, "DeleteTopics")
        coordinator = self._coord()
        out = []
        deleted = []
        for name in request.topics:
            try:
                if not self._authz.topic(context, Op.DELETE, name):
                    raise errors.TopicAuthorizationFailedError(
                        f"not authorized to DELETE TOPIC {name!r}"
                    )
                if name not in await run_blocking(coordinator.get_topics):
                    raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
                await run_blocking(coordinator.delete_topic, name)
                deleted.append(name)
                out.append(admin_pb2.TopicResult(name=name, error=pb_error(ErrorCode.NONE)))
            except errors.HeadwaterError as exc:
                out.append(
                    admin_pb2.TopicResult(
                        name=name, error=pb_error(exc.code), error_message=errors.message_of(exc)
                    )
                )
        if deleted:
            await self._wait_for(
                lambda: all(n not in self._metadata.topics for n in deleted), request.timeout_ms
            )
            waited_ms = request.timeout_ms if request.timeout_ms > 0 else DEFAULT_TIMEOUT_MS
            for result in out:
                if result.name in deleted and result.name in self._metadata.topics:
                    late = errors.RequestTimedOutError(
                        f"topic {result.name!r} is marked for deletion, but this broker's "
                        f"metadata still listed it after {waited_ms} ms; the controller is "
                        "still working on it"
                    )
                    result.error = pb_error(late.code)
                    result.error_message = errors.message_of(late)
        timer.done()
        return admin_pb2.DeleteTopicsResponse(topics=out)

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: Context
    ) -> admin_pb2.CreatePartitionsResponse:
        timer = Timer(self._metrics, "CreatePartitions")
        coordinator = self._coord()
        out = []
        grown = []
        for t in request.topics:
            try:
                if not self._authz.topic(context, Op.ALTER, t.name):
                    raise errors.TopicAuthorizationFailedError(
                        f"not authorized to ALTER TOPIC {t.name!r}"
                    )
                await run_blocking(
                    coordinator.create_partitions,
                    t.name,
                    t.count,
                    assignments={i: tuple(a.broker_ids) for i, a in enumerate(t.assignments)}
                    or None,
                    validate_only=request.validate_only,
                )
                grown.append((t.name, t.count))
                out.append(admin_pb2.TopicResult(name=t.name, error=pb_error(ErrorCode.NONE)))
            except errors.HeadwaterError as exc:
                out.append(
                    admin_pb2.TopicResult(
                        name=t.name, error=pb_error(exc.code), error_message=errors.message_of(exc)
                    )
                )
        if grown and not request.validate_only:
            late = await self._wait_for_leaders(grown, request.timeout_ms, "grown")
            for result in out:
                error = late.get(result.name)
                if error is not None and ErrorCode(result.error) is ErrorCode.NONE:
                    result.error = pb_error(error.code)
                    result.error_message = errors.message_of(error)
        timer.done()
        return admin_pb2.CreatePartitionsResponse(topics=out)

    async def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: Context
    ) -> admin_pb2.DescribeConfigsResponse:
        timer = Timer(self._metrics, "DescribeConfigs")
        results = []
        for res in request.resources:
            try:
                type_ = config_admin.resource_type(res.type)
                self._configs.authorize(context, Op.DESCRIBE_CONFIGS, type_, res.name)
                entries = await self._configs.describe(type_, res.name, set(res.keys))
                results.append(
                    admin_pb2.DescribeConfigsResult(
                        error=pb_error(ErrorCode.NONE),
                        type=res.type,
                        name=res.name,
                        entries=[
                            admin_pb2.ConfigEntry(
                                name=e.name,
                                value=e.value or "",
                                read_only=e.read_only,
                                is_sensitive=e.is_sensitive,
                                source=int(e.source),  # type: ignore[arg-type]
                            )
                            for e in entries
                        ],
                    )
                )
            except errors.HeadwaterError as exc:
                results.append(
                    admin_pb2.DescribeConfigsResult(
                        error=pb_error(exc.code),
                        error_message=errors.message_of(exc),
                        type=res.type,
                        name=res.name,
                    )
                )
        timer.done()
        return admin_pb2.DescribeConfigsResponse(results=results)

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: Context
    ) -> admin_pb2.AlterConfigsResponse:
        timer = Timer(self._metrics, "AlterConfigs")
        results = []
        for res in request.resources:
            try:
                set_ = {c.name: c.value for c in res.configs if c.op == admin_pb2.SET}
                delete = [c.name for c in res.configs if c.op == admin_pb2.DELETE]
                type_ = config_admin.resource_type(res.type)
                self._configs.authorize(context, Op.ALTER_CONFIGS, type_, res.name)
                await self._configs.alter(
                    type_, res.name, set_, delete, validate_only=request.validate_only
                )
                code, message = ErrorCode.NONE, ""
            except errors.HeadwaterError as exc:
                code, message = exc.code, errors.message_of(exc)
            results.append(
                admin_pb2.AlterConfigsResult(
                    error=pb_error(code), error_message=message, type=res.type, name=res.name
                )
            )
        timer.done()
        return admin_pb2.AlterConfigsResponse(results=results)

    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: Context
    ) -> admin_pb2.DescribeClusterResponse:
        timer = Timer(self._metrics, "DescribeCluster")
        if not self._authz.cluster(context, Op.DESCRIBE):
            timer.done("unauthorized")  # the response has no error field: a gRPC status
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                "CLUSTER_AUTHORIZATION_FAILED: not authorized to DESCRIBE the cluster",
            )
        description = await run_blocking(self._coord().describe_cluster)
        timer.done()
        return admin_pb2.DescribeClusterResponse(
            cluster_id=description.cluster_id,
            controller_id=description.controller_id
            if description.controller_id is not None
            else -1,
            brokers=brokers_to_proto(
                description.brokers, listener=current_identity(context).listener
            ),
        )

    async def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: Context
    ) -> admin_pb2.ElectLeadersResponse:
        timer = Timer(self._metrics, "ElectLeaders")
        if not self._authz.cluster(context, Op.ALTER):
            timer.done("unauthorized")
            return admin_pb2.ElectLeadersResponse(
                results=[
                    common_pb2.PartitionError(
                        topic=p.topic,
                        partition=p.partition,
                        error=pb_error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                        error_message="not authorized to ALTER the cluster",
                    )
                    for p in request.partitions
                ]
            )
        if request.election_type != admin_pb2.PREFERRED:
            timer.done("unsupported")
            return admin_pb2.ElectLeadersResponse(
                results=[
                    common_pb2.PartitionError(
                        topic=p.topic,
                        partition=p.partition,
                        error=pb_error(ErrorCode.INVALID_REQUEST),
                        error_message="only preferred leader elections are supported",
                    )
                    for p in request.partitions
                ]
            )
        partitions = [TopicPartition(p.topic, p.partition) for p in request.partitions] or None
        timeout_s = (request.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000.0
        try:
            outcome = await run_blocking(
                self._coord().elect_preferred_leaders, partitions, timeout_s=timeout_s
            )
        except errors.HeadwaterError as exc:
            outcome = {tp: exc.code for tp in partitions or []}
        timer.done()
        return admin_pb2.ElectLeadersResponse(
            results=[
                common_pb2.PartitionError(topic=t, partition=p, error=pb_error(code))
                for (t, p), code in sorted(outcome.items())
            ]
        )

    async def AlterPartitionReassignments(
        self, request: admin_pb2.AlterPartitionReassignmentsRequest, context: Context
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        """KIP-455 on the controller; any other broker answers NOT_CONTROLLER per partition."""
        timer = Timer(self._metrics, "AlterPartitionReassignments")
        wanted: dict[TopicPartition, tuple[int, ...] | None] = {}
        answers: dict[TopicPartition, errors.HeadwaterError | None] = {}
        for p in request.partitions:
            tp = TopicPartition(p.topic, p.partition)
            if tp in wanted or tp in answers:
                answers[tp] = errors.InvalidRequestError(f"partition {tp} is listed twice")
                wanted.pop(tp, None)
                continue
            wanted[tp] = None if p.cancel else tuple(p.replicas)
        timeout_s = (request.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000.0
        if wanted and not self._authz.cluster(context, Op.ALTER):
            refused = errors.ClusterAuthorizationFailedError("not authorized to ALTER the cluster")
            answers.update({tp: refused for tp in wanted})
            wanted = {}
        if wanted:
            try:
                answers.update(
                    await run_blocking(
                        reassignment_admin.alter_partition_reassignments,
                        self._coord(),
                        wanted,
                        timeout_s=timeout_s,
                    )
                )
            except errors.HeadwaterError as exc:
                answers.update({tp: exc for tp in wanted})
        timer.done()
        return admin_pb2.AlterPartitionReassignmentsResponse(
            results=[
                common_pb2.PartitionError(
                    topic=tp.topic,
                    partition=tp.partition,
                    error=pb_error(error.code if error is not None else ErrorCode.NONE),
                    error_message=errors.message_of(error),
                )
                for tp, error in answers.items()
            ]
        )

    async def ListPartitionReassignments(
        self, request: admin_pb2.ListPartitionReassignmentsRequest, context: Context
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        """The moves in progress, from ZooKeeper's assignment znodes (any broker answers)."""
        timer = Timer(self._metrics, "ListPartitionReassignments")
        wanted = [TopicPartition(p.topic, p.partition) for p in request.partitions] or None
        try:
            if not self._authz.cluster(context, Op.DESCRIBE):
                raise errors.ClusterAuthorizationFailedError(
                    "not authorized to DESCRIBE the cluster"
                )
            moving = await run_blocking(
                reassignment_admin.list_partition_reassignments, self._coord().store, wanted
            )
        except errors.HeadwaterError as exc:
            timer.done("error")
            return admin_pb2.ListPartitionReassignmentsResponse(
                error=pb_error(exc.code), error_message=errors.message_of(exc)
            )
        timer.done()
        return admin_pb2.ListPartitionReassignmentsResponse(
            error=pb_error(ErrorCode.NONE),
            reassignments=[
                admin_pb2.OngoingPartitionReassignment(
                    topic=tp.topic,
                    partition=tp.partition,
                    replicas=list(m.replicas),
                    adding_replicas=list(m.adding_replicas),
                    removing_replicas=list(m.removing_replicas),
                )
                for tp, m in moving.items()
            ],
        )

    async def DescribeLogDirs(
        self, request: admin_pb2.DescribeLogDirsRequest, context: Context
    ) -> admin_pb2.DescribeLogDirsResponse:
        """This broker's log dirs (Kafka's DescribeLogDirs; :mod:`headwater.server.log_dirs`)."""
        timer = Timer(self._metrics, "DescribeLogDirs")
        wanted: dict[str, list[int]] | None = None
        if request.topics:
            wanted = {}
            for t in request.topics:
                wanted.setdefault(t.topic, []).extend(t.partitions)
        try:
            if not self._authz.cluster(context, Op.DESCRIBE):
                raise errors.ClusterAuthorizationFailedError(
                    "not authorized to DESCRIBE the cluster"
                )
            logs = self._log_manager()
            if logs is None:
                raise errors.BrokerNotAvailableError("the broker's logs are not open yet")
            dirs = await run_blocking(log_dirs.describe_log_dirs, logs, wanted)
        except errors.HeadwaterError as exc:
            timer.done("error")
            return admin_pb2.DescribeLogDirsResponse(
                error=pb_error(exc.code),
                error_message=errors.message_of(exc),
                broker_id=self._config.broker_id,
            )
        timer.done()
        return admin_pb2.DescribeLogDirsResponse(
            error=pb_error(ErrorCode.NONE),
            broker_id=self._config.broker_id,
            results=[log_dirs.to_proto(d) for d in dirs],
        )
