"""The gRPC ClientQuotaAdmin service: Kafka's DescribeClientQuotas and
AlterClientQuotas (KIP-546), with the Kafka listener's rules
(:mod:`headwater.kafka.quota_apis`): DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster,
the filter and each alteration validated as Kafka does (INVALID_REQUEST with Kafka's
message), quotas read from and written to ZooKeeper in a worker thread."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from headwater import errors
from headwater.coordination.client_quotas import ClientQuotaStore
from headwater.errors import ErrorCode
from headwater.quotas.entities import (
    EntityType,
    QuotaEntity,
    invalid_filter,
    matches,
)
from headwater.security.acls import AclOperation
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.convert import Context, pb_error
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.quota_admin import alter_entry
from headwater.v1 import quotas_pb2, quotas_pb2_grpc


def entity_to_proto(entity: QuotaEntity) -> list[quotas_pb2.QuotaEntityComponent]:
    out = []
    if entity.has_user:
        out.append(
            quotas_pb2.QuotaEntityComponent(entity_type=EntityType.USER.value, name=entity.user)
        )
    if entity.has_client_id:
        out.append(
            quotas_pb2.QuotaEntityComponent(
                entity_type=EntityType.CLIENT_ID.value, name=entity.client_id
            )
        )
    return out


def _components(
    entity: Iterable[quotas_pb2.QuotaEntityComponent],
) -> list[tuple[str, str | None]]:
    return [(c.entity_type, c.name if c.HasField("name") else None) for c in entity]


class ClientQuotaAdminService(quotas_pb2_grpc.ClientQuotaAdminServicer):
    def __init__(
        self,
        *,
        store: Callable[[], ClientQuotaStore | None],
        authz: RequestAuthorizer = ALLOW_ALL,
    ) -> None:
        self._store = store
        self._authz = authz

    def _zk(self) -> ClientQuotaStore:
        store = self._store()
        if store is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return store

    async def DescribeClientQuotas(
        self, request: quotas_pb2.DescribeClientQuotasRequest, context: Context
    ) -> quotas_pb2.DescribeClientQuotasResponse:
        Response = quotas_pb2.DescribeClientQuotasResponse
        denied = self._authz.check_cluster(context, AclOperation.DESCRIBE_CONFIGS)
        if denied is not None:
            return Response(error=pb_error(denied.code), error_message=denied.message)
        components = [
            (c.entity_type, c.match_type, c.match if c.HasField("match") else None)
            for c in request.components
        ]
        reason = invalid_filter(components)
        if reason is not None:
            return Response(error=pb_error(ErrorCode.INVALID_REQUEST), error_message=reason)
        try:
            stored = await run_blocking(self._zk().read_all)
        except errors.HeadwaterError as exc:
            return Response(error=pb_error(exc.code), error_message=errors.message_of(exc))
        return Response(
            entries=[
                quotas_pb2.ClientQuotaEntry(
                    entity=entity_to_proto(entity),
                    values=[
                        quotas_pb2.QuotaValue(key=k.value, value=v)
                        for k, v in sorted(values.items())
                    ],
                )
                for entity, values in sorted(stored.items())
                if matches(entity, components, strict=request.strict)
            ]
        )

    async def AlterClientQuotas(
        self, request: quotas_pb2.AlterClientQuotasRequest, context: Context
    ) -> quotas_pb2.AlterClientQuotasResponse:
        denied = self._authz.check_cluster(context, AclOperation.ALTER_CONFIGS)
        results = []
        for entry in request.entries:
            code, message = ErrorCode.NONE, ""
            if denied is not None:
                code, message = denied.code, denied.message
            else:
                code, message = await alter_entry(
                    self._store,
                    _components(entry.entity),
                    ((op.key, None if op.remove else op.value) for op in entry.ops),
                    validate_only=request.validate_only,
                )
            results.append(
                quotas_pb2.AlterClientQuotasResult(
                    entity=list(entry.entity), error=pb_error(code), error_message=message
                )
            )
        return quotas_pb2.AlterClientQuotasResponse(results=results)
