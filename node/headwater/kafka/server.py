"""The Kafka listener's asyncio server: one task per connection, requests in order.

As Kafka's ``SocketServer`` does, a connection's requests are served one at a time in
the order they arrive (the next is read once the previous one is answered), so the
responses come back in request order; a client may pipeline, its requests wait in the
socket.  Produce with ``acks=0`` gets no response.  A frame that cannot be served
(:class:`~headwater.kafka.protocol.FrameError`: a bad size, a truncated frame, an
unknown API, bytes that do not decode) closes that connection, logging the reason; the
listener and every other connection carry on.

Security, per the listener's protocol (``listener.security.protocol.map``):

* SSL and SASL_SSL: TLS from the listener's ``ssl.*`` settings
  (:class:`~headwater.server.tls.ReloadingSslContext`); with ``ssl.client.auth=required``
  on SSL the principal is the client certificate's subject through
  ``ssl.principal.mapping.rules`` (a subject no rule maps closes the connection);
* SASL_PLAINTEXT and SASL_SSL: nothing but ApiVersions, SaslHandshake and
  SaslAuthenticate until the connection authenticates
  (:mod:`headwater.kafka.authentication`, :mod:`headwater.kafka.sasl`); then the SASL
  user is the principal;
* otherwise ``User:ANONYMOUS``.

The principal and the client's host are the connection's
:class:`~headwater.security.principal.RequestIdentity`, which the handlers' authorizer
reads as the gRPC servicers' does.

Runs on the broker's event loop; :meth:`KafkaServer.start` and :meth:`KafkaServer.stop`
are called once each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import time
from collections.abc import Callable, Sequence
from typing import cast

from headwater.kafka import protocol
from headwater.kafka.apis import KafkaApis, sasl_illegal_state
from headwater.kafka.authentication import Action
from headwater.kafka.listeners import KafkaListenerConfig
from headwater.kafka.sasl import SaslConnection, ServerFactory
from headwater.kafka.throttling import decide
from headwater.quotas.manager import ClientQuotas
from headwater.security.principal import ANONYMOUS, KafkaPrincipal, RequestIdentity
from headwater.security.ssl_principal import NoMatchingRuleError
from headwater.server.auth.identity import current_identity, set_identity
from headwater.server.convert import Context
from headwater.server.listeners import EndPoint
from headwater.server.tls import ReloadingSslContext, certificate_subject

log = logging.getLogger(__name__)


_NO_GRPC_CONTEXT = cast(Context, None)
"""The identity is read from its context variable, never from this."""

TLS_HANDSHAKE_TIMEOUT_S = 10.0
"""How long a client has to finish its TLS handshake."""


READ_BUFFER_BYTES = 1 << 20
"""A connection's read buffer (asyncio's StreamReader ``limit``): reading from the socket
pauses once twice this much waits unread.  At asyncio's 64 KiB default a Produce request
of a few hundred KB paused and resumed the socket (two ``epoll_ctl`` calls and a loop
round) for every chunk read."""


class ConnectionRefused(Exception):
    """The connection is closed for a security reason (logged at INFO, not WARNING)."""


@dataclasses.dataclass(frozen=True)
class SaslSettings:
    """What a SASL_* Kafka listener needs of the broker's SASL state
    (:class:`headwater.server.auth.sasl.SaslAuthentication`)."""

    new_server: ServerFactory
    reauth_ms: int


class KafkaServer:
    """One Kafka-protocol listener."""

    def __init__(
        self,
        config: KafkaListenerConfig,
        *,
        apis: KafkaApis,
        max_request_bytes: int,
        sasl: SaslSettings | None = None,
        quotas: ClientQuotas | None = None,
    ) -> None:
        """``quotas``: the broker's client quotas (:mod:`headwater.kafka.throttling`)."""
        if config.uses_sasl and sasl is None:
            raise ValueError(f"Kafka listener {config.name} is SASL_* but has no SASL settings")
        self.config = config
        self._apis = apis
        self._max_request_bytes = max_request_bytes
        self._sasl = sasl
        self._quotas = quotas or ClientQuotas()
        self.tls = ReloadingSslContext(config.ssl, listener=config.name) if config.ssl else None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self.port = 0
        """The port really bound (the configured one, or the one chosen for port 0)."""

    @property
    def advertised(self) -> EndPoint:
        """The advertised endpoint, with the bound port when the configured one was 0."""
        shown = self.config.advertised
        return shown._replace(port=shown.port or self.port)

    async def start(self) -> None:
        endpoint = self.config.endpoint
        self._server = await asyncio.start_server(
            self._serve,
            host=endpoint.host or "0.0.0.0",
            port=endpoint.port,
            limit=READ_BUFFER_BYTES,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info(
            "Kafka listener %s (%s) on %s:%d",
            self.config.name,
            endpoint.protocol.value,
            endpoint.host or "0.0.0.0",
            self.port,
        )

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        self._connections.add(writer)
        try:
            if self.tls is not None:
                await self._tls_handshake(writer)
            set_identity(RequestIdentity(self._principal(writer), host, self.config.name))
            sasl = None
            if self._sasl is not None:
                sasl = SaslConnection(
                    listener=self.config.name,
                    host=host,
                    mechanisms=self.config.sasl_mechanisms,
                    new_server=self._sasl.new_server,
                    reauth_ms=self._sasl.reauth_ms,
                )
            await self._requests(reader, writer, sasl)
        except ConnectionRefused as exc:
            log.info(
                "Kafka listener %s: closing the connection from %s: %s",
                self.config.name,
                _show(peer),
                exc,
            )
        except protocol.FrameError as exc:
            log.warning(
                "Kafka listener %s: closing the connection from %s: %s",
                self.config.name,
                _show(peer),
                exc,
            )
        except (ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception(
                "Kafka listener %s: closing the connection from %s after an internal error",
                self.config.name,
                _show(peer),
            )
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _tls_handshake(self, writer: asyncio.StreamWriter) -> None:
        """TLS on the accepted connection, so that a failed handshake (no or an untrusted
        client certificate, a plaintext client) is logged as Kafka logs it."""
        assert self.tls is not None
        try:
            await writer.start_tls(self.tls.context, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except (ssl.SSLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise ConnectionRefused(
                f"failed authentication (TLS handshake failed: {reason})"
            ) from None

    def _principal(self, writer: asyncio.StreamWriter) -> KafkaPrincipal:
        """The principal before any SASL: the client certificate's on SSL with
        ``ssl.client.auth=required``, else ``User:ANONYMOUS``."""
        tls = self.config.ssl
        if tls is None or tls.client_auth != "required" or self.config.uses_sasl:
            return ANONYMOUS
        ssl_object = writer.get_extra_info("ssl_object")
        subject = certificate_subject(ssl_object.getpeercert() if ssl_object else None)
        if subject is None:
            raise ConnectionRefused("a verified client certificate is required")
        try:
            return KafkaPrincipal.user(tls.principal_mapper.name_for(subject))
        except NoMatchingRuleError:
            raise ConnectionRefused(
                "the client certificate's subject matches no rule of ssl.principal.mapping.rules"
            ) from None

    async def _requests(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        sasl: SaslConnection | None,
    ) -> None:
        apis, max_bytes = self._apis, self._max_request_bytes
        while True:
            try:
                prefix = await reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    raise protocol.FrameError(
                        f"connection closed inside a size prefix ({len(exc.partial)} of 4 bytes)"
                    ) from None
                return  # closed between requests: the normal end
            size = protocol.frame_size(prefix, max_bytes=max_bytes)
            try:
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                raise protocol.FrameError(
                    f"truncated frame: {len(exc.partial)} of {size} bytes before the "
                    "connection closed"
                ) from None
            if sasl is not None and sasl.auth.admit_raw_token():
                token, closing = sasl.raw_token(frame)
                if token is not None:
                    writer.write(protocol.encode_raw(token))
                    await writer.drain()
                if closing:
                    raise ConnectionRefused(closing)
                continue
            request = protocol.parse_request(frame)
            apis.count(request)
            closing = ""
            # Only a broker with quotas stored records a request's CPU time (a syscall).
            cpu_start = time.thread_time() if self._quotas.quotas else None
            if sasl is None:
                response = await apis.handle(request)
            else:
                verdict = sasl.auth.admit(
                    request.api_key,
                    request.api_version,
                    now_ms=sasl.now_ms(),
                    version_fallback=request.version_fallback,
                )
                if verdict.action is Action.CLOSE:
                    raise ConnectionRefused(f"{request.api_name}: {verdict.reason}")
                if verdict.action is Action.HANDSHAKE:
                    response, closing = sasl.handshake(request)
                elif verdict.action is Action.AUTHENTICATE:
                    response, closing = sasl.authenticate(request)
                elif verdict.action is Action.ILLEGAL_SASL_STATE:
                    response = sasl_illegal_state(request)
                else:
                    response = await apis.handle(request)
            mute_ms = 0
            if self._quotas.quotas:  # with no quota stored there is nothing to record
                throttle = decide(
                    self._quotas,
                    request,
                    response,
                    user=current_identity(_NO_GRPC_CONTEXT).principal.name,
                    cpu_seconds=0.0 if cpu_start is None else time.thread_time() - cpu_start,
                    now_ms=int(time.monotonic() * 1000),
                )
                response, mute_ms = throttle.response, throttle.ms
                if throttle.delay_response:  # a client that does not throttle itself
                    await asyncio.sleep(mute_ms / 1000)
                    mute_ms = 0
            if response is not None:
                for chunk in protocol.encode_response_chunks(request.correlation_id, response):
                    writer.write(memoryview(chunk))  # what the socket does not take is copied
                await writer.drain()
            if mute_ms:
                await asyncio.sleep(mute_ms / 1000)  # muted: read nothing until it ends
            if closing:
                raise ConnectionRefused(closing)


def _show(peer: object) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


def registration_endpoints(
    grpc_endpoints: Sequence[EndPoint], kafka: Sequence[KafkaServer]
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """The broker's registered ``(endpoints, listener_security_protocol_map)``: every gRPC
    listener's advertised endpoint, then every Kafka listener's, each named once; other
    brokers answer Kafka Metadata from these."""
    shown = [*grpc_endpoints, *(k.advertised for k in kafka)]
    return (
        tuple(str(e) for e in shown),
        tuple(sorted((e.listener, e.protocol.value) for e in shown)),
    )


async def start_kafka_listeners(
    configs: Sequence[KafkaListenerConfig],
    *,
    apis: Callable[[str], KafkaApis],
    max_request_bytes: int,
    sasl: SaslSettings | None = None,
    quotas: ClientQuotas | None = None,
) -> list[KafkaServer]:
    """Bind and start a :class:`KafkaServer` per listener (``apis``: the handlers of a
    listener, by its name; ``sasl``: the broker's SCRAM, for the SASL_* listeners)."""
    servers = [
        KafkaServer(
            c,
            apis=apis(c.name),
            max_request_bytes=max_request_bytes,
            sasl=sasl if c.uses_sasl else None,
            quotas=quotas,
        )
        for c in configs
    ]
    for server in servers:
        await server.start()
    return servers


async def stop_kafka_listeners(servers: Sequence[KafkaServer]) -> None:
    for server in servers:
        await server.stop()
