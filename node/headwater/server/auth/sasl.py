"""SASL on a connectionless transport: exchanges in progress, and the sessions they open.

Kafka authenticates a TCP connection once, and everything on it is that principal.
gRPC multiplexes calls over connections it manages itself, so Headwater splits
Kafka's flow in two:

* :class:`SaslExchanges`: ``SaslHandshake`` opens an exchange (an id of 16
  random bytes) for one mechanism; each ``SaslAuthenticate`` call carries that id
  and the mechanism's next message.  An exchange lives at most
  ``EXCHANGE_TIMEOUT_MS`` and at most ``MAX_EXCHANGES`` are kept (the oldest
  goes first), so abandoned handshakes cost a bounded amount of memory.
* :class:`SaslSessions`: a completed exchange yields a session token (32 random
  bytes); the client sends it as the metadata key ``x-headwater-sasl-session``
  with every call, and the SASL_* listener's interceptor asks
  :meth:`SaslSessions.principal_for`.  With ``connections.max.reauth.ms`` set, a
  token expires after that long (Kafka's KIP-368 re-authentication: the client
  authenticates again); sessions of a user whose credential for the mechanism
  is deleted are revoked at once.

Tokens live in the broker's memory only: a restarted broker knows none, answers
UNAUTHENTICATED, and the client re-authenticates (``headwater.client.transport.sasl``).

Threads: :class:`SaslExchanges` is used on the event loop only.
:class:`SaslSessions` is called on the loop (servicers, interceptors) and by the
credential cache's worker thread (revocations), hence its lock.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from headwater import errors
from headwater.clock import Clock, monotonic_ms
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.scram_credentials import ScramCredentialCache, ScramCredentialStore
from headwater.security.principal import KafkaPrincipal
from headwater.security.scram import (
    CredentialLookup,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    random_nonce,
)
from headwater.server.config import BrokerConfig

log = logging.getLogger(__name__)

SESSION_METADATA_KEY = "x-headwater-sasl-session"
"""The gRPC metadata key carrying the session token, as lower-case hex (:func:`encode_token`):
values of keys not ending in ``-bin`` must be ASCII."""
SASL_SERVICE = "headwater.v1.SaslService"
"""The only Headwater service a SASL_* listener serves without a session."""
TOKEN_BYTES = 32
EXCHANGE_ID_BYTES = 16
EXCHANGE_TIMEOUT_MS = 30_000
MAX_EXCHANGES = 1024
MAX_SESSIONS = 100_000


def encode_token(token: bytes) -> str:
    """A token as metadata value (gRPC metadata values of non ``-bin`` keys are ASCII)."""
    return token.hex()


def decode_token(value: str | bytes) -> bytes | None:
    """The token of a metadata value, or None if it is not one."""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
    try:
        token = bytes.fromhex(text)
    except ValueError:
        return None
    return token if len(token) == TOKEN_BYTES else None


@dataclasses.dataclass(frozen=True, slots=True)
class SaslSession:
    principal: KafkaPrincipal
    mechanism: str
    expires_at_ms: float | None
    """Monotonic; None: never (``connections.max.reauth.ms`` is 0)."""


class SaslSessions:
    """Session token -> principal.  Invariant: an expired or revoked token is never
    answered with a principal; at most ``max_sessions`` are held (the oldest goes)."""

    def __init__(
        self,
        *,
        reauth_ms: int = 0,
        clock: Clock = monotonic_ms,
        random_bytes: Callable[[int], bytes] = secrets.token_bytes,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.reauth_ms = reauth_ms
        self._clock = clock
        self._random_bytes = random_bytes
        self._max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: collections.OrderedDict[bytes, SaslSession] = collections.OrderedDict()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def create(self, principal: KafkaPrincipal, *, mechanism: str) -> tuple[bytes, int]:
        """A new session's ``(token, lifetime_ms)``; lifetime 0 means no expiry."""
        token = self._random_bytes(TOKEN_BYTES)
        expires = self._clock() + self.reauth_ms if self.reauth_ms > 0 else None
        with self._lock:
            self._expire_locked()
            while len(self._sessions) >= self._max_sessions:
                self._sessions.popitem(last=False)
            self._sessions[token] = SaslSession(principal, mechanism, expires)
        return token, self.reauth_ms

    def principal_for(self, token: bytes | str) -> KafkaPrincipal | None:
        """The session's principal, or None if the token is unknown, expired or revoked.

        ``token`` is the raw 32 bytes, or the metadata value as sent (hex, str or bytes).
        """
        if isinstance(token, str) or len(token) != TOKEN_BYTES:
            decoded = decode_token(token)
            if decoded is None:
                return None
            token = decoded
        with self._lock:
            session = self._sessions.get(token)
            if session is None:
                return None
            if session.expires_at_ms is not None and self._clock() >= session.expires_at_ms:
                del self._sessions[token]
                return None
            return session.principal

    def revoke_user(self, user: str, mechanism: str) -> int:
        """End every session ``User:<user>`` opened with ``mechanism``; returns how many."""
        principal = KafkaPrincipal.user(user)
        with self._lock:
            doomed = [
                t
                for t, s in self._sessions.items()
                if s.principal == principal and s.mechanism == mechanism
            ]
            for token in doomed:
                del self._sessions[token]
        return len(doomed)

    def _expire_locked(self) -> None:
        now = self._clock()
        doomed = [
            t
            for t, s in self._sessions.items()
            if s.expires_at_ms is not None and now >= s.expires_at_ms
        ]
        for token in doomed:
            del self._sessions[token]


@dataclasses.dataclass(frozen=True, slots=True)
class AuthenticateResult:
    """One SaslAuthenticate step: the server's message, and the session once complete."""

    auth_bytes: bytes
    session_token: bytes = b""
    session_lifetime_ms: int = 0
    principal: KafkaPrincipal | None = None


@dataclasses.dataclass(slots=True)
class _Exchange:
    server: ScramServer
    expires_at_ms: float


class SaslExchanges:
    """SASL exchanges in progress.  Invariants: at most ``max_exchanges`` at a time; an
    exchange that failed, completed or expired is forgotten, so its id is refused with
    ILLEGAL_SASL_STATE (a client starts again with SaslHandshake)."""

    def __init__(
        self,
        *,
        enabled_mechanisms: Iterable[str],
        credentials: CredentialLookup,
        sessions: SaslSessions,
        clock: Clock = monotonic_ms,
        random_bytes: Callable[[int], bytes] = secrets.token_bytes,
        nonce: Callable[[], str] = random_nonce,
        max_exchanges: int = MAX_EXCHANGES,
        exchange_timeout_ms: int = EXCHANGE_TIMEOUT_MS,
    ) -> None:
        self.enabled_mechanisms = tuple(enabled_mechanisms)
        self._credentials = credentials
        self._sessions = sessions
        self._clock = clock
        self._random_bytes = random_bytes
        self._nonce = nonce
        self._max = max_exchanges
        self._timeout_ms = exchange_timeout_ms
        self._fake_salt_secret = random_bytes(32)
        self._exchanges: collections.OrderedDict[bytes, _Exchange] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._exchanges)

    def handshake(self, mechanism: str, *, allowed: Sequence[str] | None = None) -> bytes:
        """Open an exchange for ``mechanism``; UNSUPPORTED_SASL_MECHANISM unless enabled
        (``allowed``: the mechanisms of the listener the handshake came in on)."""
        enabled = self.enabled_mechanisms if allowed is None else tuple(allowed)
        if mechanism not in enabled:
            raise errors.UnsupportedSaslMechanismError(
                f"unsupported SASL mechanism {mechanism[:40]!r}; this listener enables "
                f"{', '.join(enabled) or 'none'}"
            )
        server = self.new_server(mechanism)
        now = self._clock()
        self._expire(now)
        while len(self._exchanges) >= self._max:
            self._exchanges.popitem(last=False)
        exchange_id = self._random_bytes(EXCHANGE_ID_BYTES)
        self._exchanges[exchange_id] = _Exchange(server, now + self._timeout_ms)
        return exchange_id

    def new_server(self, mechanism: str) -> ScramServer:
        """The server side of one SCRAM exchange of ``mechanism`` against this broker's
        credentials (the gRPC SaslService's exchanges and the Kafka listeners' connections
        both run on it); an unknown user answers like a wrong password, with a salt that
        does not change between attempts."""
        return ScramServer(
            ScramMechanism.from_name(mechanism),
            credentials=self._credentials,
            nonce=self._nonce,
            fake_salt_secret=self._fake_salt_secret,
        )

    def authenticate(self, exchange_id: bytes, auth_bytes: bytes) -> AuthenticateResult:
        """The next step of an exchange.  Raises ILLEGAL_SASL_STATE for an unknown or
        expired exchange, SASL_AUTHENTICATION_FAILED when the mechanism fails."""
        now = self._clock()
        self._expire(now)
        exchange = self._exchanges.get(exchange_id)
        if exchange is None:
            raise errors.IllegalSaslStateError(
                "unknown or expired SASL exchange: start again with SaslHandshake"
            )
        server = exchange.server
        try:
            challenge = server.evaluate_response(auth_bytes)
        except errors.HeadwaterError:
            self._exchanges.pop(exchange_id, None)
            raise
        if server.authorized_id is None:
            return AuthenticateResult(auth_bytes=challenge)
        self._exchanges.pop(exchange_id, None)
        principal = KafkaPrincipal.user(server.authorized_id)
        token, lifetime_ms = self._sessions.create(principal, mechanism=server.mechanism.value)
        return AuthenticateResult(
            auth_bytes=challenge,
            session_token=token,
            session_lifetime_ms=lifetime_ms,
            principal=principal,
        )

    def attempted_user(self, exchange_id: bytes) -> str | None:
        """The user name an exchange in progress claims (for logs), if known yet."""
        exchange = self._exchanges.get(exchange_id)
        return exchange.server.attempted_user if exchange is not None else None

    def _expire(self, now: float) -> None:
        while self._exchanges:
            exchange_id, oldest = next(iter(self._exchanges.items()))
            if oldest.expires_at_ms > now:
                return
            del self._exchanges[exchange_id]


def enabled_mechanisms(raw: str) -> tuple[str, ...]:
    """``sasl.enabled.mechanisms`` as names (upper case, order kept)."""
    return tuple(m.strip().upper() for m in raw.split(",") if m.strip())


class SaslAuthentication:
    """The broker's SASL state in one object: the sessions (read by the SASL_*
    listeners' interceptor), the exchanges (driven by SaslService) and the SCRAM
    credential cache fed by ZooKeeper.

    Lifecycle: built with the broker; :meth:`start` (blocking, a worker thread) once
    the ZooKeeper coordinator is up; :meth:`stop` (blocking) before it leaves.  Until
    started every user is unknown, so every exchange fails like a wrong password.
    """

    def __init__(
        self,
        *,
        mechanisms: Iterable[str],
        reauth_ms: int = 0,
        by_listener: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.by_listener = {name: tuple(m) for name, m in (by_listener or {}).items()}
        """Each SASL listener's ``sasl.enabled.mechanisms`` (per-listener overrides applied)."""
        self.sessions = SaslSessions(reauth_ms=reauth_ms)
        self.exchanges = SaslExchanges(
            enabled_mechanisms=mechanisms, credentials=self._lookup, sessions=self.sessions
        )
        self._cache: ScramCredentialCache | None = None
        self._store: ScramCredentialStore | None = None

    @classmethod
    def from_config(cls, config: BrokerConfig) -> SaslAuthentication:
        by_listener = {
            listener.name: listener.sasl_mechanisms
            for listener in config.listener_layout.listeners
            if listener.protocol.uses_sasl
        }
        mechanisms = list(enabled_mechanisms(config.sasl_enabled_mechanisms))
        for names in by_listener.values():
            mechanisms += [m for m in names if m not in mechanisms]
        return cls(
            mechanisms=mechanisms,
            reauth_ms=config.connections_max_reauth_ms,
            by_listener=by_listener,
        )

    def mechanisms_for(self, listener: str) -> tuple[str, ...]:
        """What a handshake on ``listener`` may ask for: a SASL listener's own mechanisms,
        else ``sasl.enabled.mechanisms`` (an exchange on a PLAINTEXT or SSL listener opens a
        session usable on the SASL listeners)."""
        return self.by_listener.get(listener, self.exchanges.enabled_mechanisms)

    def _lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        cache = self._cache
        return cache.get(user, mechanism) if cache is not None else None

    @property
    def store(self) -> ScramCredentialStore | None:
        """Where ScramAdmin reads and writes credentials; None before :meth:`start`."""
        return self._store

    def start(self, coordinator: BrokerCoordinator) -> None:
        client = coordinator.store.client
        cache = ScramCredentialCache(client, on_removed=lambda user, m: self._revoke(user, m.value))
        cache.start()
        self._cache = cache
        self._store = ScramCredentialStore(client)

    def _revoke(self, user: str, mechanism: str) -> None:
        if self.sessions.revoke_user(user, mechanism):
            log.info(
                "ended the SASL sessions of user %r: its %s credential is gone", user, mechanism
            )

    def stop(self) -> None:
        cache, self._cache, self._store = self._cache, None, None
        if cache is not None:
            cache.stop()
