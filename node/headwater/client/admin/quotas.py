"""Client quota calls of :class:`~headwater.client.admin.client.Admin`: Kafka's
``describeClientQuotas`` and ``alterClientQuotas`` (KIP-546) over the brokers'
ClientQuotaAdmin service.

An entity is Kafka's ``ClientQuotaEntity``: a mapping of entity type (``"user"``,
``"client-id"``) to a name, None for the default entity.  Every request goes to any
live broker (each writes ZooKeeper; every broker follows the change notification).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from headwater import errors
from headwater.client.admin.core import AdminCore
from headwater.v1 import quotas_pb2, quotas_pb2_grpc

MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
"""``(entity_type, name)`` pairs, sorted; a name of None is the default entity."""


class QuotaFilterComponent(NamedTuple):
    """Kafka's ``ClientQuotaFilterComponent``: ``match_type`` 0 exact (``match``), 1 the
    default entity, 2 any."""

    entity_type: str
    match_type: int = MATCH_ANY
    match: str | None = None


class QuotaAlteration(NamedTuple):
    """Kafka's ``ClientQuotaAlteration``: ``ops`` maps a key to its new value, None
    removing it."""

    entity: Mapping[str, str | None]
    ops: Mapping[str, float | None]


def entity_key(components: Iterable[Any]) -> Entity:
    return tuple(
        sorted((c.entity_type, c.name if c.HasField("name") else None) for c in components)
    )


def _entity_proto(entity: Mapping[str, str | None]) -> list[quotas_pb2.QuotaEntityComponent]:
    return [quotas_pb2.QuotaEntityComponent(entity_type=t, name=n) for t, n in entity.items()]


class QuotaAdmin:
    def __init__(self, core: AdminCore) -> None:
        self._core = core

    def _call(self, rpc: str, request: Any) -> Any:
        return self._core.call_any_broker(
            lambda address: quotas_pb2_grpc.ClientQuotaAdminStub(
                self._core.channels.channel(address)
            ),
            rpc,
            request,
        )

    def describe_client_quotas(
        self, components: Iterable[QuotaFilterComponent] = (), *, strict: bool = False
    ) -> dict[Entity, dict[str, float]]:
        """The quotas of every entity the filter matches (no components: all)."""
        response = self._call(
            "DescribeClientQuotas",
            quotas_pb2.DescribeClientQuotasRequest(
                components=[
                    quotas_pb2.QuotaFilterComponent(
                        entity_type=c.entity_type, match_type=c.match_type, match=c.match
                    )
                    for c in components
                ],
                strict=strict,
            ),
        )
        if response.error:
            raise errors.for_code(response.error, response.error_message)
        return {entity_key(e.entity): {v.key: v.value for v in e.values} for e in response.entries}

    def alter_client_quotas(
        self,
        alterations: Iterable[QuotaAlteration],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> dict[Entity, errors.HeadwaterError | None]:
        """Set and remove quotas; each entity's error (None: done).  Raises the first
        error unless ``raise_on_error=False`` (INVALID_REQUEST for an unknown key, a bad
        entity or a value not above zero)."""
        request = quotas_pb2.AlterClientQuotasRequest(
            entries=[
                quotas_pb2.ClientQuotaAlteration(
                    entity=_entity_proto(a.entity),
                    ops=[
                        quotas_pb2.QuotaOp(key=k, value=v or 0.0, remove=v is None)
                        for k, v in a.ops.items()
                    ],
                )
                for a in alterations
            ],
            validate_only=validate_only,
        )
        response = self._call("AlterClientQuotas", request)
        out: dict[Entity, errors.HeadwaterError | None] = {}
        for r in response.results:
            error = errors.for_code(r.error, r.error_message) if r.error else None
            if error is not None and raise_on_error:
                raise error
            out[entity_key(r.entity)] = error
        return out
