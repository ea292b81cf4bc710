"""gRPC channels to brokers, and the translation of transport failures to Kafka errors.

One channel per broker address, shared by every thread of a client (a gRPC
channel multiplexes concurrent calls over one HTTP/2 connection, and its
methods are thread-safe).  Transport failures become the Kafka errors a
Kafka client would see (:mod:`headwater.client.transport.rpc_errors`).

Background calls (the consumer's Fetch; the producer's Produce while one batch
per partition is in flight) go through :class:`CallPool`: persistent worker
threads making blocking calls.  grpcio's
``future()`` starts a "channel spin" thread whenever a channel goes from no
call in flight to one, and that thread exits again when the call ends; a
producer sending a record at a time, or a consumer whose long-poll fetch is
answered at once, paid a thread start per request (about 200 us of CPU and a
GIL hand-off on the latency path; ``bench/client.py`` prints the client's CPU
per record).  A worker that is already running
costs one queue hand-off instead.

Every call on a channel carries the client's id as the ``client-id`` gRPC metadata
entry (Kafka's request-header client id, which brokers match client quotas against):
once per call, so a long-lived Produce or Fetch stream carries it once, when it opens.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar

import grpc

from headwater import errors
from headwater.client.transport import fetch_response, sasl, streams
from headwater.client.transport.rpc_errors import as_error, translate_rpc_error
from headwater.client.transport.security import PLAINTEXT, ClientSecurity
from headwater.v1 import admin_pb2_grpc, broker_pb2, broker_pb2_grpc

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


CLIENT_ID_METADATA_KEY = "client-id"
"""The metadata entry the brokers read the client id from (their ``CLIENT_ID_METADATA``)."""


def check_client_id(client_id: object) -> str:
    """``client_id`` if it is a valid ``client.id``: any string, as Kafka allows, of the
    printable ASCII characters a gRPC metadata value can carry; else ``ValueError``."""
    if not isinstance(client_id, str):
        raise ValueError(f"client_id must be a string, not {client_id!r}")
    if not all(" " <= ch <= "~" for ch in client_id):
        raise ValueError(f"client_id must be printable ASCII (gRPC metadata), not {client_id!r}")
    return client_id


Done = Callable[[Any, "errors.HeadwaterError | None"], object]
"""Called with ``(response, None)`` or ``(None, error)`` on a pool thread; must not block."""


class _Item(NamedTuple):
    method: Callable[..., Any]
    request: Any
    timeout_s: float
    address: str
    ticket: int
    done: Done


class InlineCaller(Protocol):
    """Blocking calls of one Broker method, made by the one thread that owns this."""

    def call(self, address: str, request: Any, *, timeout_s: float) -> Any:
        """The answer to ``request``; raises a Kafka error on failure."""

    def close(self) -> None:
        """Release what the calls hold open."""


class CallPool:
    """Worker threads that make blocking unary calls and report each outcome to a callback.

    A worker is started when a call is submitted and none is idle (at most
    ``max_workers``; past that calls queue), and stays for the pool's life, so
    steady traffic starts no threads.  ``submit`` may be called from any
    thread; ``done`` runs on the worker.  ``close`` stops idle workers and lets
    busy ones finish their call (closing the channels ends those calls first).

    Calls to one address start in the order they were submitted (a ticket per
    address; a worker starts its call only after the previous ticket's), so
    pipelined Produce requests leave in order as they did from one thread.
    gRPC itself promises no order across calls, so the guarantee that matters
    is the idempotent producer's: the broker refuses a batch that overtook
    another (OUT_OF_ORDER_SEQUENCE_NUMBER) and the sender resends both in order.
    """

    def __init__(self, *, name: str, max_workers: int = 32) -> None:
        self._name = name
        self._max_workers = max_workers
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._started = threading.Condition(self._lock)
        self._workers: list[threading.Thread] = []
        self._idle = 0
        self._closed = False
        self._tickets: dict[str, int] = {}
        """Per address: tickets handed out by ``submit``."""
        self._turn: dict[str, int] = {}
        """Per address: the ticket whose call may start next."""

    def submit(
        self,
        method: Callable[..., Any],
        request: Any,
        *,
        address: str,
        timeout_s: float,
        done: Done,
    ) -> None:
        with self._lock:
            if self._closed:
                raise errors.NetworkError("client is closed")
            if self._idle:
                self._idle -= 1  # that worker takes this call
            elif len(self._workers) < self._max_workers:
                worker = threading.Thread(
                    target=self._work, name=f"{self._name}-{len(self._workers)}", daemon=True
                )
                self._workers.append(worker)
                worker.start()
            ticket = self._tickets.get(address, 0)
            self._tickets[address] = ticket + 1
            self._queue.put(_Item(method, request, timeout_s, address, ticket, done))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            method, request, timeout_s, address, ticket, done = item
            with self._started:  # FIFO queue: the previous ticket is already taken
                self._wait_turn(address, ticket)
                self._started.notify_all()
            try:
                response, error = method(request, timeout=max(0.001, timeout_s)), None
            except Exception as exc:
                response, error = None, as_error(exc, address)
            try:
                done(response, error)
            except Exception:  # a callback bug must not kill the worker
                logging.getLogger(__name__).exception("call callback failed")
            with self._lock:
                self._idle += 1

    def _wait_turn(self, address: str, ticket: int) -> None:
        """Called holding the lock; bounded, so a lost ticket can only delay a call."""
        self._started.wait_for(lambda: self._turn.get(address, 0) >= ticket, 10.0)
        self._turn[address] = max(self._turn.get(address, 0), ticket + 1)

    def close(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        for _ in workers:
            self._queue.put(None)
        for worker in workers:
            if worker is not threading.current_thread():
                worker.join(timeout_s)


class Channels:
    """A cache of gRPC channels by address, and the pool that makes background calls
    on them; safe to use from any thread."""

    def __init__(
        self,
        *,
        name: str = "headwater-call",
        security: ClientSecurity = PLAINTEXT,
        client_id: str = "",
    ) -> None:
        """``security``: how every channel reaches the brokers (TLS and SASL,
        :mod:`headwater.client.transport.security`); the PEM files are read here, once.
        ``client_id``: sent with every call (module docstring); "" sends none, which
        the brokers take as the empty client id."""
        self.security = security
        self.client_id = check_client_id(client_id)
        self._credentials = security.channel_credentials()
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._brokers: dict[str, tuple[grpc.Channel, broker_pb2_grpc.BrokerStub]] = {}
        """Per address, the Broker stub of its current channel: a stub builds a
        multi-callable per RPC (tens of µs), too much to pay per Produce or Fetch."""
        self._closed = False
        self.pool = CallPool(name=name)

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise errors.NetworkError("client is closed")
            ch = self._channels.get(address)
            if ch is None:
                ch = self._open(address)
                self._channels[address] = ch
            return ch

    def _open(self, address: str) -> grpc.Channel:
        if self._credentials is not None:
            ch = grpc.secure_channel(address, self._credentials, options=_CHANNEL_OPTIONS)
        else:
            ch = grpc.insecure_channel(address, options=_CHANNEL_OPTIONS)
        security = self.security
        if security.uses_sasl:
            credentials = sasl.SaslCredentials(
                security.sasl_mechanism or "",
                security.sasl_plain_username or "",
                security.sasl_plain_password or "",
            )
            ch = sasl.intercept(ch, credentials=credentials, address=address)
        if self.client_id:
            ch = _WithMetadataChannel(ch, ((CLIENT_ID_METADATA_KEY, self.client_id),))
        return ch

    def broker(self, address: str) -> broker_pb2_grpc.BrokerStub:
        """The Broker stub on ``address``'s channel, made once per channel (a new one
        after :meth:`forget`); two threads may both make it once, either is kept."""
        ch = self.channel(address)
        entry = self._brokers.get(address)
        if entry is None or entry[0] is not ch:
            entry = self._brokers[address] = (ch, _broker_stub(ch))
        return entry[1]

    def inline_caller(self, method: str) -> InlineCaller:
        """How one thread makes its inline ``method`` calls (``"Produce"``, ``"Fetch"``):
        as messages on a long-lived stream per broker, or, for a SASL client (a
        session renewed per call), as unary calls; see :mod:`headwater.client.transport.streams`."""
        if self.security.uses_sasl or not streams.ENABLED:
            return streams.UnaryCalls(self, method)
        return streams.StreamedCalls(self, method)

    def admin(self, address: str) -> admin_pb2_grpc.AdminStub:
        return admin_pb2_grpc.AdminStub(self.channel(address))

    def forget(self, address: str) -> None:
        """Drop the channel to ``address`` (after a failure), so the next call reconnects."""
        with self._lock:
            ch = self._channels.pop(address, None)
            self._brokers.pop(address, None)
        if ch is not None:
            ch.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._brokers.clear()
        for ch in channels:
            ch.close()
        self.pool.close()


class _WithMetadata:
    """A multi-callable whose every call carries ``metadata`` besides the caller's own:
    one Python call more per call (a ``grpc.intercept_channel`` interceptor costs more:
    it makes a new multi-callable per call)."""

    __slots__ = ("_call", "_metadata")

    def __init__(self, multicallable: Any, metadata: tuple[tuple[str, str], ...]) -> None:
        self._call = multicallable
        self._metadata = metadata

    def _merged(self, metadata: Any) -> Any:
        return self._metadata if not metadata else (*self._metadata, *metadata)

    def __call__(self, request: Any, *args: Any, metadata: Any = None, **kwargs: Any) -> Any:
        return self._call(request, *args, metadata=self._merged(metadata), **kwargs)

    def future(self, request: Any, *args: Any, metadata: Any = None, **kwargs: Any) -> Any:
        return self._call.future(request, *args, metadata=self._merged(metadata), **kwargs)

    def with_call(self, request: Any, *args: Any, metadata: Any = None, **kwargs: Any) -> Any:
        return self._call.with_call(request, *args, metadata=self._merged(metadata), **kwargs)


class _WithMetadataChannel(grpc.Channel):
    """``channel`` whose every call (unary or streaming) carries ``metadata``."""

    def __init__(self, channel: grpc.Channel, metadata: tuple[tuple[str, str], ...]) -> None:
        self._channel = channel
        self._metadata = metadata

    def unary_unary(self, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self._channel.unary_unary(*args, **kwargs), self._metadata)

    def unary_stream(self, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self._channel.unary_stream(*args, **kwargs), self._metadata)

    def stream_unary(self, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self._channel.stream_unary(*args, **kwargs), self._metadata)

    def stream_stream(self, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self._channel.stream_stream(*args, **kwargs), self._metadata)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self._channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self._channel.unsubscribe(callback)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> _WithMetadataChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _broker_stub(channel: grpc.Channel) -> broker_pb2_grpc.BrokerStub:
    """The Broker stub whose ``Fetch`` and ``FetchStream`` answer
    :class:`~headwater.client.transport.fetch_response.FetchResponseView`: the
    records as views of the bytes gRPC received, not two copies of them."""
    stub = broker_pb2_grpc.BrokerStub(channel)
    serialize = broker_pb2.FetchRequest.SerializeToString
    stub.Fetch = channel.unary_unary(
        "/headwater.v1.Broker/Fetch",
        request_serializer=serialize,
        response_deserializer=fetch_response.parse,
        _registered_method=True,  # type: ignore[call-arg]  # as the generated stub does
    )
    stub.FetchStream = channel.stream_stream(
        "/headwater.v1.Broker/FetchStream",
        request_serializer=serialize,
        response_deserializer=fetch_response.parse,
        _registered_method=True,  # type: ignore[call-arg]  # as the generated stub does
    )
    return stub


def call(method: Callable[..., Resp], request: Any, *, address: str, timeout_ms: float) -> Resp:
    """Invoke a unary ``method`` with a deadline; raise a Kafka error on transport failure."""
    try:
        return method(request, timeout=max(0.001, timeout_ms / 1000.0))
    except grpc.RpcError as exc:
        raise translate_rpc_error(exc, address) from None
