"""Client quota throttling on the gRPC listeners: the same
:class:`~headwater.quotas.manager.ClientQuotas` as the Kafka listener's
(:mod:`headwater.kafka.throttling`), so a user's or client id's budget is one across
both doors.

The user is the request's principal name; the client id is the ``client-id`` gRPC
metadata entry Headwater's client sends (Kafka's request-header client id), empty
when absent.  Produce records its RecordBatch bytes against ``producer_byte_rate``,
a consumer's Fetch its answer's against ``consumer_byte_rate`` (followers' fetches
are never throttled, as in Kafka, whose replication has its own quotas).

Every request but the exempt ones (:func:`exempt`: SASL, health checks, the
inter-broker Control RPCs, WriteTxnMarkers and followers' fetches, as Kafka exempts
SaslHandshake, SaslAuthenticate, ApiVersions and cluster actions) also records the
CPU time the event loop spent in its handler against ``request_percentage`` (one
second of one thread is 100 percent-seconds, as on the Kafka door).  That is done
once for all servicers by :class:`RequestQuotaInterceptor`; a stream's requests are
metered one by one, from a request's arrival to its answer.

A throttled answer carries ``throttle_time_ms`` (Produce and Fetch answers; the
larger of the byte-rate and the request throttle) and is held back that long before
it is sent, as Kafka brokers answer clients that do not throttle themselves (before
KIP-219): on a stream (ProduceStream, FetchStream) the next request is not read
until then, so the client is slowed whether or not it honours the field.  Under the
interceptor, :func:`hold` only notes the byte-rate throttle and the interceptor
sleeps once, after measuring the handler's CPU time (the sleep is not counted).

With no quota stored nothing is recorded, and the interceptor hands back the
servicer's handler unwrapped (decided per call; a stream opened before the first
quota was stored is not metered for ``request_percentage``).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from headwater.quotas.entities import QuotaKey
from headwater.quotas.manager import ClientQuotas
from headwater.server.auth.identity import current_identity
from headwater.server.convert import Context
from headwater.server.services.fetch_answer import encode_throttle_time

CLIENT_ID_METADATA = "client-id"

EXEMPT_METHODS = frozenset(
    {
        "/headwater.v1.SaslService/SaslHandshake",
        "/headwater.v1.SaslService/SaslAuthenticate",
        "/headwater.v1.Transaction/WriteTxnMarkers",
    }
)
"""RPCs never throttled by ``request_percentage`` (Kafka's SaslHandshake,
SaslAuthenticate and the WriteTxnMarkers cluster action)."""

EXEMPT_SERVICES = ("/headwater.v1.Control/", "/grpc.health.v1.Health/")
"""Services never throttled: the controller's cluster actions (LeaderAndIsr,
StopReplica, UpdateMetadata, ControlledShutdown) and health checks (as ApiVersions)."""

FETCH_METHODS = frozenset({"/headwater.v1.Broker/Fetch", "/headwater.v1.Broker/FetchStream"})
"""Their requests with ``replica_id >= 0`` are a follower's, never throttled."""

_REQUEST_PERCENT_PER_CPU_SECOND = 100.0
"""One second of one thread's time is 100 percent-seconds (Kafka's
``nanosToPercentage``)."""


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


@dataclasses.dataclass
class _Pending:
    """The byte-rate throttle of the request being metered (ms; 0: none)."""

    ms: int = 0


_PENDING: contextvars.ContextVar[_Pending | None] = contextvars.ContextVar(
    "headwater_pending_throttle", default=None
)


async def hold(ms: int) -> None:
    """Hold the answer ``ms`` back; under :class:`RequestQuotaInterceptor` only note it
    (the interceptor holds once, for the larger of this and the request throttle)."""
    if ms <= 0:
        return
    pending = _PENDING.get()
    if pending is not None:
        pending.ms = max(pending.ms, ms)
        return
    await asyncio.sleep(ms / 1000)


def exempt(method: str) -> bool:
    """Whether ``method`` (``/package.Service/Method``) is never request-throttled."""
    return method in EXEMPT_METHODS or method.startswith(EXEMPT_SERVICES)


def is_follower_request(method: str, request: Any) -> bool:
    return method in FETCH_METHODS and getattr(request, "replica_id", -1) >= 0


@dataclasses.dataclass(frozen=True)
class RequestThrottle:
    """The throttle of a handled request: ``ms`` to hold the answer back (the larger of
    the byte-rate and the request throttle) and ``request_ms``, the request quota's."""

    ms: int
    request_ms: int


def settle(
    quotas: ClientQuotas,
    *,
    user: str,
    client_id: str,
    cpu_seconds: float,
    byte_ms: int,
    now_ms: int,
) -> RequestThrottle:
    """Record the handler's CPU time against ``request_percentage``; the throttle."""
    request_ms = quotas.record(
        QuotaKey.REQUEST_PERCENTAGE,
        user=user,
        client_id=client_id,
        value=cpu_seconds * _REQUEST_PERCENT_PER_CPU_SECOND,
        now_ms=now_ms,
    )
    return RequestThrottle(max(byte_ms, request_ms), request_ms)


def with_throttle_time(response: Any, throttle: RequestThrottle, byte_ms: int) -> Any:
    """``response`` carrying the request throttle when it is above the byte-rate one
    already set: a Fetch answer's wire bytes get a ``throttle_time_ms`` appended (the
    last occurrence of a field wins), a message with that field gets it set."""
    if throttle.request_ms <= byte_ms:
        return response
    if isinstance(response, bytes):
        return response + encode_throttle_time(throttle.request_ms)
    descriptor = getattr(response, "DESCRIPTOR", None)
    if descriptor is not None and "throttle_time_ms" in descriptor.fields_by_name:
        response.throttle_time_ms = throttle.request_ms
    return response


Behavior = Callable[..., Any]


class RequestQuotaInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Meters every non-exempt call of a listener for ``request_percentage`` (see the
    module docstring); placed after the listener's authenticating interceptor, so the
    caller's identity is known when the handler ends."""

    def __init__(self, quotas: ClientQuotas) -> None:
        self._quotas = quotas

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or not self._quotas.quotas or exempt(method):
            return handler
        client_id = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == CLIENT_ID_METADATA:
                client_id = value if isinstance(value, str) else value.decode(errors="replace")
        return metered(handler, self._quotas, method=method, client_id=client_id)


def metered(
    handler: grpc.RpcMethodHandler[Any, Any],
    quotas: ClientQuotas,
    *,
    method: str,
    client_id: str,
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` with its unary call, or each request of its bidirectional stream,
    metered for ``request_percentage`` and throttled; other kinds are returned as is."""

    async def finish(context: Any, response: Any, cpu_seconds: float, pending: _Pending) -> Any:
        throttle = settle(
            quotas,
            user=current_identity(context).principal.name,
            client_id=client_id,
            cpu_seconds=cpu_seconds,
            byte_ms=pending.ms,
            now_ms=int(time.monotonic() * 1000),
        )
        if throttle.ms > 0:
            await asyncio.sleep(throttle.ms / 1000)
        return with_throttle_time(response, throttle, pending.ms)

    behavior: Behavior
    if not handler.request_streaming and not handler.response_streaming:
        inner = handler.unary_unary
        if inner is None:
            return handler

        async def unary(request: Any, context: Any) -> Any:
            if is_follower_request(method, request):
                result = inner(request, context)
                return await result if inspect.isawaitable(result) else result
            pending = _Pending()
            token = _PENDING.set(pending)
            start = time.thread_time()
            try:
                result = inner(request, context)
                if inspect.isawaitable(result):
                    result = await result
            finally:
                _PENDING.reset(token)
            return await finish(context, result, time.thread_time() - start, pending)

        behavior, factory = unary, grpc.unary_unary_rpc_method_handler
    elif handler.request_streaming and handler.response_streaming:
        inner_stream = handler.stream_stream
        if inner_stream is None or not inspect.isasyncgenfunction(inner_stream):
            return handler

        async def streaming(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
            pending = _Pending()
            started = [0.0]
            follower = [False]

            async def counted() -> AsyncIterator[Any]:
                async for request in requests:
                    pending.ms = 0
                    follower[0] = is_follower_request(method, request)
                    started[0] = time.thread_time()
                    yield request

            # Set for the rest of the call's task (each call has its own); not reset, as
            # a generator may be closed from another context.
            _PENDING.set(pending)
            responses: AsyncIterator[Any] = inner_stream(counted(), context)  # type: ignore[arg-type]
            async for response in responses:
                if follower[0]:  # a follower's fetch: never throttled
                    yield response
                else:
                    cpu = time.thread_time() - started[0]
                    yield await finish(context, response, cpu, pending)

        behavior, factory = streaming, grpc.stream_stream_rpc_method_handler
    else:
        return handler
    return factory(
        behavior,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
