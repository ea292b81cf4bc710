"""SASL SCRAM authentication for clients: the exchange, and a channel that carries the session.

:func:`authenticate` runs Kafka's SaslHandshake + SaslAuthenticate challenge-response
over the broker's ``SaslService`` (the password never leaves the process: the client
sends a proof, and checks the broker's own proof that it holds the credential) and
returns the broker's session token.  :func:`intercept` wraps a gRPC channel so that
every call carries that token as the metadata ``x-headwater-sasl-session``:

* the first call authenticates (lazily, once, under a lock);
* with ``connections.max.reauth.ms`` set on the broker, the session is renewed when
  ``REAUTH_FRACTION`` of its lifetime has passed (Kafka's clients re-authenticate
  before the broker's deadline too);
* a call refused with ``UNAUTHENTICATED`` (the broker restarted and forgot its
  sessions, or the session expired) authenticates again and is retried once; a
  refusal after that is returned to the caller.

Authentication failures raise :class:`~headwater.errors.SaslAuthenticationFailedError`
(or UNSUPPORTED_SASL_MECHANISM / ILLEGAL_SASL_STATE), never holding the password;
transport failures raise the Kafka error :mod:`headwater.client.transport.rpc_errors` maps them
to (``NetworkError``, ``RequestTimedOutError``).

Example::

    import grpc
    from headwater.client.transport import sasl

    raw = grpc.insecure_channel("broker-0:9094")       # a SASL_PLAINTEXT listener
    creds = sasl.SaslCredentials("SCRAM-SHA-512", "alice", password)
    channel = sasl.intercept(raw, credentials=creds, address="broker-0:9094")
    BrokerStub(channel).Metadata(...)                 # authenticated as User:alice

Threads: an intercepted channel may be used from any thread, like any gRPC channel.
Unary-stream calls carry the session too; one refused with UNAUTHENTICATED is not
retried (its stream may be half read) but makes the next call authenticate again.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

import grpc

from headwater import errors
from headwater.client.transport import rpc_errors
from headwater.clock import Clock, monotonic_ms
from headwater.security.scram import Nonce, ScramClient, ScramMechanism, random_nonce
from headwater.v1 import sasl_pb2, sasl_pb2_grpc

SESSION_METADATA_KEY = "x-headwater-sasl-session"
DEFAULT_TIMEOUT_S = 10.0
REAUTH_FRACTION = 0.85
"""Renew a session with a lifetime once this fraction of it has passed."""


class SaslCredentials(NamedTuple):
    """kafka-python's ``sasl_mechanism``, ``sasl_plain_username``, ``sasl_plain_password``."""

    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:
        return f"SaslCredentials({self.mechanism!r}, {self.username!r}, password=<hidden>)"


@dataclasses.dataclass(frozen=True, slots=True)
class SaslSession:
    """A broker's session: ``token`` goes in every call's metadata.

    ``lifetime_ms`` is 0 when the broker sets no ``connections.max.reauth.ms``;
    ``obtained_at_ms`` is the client's monotonic clock when the exchange finished.
    """

    token: bytes = dataclasses.field(repr=False)
    lifetime_ms: int
    mechanism: str
    username: str
    obtained_at_ms: float

    @property
    def metadata_value(self) -> str:
        return self.token.hex()

    def needs_renewal(self, now_ms: float) -> bool:
        return self.lifetime_ms > 0 and now_ms - self.obtained_at_ms >= (
            self.lifetime_ms * REAUTH_FRACTION
        )


def _raise_for(code: int, message: str) -> None:
    if code:
        raise errors.for_code(code, message)


class ScramExchange:
    """The client's side of one SaslHandshake + SaslAuthenticate exchange, without I/O.

    Each method turns the previous response into the next request (raising the Kafka
    error a response carries), so the blocking :func:`authenticate` and the asyncio
    ``headwater.client.transport.sasl_aio.authenticate`` run the same steps:
    :meth:`handshake` -> :meth:`first` -> :meth:`final` -> :meth:`session`.
    """

    def __init__(self, credentials: SaslCredentials, *, nonce: Nonce = random_nonce) -> None:
        self._credentials = credentials
        self._client = ScramClient(
            ScramMechanism.from_name(credentials.mechanism),
            username=credentials.username,
            password=credentials.password,
            nonce=nonce,
        )
        self._session_id = b""

    def handshake(self) -> sasl_pb2.SaslHandshakeRequest:
        return sasl_pb2.SaslHandshakeRequest(mechanism=self._credentials.mechanism)

    def first(self, handshake: sasl_pb2.SaslHandshakeResponse) -> sasl_pb2.SaslAuthenticateRequest:
        _raise_for(handshake.error, handshake.error_message)
        self._session_id = handshake.session_id
        return sasl_pb2.SaslAuthenticateRequest(
            session_id=self._session_id, auth_bytes=self._client.first_message()
        )

    def final(self, first: sasl_pb2.SaslAuthenticateResponse) -> sasl_pb2.SaslAuthenticateRequest:
        _raise_for(first.error, first.error_message)
        return sasl_pb2.SaslAuthenticateRequest(
            session_id=self._session_id, auth_bytes=self._client.on_server_first(first.auth_bytes)
        )

    def session(self, final: sasl_pb2.SaslAuthenticateResponse, *, now_ms: float) -> SaslSession:
        """The session, once the broker's own proof is checked."""
        _raise_for(final.error, final.error_message)
        self._client.on_server_final(final.auth_bytes)
        if not final.session_token:
            raise errors.IllegalSaslStateError(
                "the broker completed the SASL exchange without a session token"
            )
        return SaslSession(
            token=final.session_token,
            lifetime_ms=final.session_lifetime_ms,
            mechanism=self._credentials.mechanism,
            username=self._credentials.username,
            obtained_at_ms=now_ms,
        )


def exchange_deadline(*, timeout_s: float, address: str, clock: Clock) -> Callable[[], float]:
    """Seconds left for the next call of an exchange bounded by ``timeout_s`` as a whole;
    raises REQUEST_TIMED_OUT once it has run out."""
    deadline = clock() + timeout_s * 1000.0

    def remaining_s() -> float:
        left = (deadline - clock()) / 1000.0
        if left <= 0:
            raise errors.RequestTimedOutError(
                f"SASL authentication with {address or 'the broker'} took over {timeout_s} s"
            )
        return left

    return remaining_s


def authenticate(
    channel: grpc.Channel,
    *,
    mechanism: str,
    username: str,
    password: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    address: str = "",
    clock: Clock = monotonic_ms,
    nonce: Nonce = random_nonce,
) -> SaslSession:
    """Run the SCRAM exchange on ``channel`` (not intercepted); the session it opens.

    ``timeout_s`` bounds the whole exchange (three calls).
    """
    exchange = ScramExchange(SaslCredentials(mechanism, username, password), nonce=nonce)
    stub = sasl_pb2_grpc.SaslServiceStub(channel)
    remaining_s = exchange_deadline(timeout_s=timeout_s, address=address, clock=clock)
    try:
        handshake = stub.SaslHandshake(exchange.handshake(), timeout=remaining_s())
        first = stub.SaslAuthenticate(exchange.first(handshake), timeout=remaining_s())
        final = stub.SaslAuthenticate(exchange.final(first), timeout=remaining_s())
    except grpc.RpcError as exc:
        raise rpc_errors.translate_rpc_error(exc, address or "broker") from None
    return exchange.session(final, now_ms=clock())


class _CallDetails(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class _Details(_CallDetails, grpc.ClientCallDetails):
    """grpc.ClientCallDetails with new metadata (gRPC's documented way: a namedtuple)."""


class SaslClientInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[type-arg]
    """Attaches the SASL session to every call and renews it; see the module docstring.

    Invariant: at most one exchange runs at a time per interceptor; a refused call
    re-authenticates only if no other thread already replaced the session it used.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        *,
        credentials: SaslCredentials,
        address: str = "",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        clock: Clock = monotonic_ms,
        authenticator: Callable[..., SaslSession] = authenticate,
    ) -> None:
        self._channel = channel
        self._credentials = credentials
        self._address = address
        self._timeout_s = timeout_s
        self._clock = clock
        self._authenticate = authenticator
        self._lock = threading.Lock()
        self._session: SaslSession | None = None
        self.authentications = 0
        """How many exchanges this interceptor ran (for tests and metrics)."""

    def session(self, *, replacing: SaslSession | None = None) -> SaslSession:
        """The current session, authenticating first if there is none, it is due for
        renewal, or it is ``replacing`` (the one a refused call used)."""
        with self._lock:
            current = self._session
            if (
                current is not None
                and current is not replacing
                and not current.needs_renewal(self._clock())
            ):
                return current
            creds = self._credentials
            fresh = self._authenticate(
                self._channel,
                mechanism=creds.mechanism,
                username=creds.username,
                password=creds.password,
                timeout_s=self._timeout_s,
                address=self._address,
            )
            self.authentications += 1
            self._session = fresh
            return fresh

    def forget(self, session: SaslSession) -> None:
        with self._lock:
            if self._session is session:
                self._session = None

    @staticmethod
    def _with_session(details: grpc.ClientCallDetails, session: SaslSession) -> _Details:
        metadata = [(k, v) for k, v in (details.metadata or ()) if k != SESSION_METADATA_KEY]
        metadata.append((SESSION_METADATA_KEY, session.metadata_value))
        return _Details(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        session = self.session()
        outcome = continuation(self._with_session(client_call_details, session), request)
        if _code(outcome) != grpc.StatusCode.UNAUTHENTICATED:
            return outcome
        session = self.session(replacing=session)
        return continuation(self._with_session(client_call_details, session), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        session = self.session()
        call = continuation(self._with_session(client_call_details, session), request)

        def on_done(done: Any) -> None:
            if _code(done) == grpc.StatusCode.UNAUTHENTICATED:
                self.forget(session)

        call.add_done_callback(on_done)
        return call


def _code(outcome: Any) -> grpc.StatusCode | None:
    """The status of a finished unary call (blocks until a ``future()`` call is done)."""
    try:
        code = outcome.code()
    except Exception:  # not a call object: leave it to the caller
        return None
    return code if isinstance(code, grpc.StatusCode) else None


def intercept(
    channel: grpc.Channel,
    *,
    credentials: SaslCredentials,
    address: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> grpc.Channel:
    """``channel`` with every call authenticated by a SASL session (module docstring)."""
    interceptor = SaslClientInterceptor(
        channel, credentials=credentials, address=address, timeout_s=timeout_s
    )
    return grpc.intercept_channel(channel, interceptor)
