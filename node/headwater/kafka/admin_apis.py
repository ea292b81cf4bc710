"""The Kafka listener's topic administration: CreateTopics, DeleteTopics, CreatePartitions,
DescribeConfigs of topics.

They go through the broker's ZooKeeper coordinator, as the gRPC Admin servicer does (any
broker takes them), with the same ACL checks (CREATE on the cluster or the topic; DELETE,
or ALTER for new partitions, on the topic).  As Kafka's, the answer waits up to the
request's timeout for the change to reach this broker's metadata (created or grown topics
led, deleted ones gone); past it, the change stays under way and the topic's answer is
REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from headwater import errors
from headwater.coordination.admin import NewTopic
from headwater.coordination.broker import BrokerCoordinator
from headwater.errors import ErrorCode
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.security.acls import AclOperation as Op
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.offload import run_blocking
from headwater.storage import LogConfig

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)
_POLL_S = 0.05
TOPIC_RESOURCE = 2
"""Kafka's ConfigResource.Type.TOPIC."""
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4


class KafkaAdminApis:
    """Topic administration of one Kafka listener (event-loop only)."""

    def __init__(
        self,
        *,
        coordinator: Callable[[], BrokerCoordinator | None],
        metadata: MetadataCache,
        authz: RequestAuthorizer,
        log_defaults: Callable[[], Mapping[str, str]] = dict,
    ) -> None:
        """``log_defaults``: the broker's ``log.*`` settings as topic config defaults."""
        self._log_defaults = log_defaults
        self._coordinator = coordinator
        self._metadata = metadata
        self._authz = authz

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            19: self.create_topics,
            20: self.delete_topics,
            32: self.describe_configs,
            37: self.create_partitions,
        }

    async def create_topics(self, request: Request) -> Any:
        body, module = request.body, response_module(19, request.api_version)
        authz = self._authz
        may_create_any = authz.cluster(_NO_GRPC_CONTEXT, Op.CREATE)
        answers: dict[str, tuple[ErrorCode, str | None, int, int]] = {}
        wanted: list[NewTopic] = []
        for t in body.topics:
            if not may_create_any and not authz.topic(_NO_GRPC_CONTEXT, Op.CREATE, t.name):
                answers[t.name] = (
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    f"not authorized to CREATE TOPIC {t.name!r}",
                    -1,
                    -1,
                )
                continue
            wanted.append(
                NewTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments={a.partition_index: tuple(a.broker_ids) for a in t.assignments}
                    or None,
                    configs={c.name: c.value for c in t.configs if c.value is not None},
                )
            )
        coordinator = self._coordinator()
        if coordinator is None:
            for t in wanted:
                answers[t.name] = (ErrorCode.NOT_CONTROLLER, "the broker is starting", -1, -1)
            wanted = []
        results = (
            await run_blocking(coordinator.create_topics, wanted, validate_only=body.validate_only)
            if coordinator is not None and wanted
            else []
        )
        created = [r for r in results if r.error is None]
        late: set[str] = set()
        if created and not body.validate_only:
            late = await self._wait(
                {r.name: r.num_partitions for r in created},
                lambda name, n: self._metadata.topic_has_leaders(name, n),
                body.timeout,
            )
        for r in results:
            if r.error is not None:
                answers[r.name] = (r.error.code, errors.message_of(r.error) or None, -1, -1)
            elif r.name in late:
                answers[r.name] = (
                    ErrorCode.REQUEST_TIMED_OUT,
                    "created; its partitions have no leader yet",
                    r.num_partitions,
                    r.replication_factor,
                )
            else:
                answers[r.name] = (ErrorCode.NONE, None, r.num_partitions, r.replication_factor)
        return build(
            module.CreateTopicsResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                build(
                    module.CreatableTopicResult,
                    name=t.name,
                    topic_id=None,
                    error_code=error_code(answers[t.name][0]),
                    error_message=answers[t.name][1],
                    num_partitions=answers[t.name][2],
                    replication_factor=answers[t.name][3],
                    configs=(),
                )
                for t in body.topics
                if t.name in answers
            ),
        )

    async def delete_topics(self, request: Request) -> Any:
        body, module = request.body, response_module(20, request.api_version)
        coordinator = self._coordinator()
        answers: list[tuple[str, ErrorCode, str | None]] = []
        deleted: dict[str, int] = {}
        for name in body.topic_names:
            try:
                if not self._authz.topic(_NO_GRPC_CONTEXT, Op.DELETE, name):
                    raise errors.TopicAuthorizationFailedError(
                        f"not authorized to DELETE TOPIC {name!r}"
                    )
                if coordinator is None:
                    raise errors.NotControllerError("the broker is starting")
                if name not in await run_blocking(coordinator.get_topics):
                    raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
                await run_blocking(coordinator.delete_topic, name)
                deleted[name] = 0
                answers.append((name, ErrorCode.NONE, None))
            except errors.HeadwaterError as exc:
                answers.append((name, exc.code, errors.message_of(exc) or None))
        late = await self._wait(
            deleted, lambda name, _n: name not in self._metadata.topics, body.timeout
        )
        return build(
            module.DeleteTopicsResponse,
            throttle_time=_NO_THROTTLE,
            responses=tuple(
                build(
                    module.DeletableTopicResult,
                    name=name,
                    error_code=error_code(ErrorCode.REQUEST_TIMED_OUT if name in late else code),
                    error_message=message,
                )
                for name, code, message in answers
            ),
        )

    async def create_partitions(self, request: Request) -> Any:
        body, module = request.body, response_module(37, request.api_version)
        coordinator = self._coordinator()
        answers: list[tuple[str, ErrorCode, str | None]] = []
        grown: dict[str, int] = {}
        for t in body.topics:
            try:
                if not self._authz.topic(_NO_GRPC_CONTEXT, Op.ALTER, t.name):
                    raise errors.TopicAuthorizationFailedError(
                        f"not authorized to ALTER TOPIC {t.name!r}"
                    )
                if coordinator is None:
                    raise errors.NotControllerError("the broker is starting")
                await run_blocking(
                    coordinator.create_partitions,
                    t.name,
                    t.count,
                    assignments={i: tuple(a.broker_ids) for i, a in enumerate(t.assignments or ())}
                    or None,
                    validate_only=body.validate_only,
                )
                grown[t.name] = t.count
                answers.append((t.name, ErrorCode.NONE, None))
            except errors.HeadwaterError as exc:
                answers.append((t.name, exc.code, errors.message_of(exc) or None))
        late = (
            set()
            if body.validate_only
            else await self._wait(grown, self._metadata.topic_has_leaders, body.timeout)
        )
        return build(
            module.CreatePartitionsResponse,
            throttle_time=_NO_THROTTLE,
            results=tuple(
                build(
                    module.CreatePartitionsTopicResult,
                    name=name,
                    error_code=error_code(ErrorCode.REQUEST_TIMED_OUT if name in late else code),
                    error_message=message,
                )
                for name, code, message in answers
            ),
        )

    async def describe_configs(self, request: Request) -> Any:
        """Topic configs: every topic setting, the topic's overrides as
        DYNAMIC_TOPIC_CONFIG, the rest from the broker's settings as STATIC_BROKER_CONFIG.
        Broker resources are not served on this listener yet (INVALID_REQUEST)."""
        body, module = request.body, response_module(32, request.api_version)
        coordinator = self._coordinator()
        results = []
        for res in body.resources:
            configs: list[Any] = []
            try:
                if res.resource_type != TOPIC_RESOURCE:
                    raise errors.InvalidRequestError(
                        f"resource type {res.resource_type}: the Kafka listener describes "
                        "topic configs only (broker configs: Headwater's Admin API)"
                    )
                if not self._authz.topic(_NO_GRPC_CONTEXT, Op.DESCRIBE_CONFIGS, res.resource_name):
                    raise errors.TopicAuthorizationFailedError(
                        f"not authorized to DESCRIBE_CONFIGS of TOPIC {res.resource_name!r}"
                    )
                if coordinator is None:
                    raise errors.NotControllerError("the broker is starting")
                name = res.resource_name
                if name not in await run_blocking(coordinator.get_topics):
                    raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
                overrides = await run_blocking(coordinator.get_topic_config, name)
                defaults = LogConfig.from_properties(self._log_defaults())
                merged = LogConfig.from_properties(overrides, defaults=defaults).to_properties()
                keys = set(res.configuration_keys or ())
                configs = [
                    build(
                        module.DescribeConfigsResourceResult,
                        name=key,
                        value=value,
                        read_only=False,
                        config_source=DYNAMIC_TOPIC_CONFIG
                        if key in overrides
                        else STATIC_BROKER_CONFIG,
                        is_sensitive=False,
                        synonyms=(),
                        config_type=0,  # UNKNOWN
                        documentation=None,
                    )
                    for key, value in sorted(merged.items())
                    if not keys or key in keys
                ]
                code, message = ErrorCode.NONE, None
            except errors.HeadwaterError as exc:
                code, message = exc.code, errors.message_of(exc) or None
            results.append(
                build(
                    module.DescribeConfigsResult,
                    error_code=error_code(code),
                    error_message=message,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                    configs=tuple(configs),
                )
            )
        return build(
            module.DescribeConfigsResponse, throttle_time=_NO_THROTTLE, results=tuple(results)
        )

    async def _wait(
        self,
        topics: dict[str, int],
        done: Callable[[str, int], bool],
        timeout: datetime.timedelta,
    ) -> set[str]:
        """Wait until ``done`` for every topic or the timeout; the topics still not done."""
        deadline = time.monotonic() + timeout.total_seconds()
        pending = dict(topics)
        while pending:
            pending = {n: p for n, p in pending.items() if not done(n, p)}
            if not pending or time.monotonic() >= deadline:
                break
            await asyncio.sleep(_POLL_S)
        return set(pending)
