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

from headwater.coordination.model import BrokerRegistration
from headwater.server import tls
from headwater.server.listeners import ListenerLayout


def channel_options(max_message_bytes: int) -> list[tuple[str, int]]:
    """gRPC options allowing messages of up to ``max_message_bytes`` both ways."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


# -- security of the channels to other brokers --------------------------------------------
#
# Every channel a broker opens to another broker (replica fetchers, the controller's
# requests, controlled shutdown, the group lag's ListOffsets) goes to that broker's
# inter-broker listener (the controller's to its control plane listener) and must speak
# that listener's protocol: TLS with this broker's own keystore as client certificate
# (mTLS) when it is SSL.  The broker sets this once, at startup, before it opens any
# channel (:func:`configure_inter_broker`); it is a process-wide property, like the
# listeners themselves, so the sites opening channels call :func:`aio_channel` /
# :func:`sync_channel` instead of each carrying the credentials.


@dataclasses.dataclass(frozen=True)
class InterBrokerSecurity:
    """Client credentials for the inter-broker and control plane listeners (None: plain)."""

    inter_broker: grpc.ChannelCredentials | None = None
    control_plane: grpc.ChannelCredentials | None = None
    control_plane_listener: str = ""
    """Name of the control plane listener; empty: the controller uses the inter-broker one."""


_security = InterBrokerSecurity()


def configure_inter_broker(security: InterBrokerSecurity) -> None:
    """Called once by the broker at startup, before any channel to another broker."""
    global _security
    _security = security


def aio_channel(
    address: str, *, options: Sequence[tuple[str, Any]] = (), control_plane: bool = False
) -> grpc.aio.Channel:
    """An asyncio channel to another broker's inter-broker (or control plane) listener."""
    creds = _security.control_plane if control_plane else _security.inter_broker
    if creds is None:
        return grpc.aio.insecure_channel(address, options=list(options))
    return grpc.aio.secure_channel(address, creds, options=list(options))


def sync_channel(
    address: str, *, options: Sequence[tuple[str, Any]] = (), control_plane: bool = False
) -> grpc.Channel:
    """A blocking channel (the controller's threads) to another broker."""
    creds = _security.control_plane if control_plane else _security.inter_broker
    if creds is None:
        return grpc.insecure_channel(address, options=list(options))
    return grpc.secure_channel(address, creds, options=list(options))


def control_plane_address(broker: BrokerRegistration) -> str:
    """``host:port`` where the controller reaches ``broker``."""
    if _security.control_plane_listener:
        endpoint = broker.endpoint_for(_security.control_plane_listener)
        if endpoint is not None:
            return f"{endpoint[0]}:{endpoint[1]}"
    return f"{broker.host}:{broker.port}"


def inter_broker_security(layout: ListenerLayout) -> InterBrokerSecurity:
    """The client side of the inter-broker and control plane listeners of ``layout``."""
    inter = layout.inter_broker_listener
    control = layout.control_plane_listener
    return InterBrokerSecurity(
        inter_broker=tls.channel_credentials(inter.ssl) if inter.ssl is not None else None,
        control_plane=tls.channel_credentials(control.ssl) if control.ssl is not None else None,
        control_plane_listener=layout.control_plane,
    )
