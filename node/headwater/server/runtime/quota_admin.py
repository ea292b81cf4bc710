"""AlterClientQuotas' one entry, as both doors (the gRPC ``ClientQuotaAdmin`` service
and the Kafka listener) apply it: validate the entity and the ops as Kafka's
``ZkAdminManager`` does, then write them to ZooKeeper in a worker thread unless the
request only validates.

The caller checks ALTER_CONFIGS on the cluster first and answers a refused request
itself; this module answers one entry's error code and message.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from headwater import errors
from headwater.coordination.client_quotas import ClientQuotaStore
from headwater.errors import ErrorCode
from headwater.quotas.entities import InvalidQuota, entity_from_components, validate_alteration
from headwater.server.runtime.offload import run_blocking

__all__ = ["alter_entry"]


async def alter_entry(
    store: Callable[[], ClientQuotaStore | None],
    components: Iterable[tuple[str, str | None]],
    ops: Iterable[tuple[str, float | None]],
    *,
    validate_only: bool,
) -> tuple[ErrorCode, str]:
    """Apply one alteration entry: ``components`` are its ``(entity_type, name)`` pairs
    (None: the default entity), ``ops`` its ``(key, value)`` pairs (None: remove).

    Answers ``(NONE, "")``, or INVALID_REQUEST with Kafka's message for a bad entity or
    op (nothing of the entry is written), or the error of a ZooKeeper write that failed
    (BROKER_NOT_AVAILABLE when the broker has no ZooKeeper session).
    """
    try:
        entity = entity_from_components(components)
        changes = validate_alteration(ops)
        if not validate_only:
            zk = store()
            if zk is None:
                raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
            await run_blocking(zk.alter, entity, changes)
    except InvalidQuota as exc:
        return ErrorCode.INVALID_REQUEST, str(exc)
    except errors.HeadwaterError as exc:
        return exc.code, errors.message_of(exc)
    return ErrorCode.NONE, ""
