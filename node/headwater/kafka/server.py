"""The Kafka listener's asyncio server: one task per connection, requests in order.

As Kafka's ``SocketServer`` does, a connection's requests are served one at a time in
the order they arrive (the next is read once the previous one is answered), so the
responses come back in request order; a client may pipeline, its requests wait in the
socket.  Produce with ``acks=0`` gets no response.  A frame that cannot be served
(:class:`~headwater.kafka.protocol.FrameError`: a bad size, a truncated frame, an
unknown API, bytes that do not decode) closes that connection, logging the reason; the
listener and every other connection carry on.

Runs on the broker's event loop; :meth:`KafkaServer.start` and :meth:`KafkaServer.stop`
are called once each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from headwater.kafka import protocol
from headwater.kafka.apis import KafkaApis
from headwater.kafka.listeners import KafkaListenerConfig
from headwater.security.principal import ANONYMOUS, RequestIdentity
from headwater.server.auth.identity import set_identity
from headwater.server.listeners import EndPoint

log = logging.getLogger(__name__)


class KafkaServer:
    """One Kafka-protocol listener."""

    def __init__(
        self, config: KafkaListenerConfig, *, apis: KafkaApis, max_request_bytes: int
    ) -> None:
        self.config = config
        self._apis = apis
        self._max_request_bytes = max_request_bytes
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
            self._serve, host=endpoint.host or "0.0.0.0", port=endpoint.port
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info(
            "Kafka listener %s (PLAINTEXT) on %s:%d",
            self.config.name,
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
        set_identity(RequestIdentity(ANONYMOUS, host, self.config.name))
        self._connections.add(writer)
        try:
            await self._requests(reader, writer)
        except protocol.FrameError as exc:
            log.warning(
                "Kafka listener %s: closing the connection from %s: %s",
                self.config.name,
                _show(peer),
                exc,
            )
        except (ConnectionError, asyncio.CancelledError):
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

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
            request = protocol.parse_request(frame)
            response = await apis.handle(request)
            if response is not None:
                writer.write(protocol.encode_response(request.correlation_id, response))
                await writer.drain()


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
) -> list[KafkaServer]:
    """Bind and start a :class:`KafkaServer` per listener (``apis``: the handlers of a
    listener, by its name)."""
    servers = [
        KafkaServer(c, apis=apis(c.name), max_request_bytes=max_request_bytes) for c in configs
    ]
    for server in servers:
        await server.start()
    return servers


async def stop_kafka_listeners(servers: Sequence[KafkaServer]) -> None:
    for server in servers:
        await server.stop()
