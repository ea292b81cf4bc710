"""One gRPC server per listener, all serving the same handlers.

gRPC tells a handler nothing about the port a call came in on, so each listener gets
its own ``grpc.aio`` server carrying its own
:class:`~headwater.server.auth.listener_auth.ListenerInterceptor`: the listener, and
from it the authentication and the endpoints a Metadata answer holds, is then known
per call.  TLS listeners get reloading credentials (:mod:`headwater.server.tls`).

A classic listener named PLAINTEXT with the PLAINTEXT protocol gets no interceptor:
its identity (``User:ANONYMOUS`` on listener PLAINTEXT) is what
:func:`headwater.server.auth.identity.current_identity` answers without one, and its
calls keep the cost they had before named listeners.

Runs on the event loop; ``start`` and ``stop`` are called once each.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from headwater.security.principal import KafkaPrincipal
from headwater.server import tls
from headwater.server.auth.listener_auth import ListenerInterceptor, SessionLookup
from headwater.server.listeners import EndPoint, ListenerConfig, ListenerLayout, SecurityProtocol

log = logging.getLogger(__name__)


class _LateSessions:
    """The broker's SASL sessions, looked up per call (they may be created after start)."""

    def __init__(self, get: Callable[[], SessionLookup | None]) -> None:
        self._get = get

    def principal_for(self, token: bytes | str) -> KafkaPrincipal | None:
        sessions = self._get()
        return sessions.principal_for(token) if sessions is not None else None


@dataclasses.dataclass
class BoundListener:
    """A started listener: its settings, its server and the port it really bound."""

    config: ListenerConfig
    server: grpc.aio.Server
    port: int

    @property
    def advertised(self) -> EndPoint:
        """The advertised endpoint, with the bound port when the configured one was 0."""
        shown = self.config.advertised
        return shown._replace(port=shown.port or self.port)


def _needs_interceptor(listener: ListenerConfig) -> bool:
    return not (listener.name == "PLAINTEXT" and listener.protocol is SecurityProtocol.PLAINTEXT)


async def start_listeners(
    layout: ListenerLayout,
    *,
    register: Callable[[grpc.aio.Server], None],
    options: Sequence[tuple[str, Any]],
    sessions: Callable[[], SessionLookup | None],
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),  # type: ignore[type-arg]
) -> list[BoundListener]:
    """Build, bind and start a server per listener; ``register`` adds the handlers,
    ``interceptors`` run on every listener after its authentication (which they may
    rely on: the caller's identity is known when the handler runs).

    Raises :class:`headwater.server.tls.TlsMaterialError` (naming the file) when a TLS
    listener's PEM material is unusable, before anything listens.
    """
    late = _LateSessions(sessions)
    credentials = {
        listener.name: tls.server_credentials(listener.ssl, listener=listener.name)
        for listener in layout.listeners
        if listener.ssl is not None
    }
    bound: list[BoundListener] = []
    for listener in layout.listeners:
        authenticating = (
            [ListenerInterceptor(listener, sessions=late)] if _needs_interceptor(listener) else []
        )
        server = grpc.aio.server(
            options=list(options), interceptors=[*authenticating, *interceptors]
        )
        register(server)
        endpoint = listener.endpoint
        address = f"{endpoint.host or '0.0.0.0'}:{endpoint.port}"
        creds = credentials.get(listener.name)
        port = (
            server.add_secure_port(address, creds)
            if creds is not None
            else server.add_insecure_port(address)
        )
        bound.append(BoundListener(listener, server, port))
    for b in bound:
        await b.server.start()
        log.info(
            "listener %s (%s) on %s:%d",
            b.config.name,
            b.config.protocol.value,
            b.config.endpoint.host or "0.0.0.0",
            b.port,
        )
    return bound


async def stop_listeners(bound: Sequence[BoundListener], *, grace_s: float) -> None:
    for b in bound:
        await b.server.stop(grace=grace_s)


def registered_endpoints(
    bound: Sequence[BoundListener],
) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(endpoints, listener_security_protocol_map)`` for the broker's registration; both
    empty for a classic single PLAINTEXT listener (its registration is unchanged)."""
    if len(bound) == 1 and not _needs_interceptor(bound[0].config):
        return (), ()
    endpoints = tuple(str(b.advertised) for b in bound)
    protocols = tuple(sorted((b.config.name, b.config.protocol.value) for b in bound))
    return endpoints, protocols
