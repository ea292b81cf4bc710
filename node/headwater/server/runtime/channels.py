"""gRPC channel options shared by the broker's server and its outgoing channels.

The broker's gRPC server, the replica fetchers' channels and the controller's
channels to brokers all carry whole record batches, so all raise gRPC's 4 MiB
default message limit to the broker's ``grpc.max.message.bytes``.  One
function, so that the three cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import grpc

from headwater.client.transport import sasl, sasl_aio
from headwater.client.transport.sasl import SaslCredentials
from headwater.coordination.model import BrokerRegistration
from headwater.server import tls
from headwater.server.listeners import BrokerSaslLogin, ListenerConfig, ListenerLayout


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """gRPC options allowing messages of up to ``max_message_bytes`` both ways."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


REPLICA_KEEPALIVE_TIME_MS = 1000
"""A replica fetcher's channel pings its leader after this long without an answer..."""
REPLICA_KEEPALIVE_TIMEOUT_MS = 1000
"""...and drops the connection (failing the fetch in flight) if no ping answer comes in
this long: a connection a network partition killed is given up within about 2 s."""


def replica_channel_options(max_message_bytes: int, *, backoff_ms: int) -> list[tuple[str, int]]:
    """Options of a replica fetcher's channel.

    * keepalive pings after :data:`REPLICA_KEEPALIVE_TIME_MS` without anything read, also
      between fetches; the ping's answer is awaited :data:`REPLICA_KEEPALIVE_TIMEOUT_MS`.
      gRPC (1.85) times a keepalive ping out after ``grpc.http2.ping_timeout_ms`` (default
      1 minute), not ``grpc.keepalive_timeout_ms``: both are set.  The leader must accept
      the pings: :func:`server_options`.
    * reconnection on the fetcher's own schedule (``backoff_ms``, that is
      ``replica.fetch.backoff.ms``; Kafka's replica fetcher has no reconnect backoff of its
      own) rather than gRPC's, which grows to 2 minutes;
    * a connection of its own (``grpc.use_local_subchannel_pool``): a replacement channel
      opened after a timed-out call must not share the old channel's connection, which
      it would through gRPC's process-wide pool (same address, same options).
    * a stream receive window (``grpc.http2.lookahead_bytes``) of a whole message: the
      fetches are messages on one long-lived stream, whose window gRPC otherwise keeps
      at 64 KiB, so that a larger answer waited for window updates from the follower's
      busy event loop (a Kafka-door acks=all produce at RF=3 ran at 28-37k records/s
      with it, 190-208k without).
    """
    return [
        *channel_options(max_message_bytes),
        ("grpc.keepalive_time_ms", REPLICA_KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", REPLICA_KEEPALIVE_TIMEOUT_MS),
        ("grpc.http2.ping_timeout_ms", REPLICA_KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.use_local_subchannel_pool", 1),
        ("grpc.http2.lookahead_bytes", max_message_bytes),
        ("grpc.initial_reconnect_backoff_ms", backoff_ms),
        ("grpc.max_reconnect_backoff_ms", backoff_ms),
    ]


def server_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """Options of the broker's gRPC servers: :func:`channel_options`, and the replica
    fetchers' keepalive pings allowed.  By default a gRPC server counts a ping sooner than
    5 minutes after the last one (or any ping with no call open) as a strike, and after
    two strikes closes the connection with GOAWAY ``too_many_pings``."""
    return [
        *channel_options(max_message_bytes),
        ("grpc.http2.min_ping_interval_without_data_ms", REPLICA_KEEPALIVE_TIME_MS // 2),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


# -- security of the channels to other brokers --------------------------------------------
#
# Every channel a broker opens to another broker (replica fetchers, the controller's
# requests, controlled shutdown, the group lag's ListOffsets) goes to that broker's
# inter-broker listener (the controller's to its control plane listener) and must speak
# that listener's protocol: TLS with this broker's own keystore as client certificate
# (mTLS) when it is SSL or SASL_SSL, and a SCRAM session (the real exchange, through
# headwater.client.transport.sasl / sasl_aio) when it is SASL_*.  The broker sets this once, at
# startup, before it opens any channel (:func:`configure_inter_broker`); it is a
# process-wide property, like the listeners themselves, so the sites opening channels
# call :func:`aio_channel` / :func:`sync_channel` instead of each carrying credentials.
#
# The TLS files are re-read when they change (tls.ReloadingChannelCredentials): each new
# channel gets the current certificate; :func:`credentials_generation` tells the owners
# of long-lived channels that theirs was made with older material.


@dataclasses.dataclass(frozen=True)
class PeerSecurity:
    """How this broker speaks to one listener of the other brokers (all None: plaintext)."""

    tls: tls.ReloadingChannelCredentials | None = None
    sasl: SaslCredentials | None = None


@dataclasses.dataclass(frozen=True)
class InterBrokerSecurity:
    """The client side of the inter-broker and control plane listeners."""

    inter_broker: PeerSecurity = PeerSecurity()
    control_plane: PeerSecurity = PeerSecurity()
    control_plane_listener: str = ""
    """Name of the control plane listener; empty: the controller uses the inter-broker one."""


_security = InterBrokerSecurity()
_keepers: dict[tuple[str, bool], sasl_aio.SaslSessionKeeper] = {}
"""The asyncio channels' SASL session per peer address (and role), shared by every
channel to it: a short-lived channel does not cost an exchange.  Event-loop only."""


def configure_inter_broker(security: InterBrokerSecurity) -> None:
    """Called once by the broker at startup, before any channel to another broker."""
    global _security
    _security = security
    _keepers.clear()


def _peer(control_plane: bool) -> PeerSecurity:
    return _security.control_plane if control_plane else _security.inter_broker


def credentials_generation(*, control_plane: bool = False) -> int:
    """Grows each time the broker's client TLS files are reloaded: a channel made at an
    older generation presents the old certificate (or trusts the old CAs)."""
    peer = _peer(control_plane)
    return peer.tls.current()[0] if peer.tls is not None else 0


def inter_broker_streams() -> bool:
    """Whether a broker's asyncio calls to the other brokers' inter-broker listener may be
    streaming calls: not under SASL, whose session the channel's interceptor attaches to
    unary calls only (:mod:`headwater.client.transport.sasl_aio`)."""
    return _security.inter_broker.sasl is None


def aio_channel(
    address: str, *, options: Sequence[tuple[str, Any]] = (), control_plane: bool = False
) -> grpc.aio.Channel:
    """An asyncio channel to another broker's inter-broker (or control plane) listener."""
    peer = _peer(control_plane)
    creds = peer.tls.current()[1] if peer.tls is not None else None
    if peer.sasl is not None:
        keeper = _keepers.get((address, control_plane))
        if keeper is None or keeper.credentials != peer.sasl:
            keeper = sasl_aio.SaslSessionKeeper(credentials=peer.sasl, address=address)
            _keepers[(address, control_plane)] = keeper
        return sasl_aio.sasl_channel(
            address, keeper=keeper, channel_credentials=creds, options=list(options)
        )
    if creds is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, creds, options=list(options))


def sync_channel(
    address: str, *, options: Sequence[tuple[str, Any]] = (), control_plane: bool = False
) -> grpc.Channel:
    """A blocking channel (the controller's threads) to another broker."""
    peer = _peer(control_plane)
    creds = peer.tls.current()[1] if peer.tls is not None else None
    if creds is None:
        raw = grpc.insecure_channel(address, options=list(options))
    else:
        raw = grpc.secure_channel(address, creds, options=list(options))
    if peer.sasl is None:
        return raw
    return sasl.intercept(raw, credentials=peer.sasl, address=address)


def control_plane_address(broker: BrokerRegistration) -> str:
    """``host:port`` where the controller reaches ``broker``."""
    if _security.control_plane_listener:
        endpoint = broker.endpoint_for(_security.control_plane_listener)
        if endpoint is not None:
            return f"{endpoint[0]}:{endpoint[1]}"
    return f"{broker.host}:{broker.port}"


def inter_broker_security(layout: ListenerLayout) -> InterBrokerSecurity:
    """The client side of the inter-broker and control plane listeners of ``layout``.

    Raises :class:`headwater.server.tls.TlsMaterialError` when a keystore or truststore
    cannot be read.  One listener used for both roles shares one set of credentials.
    """
    loaded: dict[str, tls.ReloadingChannelCredentials] = {}

    def peer(listener: ListenerConfig, login: BrokerSaslLogin | None) -> PeerSecurity:
        reloading = None
        if listener.ssl is not None:
            reloading = loaded.get(listener.name)
            if reloading is None:
                reloading = tls.ReloadingChannelCredentials(listener.ssl, listener=listener.name)
                loaded[listener.name] = reloading
        credentials = (
            SaslCredentials(login.mechanism, login.username, login.password)
            if login is not None
            else None
        )
        return PeerSecurity(tls=reloading, sasl=credentials)

    return InterBrokerSecurity(
        inter_broker=peer(layout.inter_broker_listener, layout.inter_broker_sasl),
        control_plane=peer(layout.control_plane_listener, layout.control_plane_sasl),
        control_plane_listener=layout.control_plane,
    )
