"""Client quota throttling on the gRPC listeners: the same
:class:`~headwater.quotas.manager.ClientQuotas` as the Kafka listener's
(:mod:`headwater.kafka.throttling`), so a user's or client id's budget is one across
both doors.

The user is the request's principal name; the client id is the ``client-id`` gRPC
metadata entry Headwater's client sends (Kafka's request-header client id), empty
when absent.  Produce records its RecordBatch bytes against ``producer_byte_rate``,
a consumer's Fetch its answer's against ``consumer_byte_rate`` (followers' fetches
are never throttled, as in Kafka, whose replication has its own quotas).

A throttled answer carries ``throttle_time_ms`` and is held back that long before it
is sent, as Kafka brokers answer clients that do not throttle themselves (before
KIP-219): on a stream (ProduceStream, FetchStream) the next request is not read
until then, so the client is slowed whether or not it honours the field.
"""

from __future__ import annotations

import asyncio
import time

from headwater.quotas.entities import QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context

CLIENT_ID_METADATA = "client-id"


def client_id_of(context: Context) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_METADATA:
            return value if isinstance(value, str) else value.decode(errors="replace")
    return ""


def record(quotas: ClientQuotas | None, key: QuotaKey, context: Context, value: int) -> int:
    """Record ``value`` bytes; the throttle time in ms (0 with no quota for the caller)."""
    if quotas is None or not quotas.quotas:
        return 0
    return quotas.record(
        key,
        user=current_identity(context).principal.name,
        client_id=client_id_of(context),
        value=value,
        now_ms=int(time.monotonic() * 1000),
    )


async def hold(ms: int) -> None:
    if ms > 0:
        await asyncio.sleep(ms / 1000)
