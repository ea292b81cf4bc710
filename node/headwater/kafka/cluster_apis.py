"""The Kafka listener's replica administration: DescribeLogDirs, ElectLeaders,
AlterPartitionReassignments, ListPartitionReassignments.

Each calls what the gRPC Admin service calls: :func:`headwater.server.log_dirs.describe_log_dirs`
over this broker's logs, the coordinator's preferred leader election, and
:mod:`headwater.coordination.reassignment_admin` (KIP-455 moves, started on the
controller: any other broker answers NOT_CONTROLLER, and Kafka's clients send them to the
controller Metadata names).  ACLs as Kafka's: DESCRIBE on the cluster to describe, ALTER
to elect or move.  Only preferred elections are served (an unclean one is
INVALID_REQUEST for each partition).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, cast

from headwater import errors
from headwater.coordination import reassignment_admin
from headwater.coordination.broker import BrokerCoordinator
from headwater.errors import ErrorCode
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.security.acls import AclOperation as Op
from headwater.server import log_dirs
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context
from headwater.server.runtime.offload import run_blocking
from headwater.storage import LogManager
from headwater.values import TopicPartition

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)
PREFERRED = 0
"""ElectLeaders' election type of a preferred leader election (1 is unclean)."""
_DEFAULT_TIMEOUT_S = 30.0


def _seconds(timeout: datetime.timedelta) -> float:
    s = timeout.total_seconds()
    return s if s > 0 else _DEFAULT_TIMEOUT_S


def _by_topic(items: list[tuple[TopicPartition, Any]]) -> dict[str, list[tuple[int, Any]]]:
    out: dict[str, list[tuple[int, Any]]] = {}
    for tp, value in items:
        out.setdefault(tp.topic, []).append((tp.partition, value))
    return out


class KafkaClusterApis:
    """Replica administration of one Kafka listener (event-loop only)."""

    def __init__(
        self,
        *,
        coordinator: Callable[[], BrokerCoordinator | None],
        log_manager: Callable[[], LogManager | None],
        authz: RequestAuthorizer,
    ) -> None:
        self._coordinator = coordinator
        self._log_manager = log_manager
        self._authz = authz

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            35: self.describe_log_dirs,
            43: self.elect_leaders,
            45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments,
        }

    def _coord(self) -> BrokerCoordinator:
        coordinator = self._coordinator()
        if coordinator is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return coordinator

    async def describe_log_dirs(self, request: Request) -> Any:
        body, module = request.body, response_module(35, request.api_version)
        wanted: dict[str, list[int]] | None = None
        if body.topics is not None:
            wanted = {}
            for t in body.topics:
                wanted.setdefault(t.topic, []).extend(t.partitions)
        dirs: list[log_dirs.LogDirInfo] = []
        code = ErrorCode.NONE
        logs = self._log_manager()
        if not self._authz.cluster(_NO_GRPC_CONTEXT, Op.DESCRIBE):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif logs is None:
            code = ErrorCode.BROKER_NOT_AVAILABLE
        else:
            dirs = await run_blocking(log_dirs.describe_log_dirs, logs, wanted)
        return build(
            module.DescribeLogDirsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            results=tuple(
                build(
                    module.DescribeLogDirsResult,
                    error_code=error_code(d.error),
                    log_dir=d.path,
                    total_bytes=d.total_bytes,
                    usable_bytes=d.usable_bytes,
                    topics=tuple(
                        build(
                            module.DescribeLogDirsTopic,
                            name=name,
                            partitions=tuple(
                                build(
                                    module.DescribeLogDirsPartition,
                                    partition_index=p,
                                    partition_size=info.size,
                                    offset_lag=info.offset_lag,
                                    is_future_key=info.is_future,
                                )
                                for p, info in sorted(parts)
                            ),
                        )
                        for name, parts in sorted(_by_topic(list(d.replicas.items())).items())
                    ),
                )
                for d in dirs
            ),
        )

    async def elect_leaders(self, request: Request) -> Any:
        """Preferred leader elections; all partitions when the request names none."""
        body, module = request.body, response_module(43, request.api_version)
        named = (
            [TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions]
            if body.topic_partitions is not None
            else None
        )
        top = ErrorCode.NONE
        outcome: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        if not self._authz.cluster(_NO_GRPC_CONTEXT, Op.ALTER):
            top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif getattr(body, "election_type", PREFERRED) != PREFERRED:
            refusal = (ErrorCode.INVALID_REQUEST, "only preferred leader elections are served")
            outcome = {tp: refusal for tp in named or ()}
        else:
            try:
                elected = await run_blocking(
                    self._coord().elect_preferred_leaders, named, timeout_s=_seconds(body.timeout)
                )
                outcome = {tp: (code, None) for tp, code in elected.items()}
            except errors.HeadwaterError as exc:
                if named is None:
                    top = exc.code
                outcome = {tp: (exc.code, errors.message_of(exc) or None) for tp in named or ()}
        if top is not ErrorCode.NONE and request.api_version == 0 and named:
            outcome = {tp: (top, None) for tp in named}  # v0 has no top-level error
        return build(
            module.ElectLeadersResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(top),
            replica_election_results=tuple(
                build(
                    module.ReplicaElectionResult,
                    topic=topic,
                    partition_result=tuple(
                        build(
                            module.PartitionResult,
                            partition_id=p,
                            error_code=error_code(code),
                            error_message=message,
                        )
                        for p, (code, message) in sorted(parts)
                    ),
                )
                for topic, parts in sorted(_by_topic(sorted(outcome.items())).items())
            ),
        )

    async def alter_partition_reassignments(self, request: Request) -> Any:
        """Start (replicas), replace or cancel (null replicas) moves, on the controller; a
        partition named twice is INVALID_REQUEST and is not moved."""
        body, module = request.body, response_module(45, request.api_version)
        wanted: dict[TopicPartition, tuple[int, ...] | None] = {}
        answers: dict[TopicPartition, errors.HeadwaterError | None] = {}
        order: list[TopicPartition] = []
        for t in body.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                order.append(tp)
                if tp in wanted or tp in answers:
                    answers[tp] = errors.InvalidRequestError(f"partition {tp} is listed twice")
                    wanted.pop(tp, None)
                    continue
                wanted[tp] = tuple(p.replicas) if p.replicas is not None else None
        top: errors.HeadwaterError | None = None
        if not self._authz.cluster(_NO_GRPC_CONTEXT, Op.ALTER):
            top = errors.ClusterAuthorizationFailedError("not authorized to ALTER the cluster")
        elif wanted:
            try:
                answers.update(
                    await run_blocking(
                        reassignment_admin.alter_partition_reassignments,
                        self._coord(),
                        wanted,
                        timeout_s=_seconds(body.timeout),
                    )
                )
            except errors.HeadwaterError as exc:
                top = exc
        return build(
            module.AlterPartitionReassignmentsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(top.code if top is not None else ErrorCode.NONE),
            error_message=errors.message_of(top) or None,
            responses=tuple(
                build(
                    module.ReassignableTopicResponse,
                    name=topic,
                    partitions=tuple(
                        build(
                            module.ReassignablePartitionResponse,
                            partition_index=p,
                            error_code=error_code(
                                error.code if error is not None else ErrorCode.NONE
                            ),
                            error_message=errors.message_of(error) or None,
                        )
                        for p, error in parts
                    ),
                )
                for topic, parts in _by_topic(
                    [(tp, answers.get(tp)) for tp in dict.fromkeys(order)]
                ).items()
            )
            if top is None
            else (),
        )

    async def list_partition_reassignments(self, request: Request) -> Any:
        body, module = request.body, response_module(46, request.api_version)
        wanted = (
            [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
            if body.topics is not None
            else None
        )
        code, message, moving = ErrorCode.NONE, None, {}
        try:
            if not self._authz.cluster(_NO_GRPC_CONTEXT, Op.DESCRIBE):
                raise errors.ClusterAuthorizationFailedError(
                    "not authorized to DESCRIBE the cluster"
                )
            moving = await run_blocking(
                reassignment_admin.list_partition_reassignments, self._coord().store, wanted
            )
        except errors.HeadwaterError as exc:
            code, message = exc.code, errors.message_of(exc) or None
        return build(
            module.ListPartitionReassignmentsResponse,
            throttle_time=_NO_THROTTLE,
            error_code=error_code(code),
            error_message=message,
            topics=tuple(
                build(
                    module.OngoingTopicReassignment,
                    name=topic,
                    partitions=tuple(
                        build(
                            module.OngoingPartitionReassignment,
                            partition_index=p,
                            replicas=tuple(m.replicas),
                            adding_replicas=tuple(m.adding_replicas),
                            removing_replicas=tuple(m.removing_replicas),
                        )
                        for p, m in sorted(parts)
                    ),
                )
                for topic, parts in sorted(_by_topic(list(moving.items())).items())
            ),
        )
