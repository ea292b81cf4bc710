"""Client quota throttling on the Kafka listener, as Kafka's brokers do it (KIP-13,
KIP-124, KIP-219).

After a request is handled, its cost is recorded against the connection's quota
(:class:`~headwater.quotas.manager.ClientQuotas`; the user is the principal's name,
the client id the request header's):

* Produce: the RecordBatch bytes of the request (``producer_byte_rate``);
* Fetch: the RecordBatch bytes of the response (``consumer_byte_rate``);
* every request: the CPU time the event loop spent in its handler, as a percentage
  of one thread (``request_percentage``, Kafka's request handler thread time).

Bytes are counted per partition (``len`` of each batch payload), never per record.
A throttle time above zero goes into the response's ``throttle_time_ms`` and the
connection is muted for that long, as Kafka's ``SocketServer`` mutes a throttled
channel: a client that throttles itself (Produce v6+, Fetch v8+: KIP-219) gets its
answer at once and the broker reads nothing more from it until the throttle ends;
an older client's answer is held back for the throttle time.  With no quota
stored, nothing is recorded.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from headwater.kafka.protocol import Request
from headwater.quotas.entities import QuotaKey
from headwater.quotas.manager import ClientQuotas

CLIENT_THROTTLES_FROM = {0: 6, 1: 8}
"""API key -> the first version whose client throttles itself (KIP-219); other APIs'
throttle times are answered the same way from their KIP-219 versions, which every
version Headwater serves of them is past or at."""

EXEMPT_FROM_REQUEST_QUOTA = frozenset({17, 18, 36})
"""SaslHandshake, ApiVersions and SaslAuthenticate, which Kafka never throttles."""

_REQUEST_PERCENT_PER_CPU_SECOND = 100.0
"""One second of one thread's time is 100 percent-seconds (Kafka's
``nanosToPercentage``)."""


def produce_bytes(body: Any) -> int:
    return sum(
        len(p.records) for t in body.topic_data for p in t.partition_data if p.records is not None
    )


def fetch_bytes(response: Any) -> int:
    return sum(
        len(p.records)
        for t in getattr(response, "responses", ())
        for p in t.partitions
        if p.records is not None
    )


@dataclasses.dataclass(frozen=True)
class Throttle:
    """What to do with a handled request: the response to send (its throttle time set),
    whether to hold it back ``ms`` before sending, and how long the connection is muted
    in all (``ms``; 0: not throttled)."""

    response: Any
    ms: int
    delay_response: bool


def decide(
    quotas: ClientQuotas,
    request: Request,
    response: Any,
    *,
    user: str,
    cpu_seconds: float,
    now_ms: int,
) -> Throttle:
    """Record the request's cost and answer the throttle (pure but for the sensors)."""
    if not quotas.quotas:
        return Throttle(response, 0, False)
    client_id = request.client_id or ""
    ms = 0
    if request.api_key == 0:
        ms = quotas.record(
            QuotaKey.PRODUCER_BYTE_RATE,
            user=user,
            client_id=client_id,
            value=produce_bytes(request.body),
            now_ms=now_ms,
        )
    elif request.api_key == 1 and response is not None:
        ms = quotas.record(
            QuotaKey.CONSUMER_BYTE_RATE,
            user=user,
            client_id=client_id,
            value=fetch_bytes(response),
            now_ms=now_ms,
        )
    if request.api_key not in EXEMPT_FROM_REQUEST_QUOTA:
        ms = max(
            ms,
            quotas.record(
                QuotaKey.REQUEST_PERCENTAGE,
                user=user,
                client_id=client_id,
                value=cpu_seconds * _REQUEST_PERCENT_PER_CPU_SECOND,
                now_ms=now_ms,
            ),
        )
    if ms <= 0:
        return Throttle(response, 0, False)
    if response is not None and hasattr(response, "throttle_time"):
        response = dataclasses.replace(response, throttle_time=datetime.timedelta(milliseconds=ms))
    first_self_throttling = CLIENT_THROTTLES_FROM.get(request.api_key, 0)
    return Throttle(response, ms, request.api_version < first_self_throttling)
