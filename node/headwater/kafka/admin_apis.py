"""The Kafka listener's topic and config administration: CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Configs are :mod:`headwater.server.runtime.config_admin`'s, as for the gRPC Admin
service: topics, and brokers' dynamic configs (the replication throttles); every
resource of a request is checked and changed on its own, all or nothing (an invalid
key or value answers INVALID_CONFIG or INVALID_REQUEST for it and changes nothing).

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
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from headwater import errors
from headwater.coordination.admin import NewTopic
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import decode_topic_id
from headwater.errors import ErrorCode
from headwater.kafka import topic_ids
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.security.acls import AclOperation as Op
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context
from headwater.server.runtime import config_admin
from headwater.server.runtime.config_admin import AlterOp, ConfigAdmin, ConfigSource, ResourceType
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.offload import run_blocking

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)
_POLL_S = 0.05


class KafkaAdminApis:
    """Topic administration of one Kafka listener (event-loop only)."""

    def __init__(
        self,
        *,
        coordinator: Callable[[], BrokerCoordinator | None],
        metadata: MetadataCache,
        authz: RequestAuthorizer,
        configs: ConfigAdmin,
    ) -> None:
        """``configs``: describing and altering configs, shared with the gRPC Admin service."""
        self._configs = configs
        self._coordinator = coordinator
        self._metadata = metadata
        self._authz = authz

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {
            19: self.create_topics,
            20: self.delete_topics,
            32: self.describe_configs,
            33: self.alter_configs,
            37: self.create_partitions,
            44: self.incremental_alter_configs,
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
        ids = topic_ids.TopicIds(self._metadata)
        created_ids = {r.name: decode_topic_id(r.topic_id) for r in created}
        return build(
            module.CreateTopicsResponse,
            throttle_time=_NO_THROTTLE,
            topics=tuple(
                build(
                    module.CreatableTopicResult,
                    name=t.name,
                    topic_id=(
                        created_ids.get(t.name) or ids.id_of(t.name)
                        if answers[t.name][0] is ErrorCode.NONE and not body.validate_only
                        else None
                    ),
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
        """DeleteTopics v1-v6; v6 names each topic by name or by id
        (:func:`topics_to_delete`)."""
        body, module = request.body, response_module(20, request.api_version)
        coordinator = self._coordinator()
        named = (
            [(t.name, t.topic_id) for t in body.topics]
            if request.api_version >= 6
            else [(name, None) for name in body.topic_names]
        )
        ids = topic_ids.TopicIds(self._metadata)
        wanted, refused = topics_to_delete(named, ids.name_of)
        answers: list[tuple[str | None, uuid.UUID | None, ErrorCode, str | None]] = list(refused)
        deleted: dict[str, int] = {}
        for name, by_id in wanted:
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
                answers.append((name, ids.id_of(name), ErrorCode.NONE, None))
            except errors.HeadwaterError as exc:
                shown = (
                    None
                    if by_id is not None and exc.code is ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    else name
                )
                answers.append((shown, by_id, exc.code, errors.message_of(exc) or None))
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
                    topic_id=tid,
                    error_code=error_code(ErrorCode.REQUEST_TIMED_OUT if name in late else code),
                    error_message=message,
                )
                for name, tid, code, message in answers
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
        """Topic configs (overrides DYNAMIC_TOPIC_CONFIG, the rest STATIC_BROKER_CONFIG) and
        broker configs (the dynamic replication throttles, then the static settings,
        read-only, secrets hidden); ``broker ""`` is the cluster-wide default."""
        body, module = request.body, response_module(32, request.api_version)
        results = []
        for res in body.resources:
            configs: list[Any] = []
            try:
                type_ = config_admin.resource_type(res.resource_type)
                self._configs.authorize(
                    _NO_GRPC_CONTEXT, Op.DESCRIBE_CONFIGS, type_, res.resource_name
                )
                entries = await self._configs.describe(
                    type_, res.resource_name, frozenset(res.configuration_keys or ())
                )
                configs = [
                    build(
                        module.DescribeConfigsResourceResult,
                        name=e.name,
                        value=e.value,
                        read_only=e.read_only,
                        config_source=int(e.source),
                        is_default=e.source is ConfigSource.DEFAULT_CONFIG,
                        is_sensitive=e.is_sensitive,
                        synonyms=(),
                        config_type=0,  # UNKNOWN
                        documentation=None,
                    )
                    for e in entries
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

    async def alter_configs(self, request: Request) -> Any:
        """Kafka's AlterConfigs replaces a resource's overrides: the keys it names are set
        (a null value deletes), every other override is deleted."""
        body, module = request.body, response_module(33, request.api_version)

        async def change(type_: ResourceType, name: str, res: Any) -> None:
            named = [(c.name, c.value) for c in res.configs]
            ops = alter_configs_ops(
                named,
                await self._configs.topic_overrides(name)
                if type_ is ResourceType.TOPIC
                else await self._configs.broker_overrides(name),
            )
            set_, delete = config_admin.apply_ops({}, {}, ops)
            await self._configs.alter(type_, name, set_, delete, validate_only=body.validate_only)

        answers = await self._alter(body, module, change)
        return build(module.AlterConfigsResponse, throttle_time=_NO_THROTTLE, responses=answers)

    async def incremental_alter_configs(self, request: Request) -> Any:
        """SET, DELETE, APPEND and SUBTRACT (list configs only) of named keys."""
        body, module = request.body, response_module(44, request.api_version)

        async def change(type_: ResourceType, name: str, res: Any) -> None:
            ops = incremental_ops(res.configs)
            if type_ is ResourceType.TOPIC:
                current = await self._configs.topic_overrides(name)
                defaults = self._configs.topic_defaults()
            else:
                current, defaults = await self._configs.broker_overrides(name), {}
            set_, delete = config_admin.apply_ops(current, defaults, ops)
            await self._configs.alter(type_, name, set_, delete, validate_only=body.validate_only)

        answers = await self._alter(body, module, change)
        return build(
            module.IncrementalAlterConfigsResponse, throttle_time=_NO_THROTTLE, responses=answers
        )

    async def _alter(
        self,
        body: Any,
        module: Any,
        change: Callable[[ResourceType, str, Any], Awaitable[None]],
    ) -> tuple[Any, ...]:
        """Each resource's AlterConfigsResourceResponse: ``change`` it, or the error."""
        answers = []
        seen: set[tuple[int, str]] = set()
        for res in body.resources:
            try:
                if (res.resource_type, res.resource_name) in seen:
                    raise errors.InvalidRequestError(
                        f"resource {res.resource_name!r} is named twice in one request"
                    )
                seen.add((res.resource_type, res.resource_name))
                type_ = config_admin.resource_type(res.resource_type)
                self._configs.authorize(
                    _NO_GRPC_CONTEXT, Op.ALTER_CONFIGS, type_, res.resource_name
                )
                await change(type_, res.resource_name, res)
                code, message = ErrorCode.NONE, None
            except errors.HeadwaterError as exc:
                code, message = exc.code, errors.message_of(exc) or None
            answers.append(
                build(
                    module.AlterConfigsResourceResponse,
                    error_code=error_code(code),
                    error_message=message,
                    resource_type=res.resource_type,
                    resource_name=res.resource_name,
                )
            )
        return tuple(answers)

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


def alter_configs_ops(
    named: Sequence[tuple[str, str | None]], current: Mapping[str, str]
) -> list[tuple[str, AlterOp, str | None]]:
    """AlterConfigs' full set of overrides as operations on ``current``: SET each named key
    with a value, DELETE each named with null and every current override not named."""
    ops: list[tuple[str, AlterOp, str | None]] = [
        (name, AlterOp.SET if value is not None else AlterOp.DELETE, value) for name, value in named
    ]
    given = {name for name, _ in named}
    ops += [(key, AlterOp.DELETE, None) for key in sorted(current) if key not in given]
    return ops


def incremental_ops(configs: Sequence[Any]) -> list[tuple[str, AlterOp, str | None]]:
    """IncrementalAlterConfigs' ``(name, op, value)``; an unknown op is INVALID_REQUEST."""
    out = []
    for c in configs:
        try:
            op = AlterOp(c.config_operation)
        except ValueError:
            raise errors.InvalidRequestError(
                f"unknown config operation {c.config_operation} for {c.name!r}"
            ) from None
        out.append((c.name, op, c.value))
    return out


_ZERO_ID = uuid.UUID(int=0)


def topics_to_delete(
    named: Sequence[tuple[str | None, uuid.UUID | None]],
    name_of: Callable[[uuid.UUID], str | None],
) -> tuple[
    list[tuple[str, uuid.UUID | None]],
    list[tuple[str | None, uuid.UUID | None, ErrorCode, str | None]],
]:
    """A DeleteTopics request's ``(name, id)`` entries (v6 names a topic by one of them;
    older versions by name) as Kafka's controller reads them: the topics to delete, each
    as ``(name, id it was named by or None)``, and the entries refused, each as the
    ``(name, id, error, message)`` it is answered.

    Refused, as Kafka refuses them: an entry with neither or both; a name or an id given
    twice (each once, as a duplicate); an id no topic has (UNKNOWN_TOPIC_ID); a name whose
    topic an id of the same request already names.
    """
    names: dict[str, None] = {}
    ids: dict[uuid.UUID, None] = {}
    refused: list[tuple[str | None, uuid.UUID | None, ErrorCode, str | None]] = []
    twice_names: dict[str, None] = {}
    twice_ids: dict[uuid.UUID, None] = {}
    for name, tid in named:
        tid = tid if tid != _ZERO_ID else None
        if name is None and tid is None:
            refused.append(
                (
                    None,
                    _ZERO_ID,
                    ErrorCode.INVALID_REQUEST,
                    "Neither topic name nor id were specified.",
                )
            )
        elif name is not None and tid is not None:
            refused.append(
                (
                    name,
                    tid,
                    ErrorCode.INVALID_REQUEST,
                    "You may not specify both topic name and topic id.",
                )
            )
        elif name is not None:
            (twice_names if name in names else names)[name] = None
        elif tid is not None:
            (twice_ids if tid in ids else ids)[tid] = None
    refused += [
        (name, _ZERO_ID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for name in twice_names
    ]
    refused += [(None, tid, ErrorCode.INVALID_REQUEST, "Duplicate topic id.") for tid in twice_ids]
    wanted: list[tuple[str, uuid.UUID | None]] = []
    by_id: dict[str, uuid.UUID] = {}
    for tid in ids:
        if tid in twice_ids:
            continue
        name = name_of(tid)
        if name is None:
            refused.append(
                (None, tid, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
            )
        else:
            by_id[name] = tid
            wanted.append((name, tid))
    for name in names:
        if name in twice_names:
            continue
        if name in by_id:
            refused.append(
                (
                    name,
                    by_id[name],
                    ErrorCode.INVALID_REQUEST,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
        else:
            wanted.append((name, None))
    return wanted, refused
