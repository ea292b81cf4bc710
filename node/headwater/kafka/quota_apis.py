"""The Kafka listener's client quota administration (KIP-546), what ``kafka-configs
--entity-type users|clients`` and ``Admin.alterClientQuotas`` send:
DescribeClientQuotas (48) and AlterClientQuotas (49).

Rules, as Kafka's ``ZkAdminManager``:

* describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS (refused
  entries answer CLUSTER_AUTHORIZATION_FAILED);
* a malformed describe filter answers INVALID_REQUEST for the whole request
  (:func:`headwater.kafka.user_apis.invalid_quota_filter`); an ``ip`` component
  matches nothing (Headwater has no connection-rate quotas);
* each alteration entry is validated on its own and written
  (:func:`headwater.server.runtime.quota_admin.alter_entry`, shared with the gRPC
  ``ClientQuotaAdmin`` service): an unknown key, a bad
  entity or a value not above zero answers INVALID_REQUEST for that entry with
  Kafka's message, and nothing of it is written; ``validate_only`` writes nothing;
* quotas are read from and written to ZooKeeper
  (:mod:`headwater.coordination.client_quotas`) in a worker thread; every broker
  follows the change notifications.

On the wire the default entity is a null name.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any, cast

from headwater import errors
from headwater.coordination.client_quotas import ClientQuotaStore
from headwater.errors import ErrorCode
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.kafka.user_apis import invalid_quota_filter
from headwater.quotas.entities import EntityType, QuotaEntity, matches
from headwater.security.acls import AclOperation
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.convert import Context
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.quota_admin import alter_entry

_NO_THROTTLE = datetime.timedelta(0)
_NO_GRPC_CONTEXT = cast(Context, None)


def entity_components(entity: QuotaEntity) -> list[tuple[str, str | None]]:
    """``(entity_type, name)`` pairs, user first; None is the default entity."""
    out: list[tuple[str, str | None]] = []
    if entity.has_user:
        out.append((EntityType.USER.value, entity.user))
    if entity.has_client_id:
        out.append((EntityType.CLIENT_ID.value, entity.client_id))
    return out


class KafkaQuotaApis:
    """Client quota administration of one Kafka listener (event-loop only)."""

    def __init__(
        self, *, store: Callable[[], ClientQuotaStore | None], authz: RequestAuthorizer
    ) -> None:
        self._store = store
        self._authz = authz

    def handlers(self) -> dict[int, Callable[[Request], Any]]:
        return {48: self.describe, 49: self.alter}

    def _zk(self) -> ClientQuotaStore:
        store = self._store()
        if store is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return store

    async def describe(self, request: Request) -> Any:
        body, module = request.body, response_module(48, request.api_version)

        def answer(code: ErrorCode, message: str | None, entries: Any) -> Any:
            return build(
                module.DescribeClientQuotasResponse,
                throttle_time=_NO_THROTTLE,
                error_code=error_code(code),
                error_message=message,
                entries=entries,
            )

        components = [(c.entity_type, c.match_type, c.match) for c in body.components]
        denied = self._authz.check_cluster(_NO_GRPC_CONTEXT, AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            return answer(denied.code, denied.message, None)
        reason = invalid_quota_filter(components)
        if reason is not None:
            return answer(ErrorCode.INVALID_REQUEST, reason, None)
        try:
            stored = await run_blocking(self._zk().read_all)
        except errors.HeadwaterError as exc:
            return answer(exc.code, errors.message_of(exc), None)
        entries = []
        for entity, values in sorted(stored.items()):
            if not matches(entity, components, strict=bool(body.strict)):
                continue
            entries.append(
                build(
                    module.EntryData,
                    entity=tuple(
                        build(module.EntityData, entity_type=t, entity_name=n)
                        for t, n in entity_components(entity)
                    ),
                    values=tuple(
                        build(module.ValueData, key=k.value, value=v)
                        for k, v in sorted(values.items())
                    ),
                )
            )
        return answer(ErrorCode.NONE, None, tuple(entries))

    async def alter(self, request: Request) -> Any:
        body, module = request.body, response_module(49, request.api_version)
        denied = self._authz.check_cluster(_NO_GRPC_CONTEXT, AclOperation.ALTER_CONFIGS)
        results = []
        for entry in body.entries:
            code, message = ErrorCode.NONE, None
            if denied is not None:
                code, message = denied.code, denied.message
            else:
                code, text = await alter_entry(
                    self._store,
                    ((e.entity_type, e.entity_name) for e in entry.entity),
                    ((op.key, None if op.remove else float(op.value)) for op in entry.ops),
                    validate_only=bool(body.validate_only),
                )
                message = text or None
            results.append(
                build(
                    module.EntryData,
                    error_code=error_code(code),
                    error_message=message,
                    entity=tuple(
                        build(
                            module.EntityData, entity_type=e.entity_type, entity_name=e.entity_name
                        )
                        for e in entry.entity
                    ),
                )
            )
        return build(
            module.AlterClientQuotasResponse, throttle_time=_NO_THROTTLE, entries=tuple(results)
        )
