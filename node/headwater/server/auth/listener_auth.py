"""Who sent a request, decided per listener: the interceptor of each listener's gRPC server.

Every listener is its own gRPC server with one :class:`ListenerInterceptor`, so the
listener a request came in on is known without asking gRPC.  Before the handler runs,
the interceptor records a :class:`~headwater.security.principal.RequestIdentity`
(:func:`headwater.server.auth.identity.set_identity`) in the handler's task:

- PLAINTEXT, and SSL without client certificates: ``User:ANONYMOUS``;
- SSL with ``ssl.client.auth=required``: ``User:<name>``, the verified client
  certificate's subject (RFC 2253, as gRPC reports it) through
  ``ssl.principal.mapping.rules``; a subject no rule maps is refused;
- SASL_PLAINTEXT / SASL_SSL: the principal of the SASL session whose token the call
  carries (metadata ``x-headwater-sasl-session``).  Without a valid session every call
  except the SaslService's and gRPC health's is refused.

Refusals are gRPC ``UNAUTHENTICATED`` with a one-line reason naming no secret (Kafka's
clients re-authenticate on it).  The decision is the pure :func:`decide`; the interceptor
only reads the call's metadata, peer and auth context and wraps the handler so the
identity is set in the task that runs it (gRPC asyncio runs each call's handler in
one task, so the context variable is that call's alone).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

import grpc

from headwater.security.principal import ANONYMOUS, KafkaPrincipal, identity_of_peer
from headwater.security.ssl_principal import NoMatchingRuleError, PrincipalMapper
from headwater.server.auth.identity import set_identity
from headwater.server.listeners import ListenerConfig

log = logging.getLogger(__name__)

SESSION_METADATA_KEY = "x-headwater-sasl-session"
"""The metadata key of a SASL session token (:mod:`headwater.server.auth.sasl`)."""
OPEN_ON_SASL = ("/headwater.v1.SaslService/", "/grpc.health.v1.Health/")
"""Method prefixes a SASL listener serves without a session."""


class SessionLookup(Protocol):
    """The SASL sessions of this broker (``headwater.server.auth.sasl.SaslSessions``)."""

    def principal_for(self, token: bytes | str) -> KafkaPrincipal | None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The principal of a call, or why it is refused (``refusal`` non-empty)."""

    principal: KafkaPrincipal = ANONYMOUS
    refusal: str = ""


def principal_of_certificate(subject: str, mapper: PrincipalMapper) -> Decision:
    try:
        return Decision(KafkaPrincipal.user(mapper.name_for(subject)))
    except NoMatchingRuleError:
        return Decision(
            refusal="the client certificate's subject matches no rule of "
            "ssl.principal.mapping.rules"
        )


def decide(
    listener: ListenerConfig,
    *,
    method: str,
    session_token: str | None,
    sessions: SessionLookup | None,
    certificate_subject: str | None,
) -> Decision:
    """The identity of one call on ``listener``; pure given ``sessions``."""
    if listener.protocol.uses_sasl:
        if method.startswith(OPEN_ON_SASL):
            return Decision()
        if not session_token:
            return Decision(refusal="SASL authentication required on listener " + listener.name)
        principal = sessions.principal_for(session_token) if sessions is not None else None
        if principal is None:
            return Decision(refusal="the SASL session is unknown or expired; authenticate again")
        return Decision(principal)
    ssl = listener.ssl
    if ssl is not None and ssl.client_auth == "required":
        if not certificate_subject:
            return Decision(refusal="a verified client certificate is required")
        return principal_of_certificate(certificate_subject, ssl.principal_mapper)
    return Decision()


def _first(auth: Mapping[str, Iterable[bytes]], key: str) -> str | None:
    for value in auth.get(key) or ():
        return value.decode("utf-8", "replace")
    return None


def _metadata_value(details: grpc.HandlerCallDetails, key: str) -> str | None:
    for k, v in details.invocation_metadata or ():
        if k == key:
            return v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)
    return None


Behavior = Callable[..., Any]


class ListenerInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Authenticates every call of one listener; see the module docstring."""

    def __init__(self, listener: ListenerConfig, *, sessions: SessionLookup | None) -> None:
        self._listener = listener
        self._sessions = sessions
        self._wants_certificate = (
            listener.ssl is not None
            and listener.ssl.client_auth == "required"
            and not listener.protocol.uses_sasl
        )

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        token = (
            _metadata_value(handler_call_details, SESSION_METADATA_KEY)
            if self._listener.protocol.uses_sasl
            else None
        )
        method = handler_call_details.method
        listener, sessions, wants_certificate = (
            self._listener,
            self._sessions,
            self._wants_certificate,
        )

        async def identify(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            subject = _first(context.auth_context(), "x509_subject") if wants_certificate else None
            decision = decide(
                listener,
                method=method,
                session_token=token,
                sessions=sessions,
                certificate_subject=subject,
            )
            if decision.refusal:
                log.info(
                    "refused %s from %s on listener %s: %s",
                    method,
                    context.peer(),
                    listener.name,
                    decision.refusal,
                )
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, decision.refusal)
            set_identity(
                identity_of_peer(
                    context.peer(), principal=decision.principal, listener=listener.name
                )
            )

        return _wrap(handler, identify)


def _wrap(
    handler: grpc.RpcMethodHandler[Any, Any],
    identify: Callable[[grpc.aio.ServicerContext[Any, Any]], Awaitable[None]],
) -> grpc.RpcMethodHandler[Any, Any]:
    """The same handler, calling ``identify(context)`` before the behavior."""
    if handler.request_streaming and handler.response_streaming:
        kind, inner = "stream_stream", handler.stream_stream
    elif handler.request_streaming:
        kind, inner = "stream_unary", handler.stream_unary
    elif handler.response_streaming:
        kind, inner = "unary_stream", handler.unary_stream
    else:
        kind, inner = "unary_unary", handler.unary_unary
    if inner is None:
        return handler
    behavior: Behavior
    if inspect.isasyncgenfunction(inner):

        async def streaming(request: Any, context: Any) -> AsyncIterator[Any]:
            await identify(context)
            async for item in inner(request, context):
                yield item

        behavior = streaming
    else:

        async def unary(request: Any, context: Any) -> Any:
            await identify(context)
            result = inner(request, context)
            if inspect.isawaitable(result):
                result = await result
            return result

        behavior = unary
    factory = getattr(grpc, f"{kind}_rpc_method_handler")
    return factory(  # type: ignore[no-any-return]
        behavior,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )
