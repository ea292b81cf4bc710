"""SASL SCRAM for asyncio gRPC channels: the exchange, and an interceptor carrying the session.

The asyncio twin of :mod:`headwater.client.transport.sasl` (same exchange, same session
metadata, same renewal rules), for the broker's own asyncio channels to other brokers
(replica fetchers, controlled shutdown, the group lag's ListOffsets).  gRPC asyncio
takes interceptors when the channel is made, so the interceptor lets the SaslService's
own calls through untouched and runs the exchange on the very channel it intercepts.
A :class:`SaslSessionKeeper` holds the session with one broker and may serve many
channels (the broker's short-lived ones reuse it):

* the first call authenticates (once, under an :class:`asyncio.Lock`);
* a session with a lifetime is renewed after ``REAUTH_FRACTION`` of it;
* a call refused with ``UNAUTHENTICATED`` (the peer restarted and forgot its
  sessions, or the session expired) authenticates again and is retried once.

Only unary-unary calls are intercepted: Headwater's protocol has no streaming RPC.

An exchange the peer refuses raises the Kafka error to the caller of the RPC
(:class:`~headwater.errors.SaslAuthenticationFailedError` and kin); its message holds
no password.  Thread model: everything on one event loop (the broker's).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from headwater import errors
from headwater.client.transport import rpc_errors
from headwater.client.transport.sasl import (
    DEFAULT_TIMEOUT_S,
    SESSION_METADATA_KEY,
    SaslCredentials,
    SaslSession,
    ScramExchange,
    exchange_deadline,
)
from headwater.clock import Clock, monotonic_ms
from headwater.security.scram import Nonce, random_nonce
from headwater.v1 import sasl_pb2_grpc

SASL_SERVICE_PREFIX = "/headwater.v1.SaslService/"


async def authenticate(
    channel: grpc.aio.Channel,
    *,
    credentials: SaslCredentials,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    address: str = "",
    clock: Clock = monotonic_ms,
    nonce: Nonce = random_nonce,
) -> SaslSession:
    """Run the SCRAM exchange on ``channel``; the session it opens.

    ``timeout_s`` bounds the whole exchange (three calls).
    """
    exchange = ScramExchange(credentials, nonce=nonce)
    stub = sasl_pb2_grpc.SaslServiceStub(channel)
    remaining_s = exchange_deadline(timeout_s=timeout_s, address=address, clock=clock)
    try:
        handshake = await stub.SaslHandshake(exchange.handshake(), timeout=remaining_s())
        first = await stub.SaslAuthenticate(exchange.first(handshake), timeout=remaining_s())
        final = await stub.SaslAuthenticate(exchange.final(first), timeout=remaining_s())
    except grpc.RpcError as exc:
        raise rpc_errors.translate_rpc_error(exc, address or "broker") from None
    return exchange.session(final, now_ms=clock())


def _method(details: grpc.aio.ClientCallDetails) -> str:
    method: str | bytes = details.method
    return method.decode() if isinstance(method, bytes) else method


def _with_session(
    details: grpc.aio.ClientCallDetails, session: SaslSession
) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(
        *((k, v) for k, v in (details.metadata or ()) if k != SESSION_METADATA_KEY)
    )
    metadata.add(SESSION_METADATA_KEY, session.metadata_value)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


Authenticator = Callable[..., Any]
"""``authenticate``'s signature (a coroutine function); tests pass a fake."""


class SaslSessionKeeper:
    """One user's session with one broker, shared by every channel to that broker.

    The broker knows a session by its token alone, so short-lived channels (one request
    each) reuse the session instead of running an exchange each; the exchange runs on
    the channel whose call needs it.  Invariant: at most one exchange runs at a time; a
    refused call re-authenticates only if no other call already replaced the session it
    used.  Event-loop only (one loop).
    """

    def __init__(
        self,
        *,
        credentials: SaslCredentials,
        address: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Clock = monotonic_ms,
        authenticator: Authenticator = authenticate,
    ) -> None:
        self.credentials = credentials
        self.address = address
        self._timeout_s = timeout_s
        self._clock = clock
        self._authenticate = authenticator
        self._lock = asyncio.Lock()
        self._session: SaslSession | None = None
        self.authentications = 0
        """How many exchanges ran (for tests and metrics)."""

    async def session(
        self, channel: grpc.aio.Channel, *, replacing: SaslSession | None = None
    ) -> SaslSession:
        """The current session, authenticating on ``channel`` first if there is none, it
        is due for renewal, or it is ``replacing`` (the one a refused call used)."""
        async with self._lock:
            current = self._session
            if (
                current is not None
                and current is not replacing
                and not current.needs_renewal(self._clock())
            ):
                return current
            fresh: SaslSession = await self._authenticate(
                channel,
                credentials=self.credentials,
                timeout_s=self._timeout_s,
                address=self.address,
            )
            self.authentications += 1
            self._session = fresh
            return fresh


class _SessionInterceptor(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[type-arg]
    """One channel's interceptor; ``channel`` is set once gRPC has made the channel."""

    def __init__(self, keeper: SaslSessionKeeper) -> None:
        self._keeper = keeper
        self.channel: grpc.aio.Channel | None = None

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        if _method(client_call_details).startswith(SASL_SERVICE_PREFIX):
            return await continuation(client_call_details, request)
        if self.channel is None:
            raise errors.IllegalSaslStateError("the SASL channel is not open yet")
        session = await self._keeper.session(self.channel)
        call = await continuation(_with_session(client_call_details, session), request)
        if await call.code() != grpc.StatusCode.UNAUTHENTICATED:
            return call
        session = await self._keeper.session(self.channel, replacing=session)
        return await continuation(_with_session(client_call_details, session), request)


def sasl_channel(
    address: str,
    *,
    keeper: SaslSessionKeeper,
    channel_credentials: grpc.ChannelCredentials | None = None,
    options: list[tuple[str, Any]] | None = None,
) -> grpc.aio.Channel:
    """A channel to ``address`` (TLS when ``channel_credentials`` are given) whose calls
    carry ``keeper``'s session."""
    interceptor = _SessionInterceptor(keeper)
    interceptors: list[Any] = [interceptor]
    if channel_credentials is None:
        channel = grpc.aio.insecure_channel(address, options=options, interceptors=interceptors)
    else:
        channel = grpc.aio.secure_channel(
            address, channel_credentials, options=options, interceptors=interceptors
        )
    interceptor.channel = channel
    return channel
