"""gRPC channels to brokers, and the translation of transport failures to Kafka errors.

One channel per broker address, shared by every thread of a client (a gRPC
channel multiplexes concurrent calls over one HTTP/2 connection, and its
methods are thread-safe).  Transport failures become the Kafka errors a
Kafka client would see, so retry decisions are made in one vocabulary:
``UNAVAILABLE`` (connection refused or lost) is ``NetworkError`` and a
missed deadline is ``RequestTimedOutError``, both retriable; anything else is
a malformed request or a broker bug and is not retried.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from headwater import errors
from headwater.v1 import admin_pb2_grpc, broker_pb2_grpc

Resp = TypeVar("Resp")

_CHANNEL_OPTIONS = (
    # Fetch responses carry up to fetch_max_bytes (50 MiB by default) of batches.
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    # Fail fast on a dead broker instead of waiting out long reconnect backoffs.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.enable_retries", 0),
)


def translate_rpc_error(exc: grpc.RpcError, address: str) -> errors.HeadwaterError:
    """The Kafka error a failed gRPC call amounts to."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
    where = f"broker {address}: {details or code}"
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, None):
        reason = (details or "unavailable").rsplit(": ", 1)[-1]  # grpc's last, specific cause
        return errors.NetworkError(f"cannot reach broker {address}: {reason}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return errors.RequestTimedOutError(f"no answer in time from {where}")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return errors.UnsupportedVersionError(where)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return errors.InvalidRequestError(where)
    return errors.UnknownServerError(where)


class Channels:
    """A cache of gRPC channels by address; safe to use from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._closed = False

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise errors.NetworkError("client is closed")
            ch = self._channels.get(address)
            if ch is None:
                ch = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
                self._channels[address] = ch
            return ch

    def broker(self, address: str) -> broker_pb2_grpc.BrokerStub:
        return broker_pb2_grpc.BrokerStub(self.channel(address))

    def admin(self, address: str) -> admin_pb2_grpc.AdminStub:
        return admin_pb2_grpc.AdminStub(self.channel(address))

    def forget(self, address: str) -> None:
        """Drop the channel to ``address`` (after a failure), so the next call reconnects."""
        with self._lock:
            ch = self._channels.pop(address, None)
        if ch is not None:
            ch.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
        for ch in channels:
            ch.close()


def call(method: Callable[..., Resp], request: Any, *, address: str, timeout_ms: float) -> Resp:
    """Invoke a unary ``method`` with a deadline; raise a Kafka error on transport failure."""
    try:
        return method(request, timeout=max(0.001, timeout_ms / 1000.0))
    except grpc.RpcError as exc:
        raise translate_rpc_error(exc, address) from None
