"""A Kafka connection's SASL authentication as a state machine: no I/O, the clock passed in.

Kafka's ``SaslServerAuthenticator`` rules, for a connection on a SASL_PLAINTEXT or
SASL_SSL Kafka listener.  :meth:`ConnectionAuth.admit` says what to do with each
request that arrives; the server (:mod:`headwater.kafka.server`) runs the handshake or
the SCRAM step and reports the outcome back (:meth:`ConnectionAuth.handshake_answered`,
:meth:`ConnectionAuth.step_answered`).  Every move goes through
:meth:`AuthState.transition_to`, which refuses an edge :data:`TRANSITIONS` does not have::

    HANDSHAKE_OR_VERSIONS ──ApiVersions──▶ HANDSHAKE
            │                                  │
            └──────────SaslHandshake v1────────┴──▶ AUTHENTICATE ──complete──▶ AUTHENTICATED
            └──────────SaslHandshake v0────────┴──▶ RAW_AUTHENTICATE ─complete─┘      │
    AUTHENTICATED ──SaslHandshake v1 (KIP-368)──▶ REAUTHENTICATE ──complete──▶ AUTHENTICATED
    any ──refused (unsupported mechanism, failed step, wrong request, expired)──▶ FAILED

* Before authentication only ApiVersions (once, in the first state; an ApiVersions at
  a version the listener does not speak is answered and keeps the state, so the client
  can retry at v0), SaslHandshake and then SaslAuthenticate are served; anything else
  closes the connection without an answer, as Kafka does.
* SaslHandshake v0 means the SCRAM messages follow as raw size-prefixed tokens, not
  SaslAuthenticate requests (RAW_AUTHENTICATE); v1 means SaslAuthenticate.
* An unsupported mechanism is answered (UNSUPPORTED_SASL_MECHANISM, with the enabled
  ones) and the connection closed; a failed step is answered SASL_AUTHENTICATION_FAILED
  (on SaslAuthenticate; a raw token gets no answer) and the connection closed.
* Once authenticated, with ``connections.max.reauth.ms`` above 0, the session lasts
  that long (SaslAuthenticate v1+ tells the client): a client whose SaslAuthenticate
  was v1+ re-authenticates with SaslHandshake v1 + SaslAuthenticate on the same
  connection, as the same principal and mechanism; any other request after the
  session ended closes the connection.  A SaslHandshake or SaslAuthenticate the
  authenticated connection cannot take is answered ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping

from headwater.security.principal import KafkaPrincipal

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class IllegalAuthTransition(Exception):
    """The connection was asked to move along an edge :data:`TRANSITIONS` does not have."""


class AuthState(enum.Enum):
    """Where one connection stands in its authentication."""

    HANDSHAKE_OR_VERSIONS = "handshake_or_versions"
    """New connection: ApiVersions or SaslHandshake."""
    HANDSHAKE = "handshake"
    """ApiVersions answered: SaslHandshake."""
    AUTHENTICATE = "authenticate"
    """Handshake v1 answered: SaslAuthenticate requests carry the mechanism's messages."""
    RAW_AUTHENTICATE = "raw_authenticate"
    """Handshake v0 answered: the next frames are the mechanism's raw messages."""
    AUTHENTICATED = "authenticated"
    """Every request is served as the connection's principal."""
    REAUTHENTICATE = "reauthenticate"
    """An authenticated connection's new SaslHandshake v1 answered: SaslAuthenticate."""
    FAILED = "failed"
    """Terminal: the connection is closed."""

    def transition_to(self, target: AuthState) -> AuthState:
        if target not in TRANSITIONS[self]:
            raise IllegalAuthTransition(f"connection authentication {self.name} -> {target.name}")
        return target


_FAIL = frozenset({AuthState.FAILED})
TRANSITIONS: Mapping[AuthState, frozenset[AuthState]] = {
    AuthState.HANDSHAKE_OR_VERSIONS: frozenset(
        {AuthState.HANDSHAKE, AuthState.AUTHENTICATE, AuthState.RAW_AUTHENTICATE}
    )
    | _FAIL,
    AuthState.HANDSHAKE: frozenset({AuthState.AUTHENTICATE, AuthState.RAW_AUTHENTICATE}) | _FAIL,
    AuthState.AUTHENTICATE: frozenset({AuthState.AUTHENTICATED}) | _FAIL,
    AuthState.RAW_AUTHENTICATE: frozenset({AuthState.AUTHENTICATED}) | _FAIL,
    AuthState.AUTHENTICATED: frozenset({AuthState.REAUTHENTICATE}) | _FAIL,
    AuthState.REAUTHENTICATE: frozenset({AuthState.AUTHENTICATED}) | _FAIL,
    AuthState.FAILED: frozenset(),
}
"""``state -> states it may move to``."""


class Action(enum.Enum):
    """What the server does with a request, as :meth:`ConnectionAuth.admit` decides."""

    SERVE = "serve"
    """Hand it to the API handlers (ApiVersions before authentication, anything after)."""
    HANDSHAKE = "handshake"
    """Check the mechanism, answer SaslHandshake, report with ``handshake_answered``."""
    AUTHENTICATE = "authenticate"
    """Run the mechanism's next step, answer, report with ``step_answered``."""
    ILLEGAL_SASL_STATE = "illegal_sasl_state"
    """Answer the SASL request with ILLEGAL_SASL_STATE; the connection carries on."""
    CLOSE = "close"
    """Close the connection without an answer (``Verdict.reason`` says why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Verdict:
    action: Action
    reason: str = ""


class StepOutcome(enum.Enum):
    """How one SCRAM step ended."""

    CHALLENGE = "challenge"
    """More messages to come."""
    COMPLETE = "complete"
    FAILED = "failed"


class ConnectionAuth:
    """One SASL connection's authentication (see the module docstring).

    Invariants: ``principal`` is set exactly once the first authentication completed and
    never changes after (a re-authentication as another principal fails);
    ``session_expires_ms`` is None when sessions do not expire (``reauth_ms`` 0).
    Not thread-safe: one connection's requests are handled one at a time.
    """

    def __init__(self, *, reauth_ms: int = 0) -> None:
        self.reauth_ms = reauth_ms
        self.state = AuthState.HANDSHAKE_OR_VERSIONS
        self.principal: KafkaPrincipal | None = None
        self.mechanism: str | None = None
        self.session_expires_ms: float | None = None
        self.authenticate_version = -1
        """The version of the last SaslAuthenticate; v1+ clients may re-authenticate."""

    @property
    def authenticated(self) -> bool:
        return self.state is AuthState.AUTHENTICATED

    def _move(self, target: AuthState) -> None:
        self.state = self.state.transition_to(target)

    def _fail(self, reason: str) -> Verdict:
        self._move(AuthState.FAILED)
        return Verdict(Action.CLOSE, reason)

    def admit(
        self, api_key: int, api_version: int, *, now_ms: float, version_fallback: bool = False
    ) -> Verdict:
        """What to do with a request of ``api_key`` at ``api_version`` arriving now."""
        state = self.state
        if state is AuthState.HANDSHAKE_OR_VERSIONS and api_key == API_VERSIONS:
            if not version_fallback:
                self._move(AuthState.HANDSHAKE)
            return Verdict(Action.SERVE)
        if state in (AuthState.HANDSHAKE_OR_VERSIONS, AuthState.HANDSHAKE):
            if api_key == SASL_HANDSHAKE:
                return Verdict(Action.HANDSHAKE)
            return self._fail(
                f"api key {api_key} before SASL authentication (only ApiVersions and "
                "SaslHandshake are served before it)"
            )
        if state in (AuthState.AUTHENTICATE, AuthState.REAUTHENTICATE):
            if api_key == SASL_AUTHENTICATE:
                return Verdict(Action.AUTHENTICATE)
            return self._fail(f"api key {api_key} during SASL authentication")
        if state is AuthState.RAW_AUTHENTICATE:
            return self._fail("a Kafka request where a raw SASL token was expected")
        if state is AuthState.AUTHENTICATED:
            if api_key == SASL_HANDSHAKE:
                if api_version >= 1 and self.authenticate_version >= 1:
                    return Verdict(Action.HANDSHAKE)
                return Verdict(Action.ILLEGAL_SASL_STATE)
            if api_key == SASL_AUTHENTICATE:
                return Verdict(Action.ILLEGAL_SASL_STATE)
            if self.session_expires_ms is not None and now_ms >= self.session_expires_ms:
                return self._fail(
                    "the SASL session expired (connections.max.reauth.ms) without re-authentication"
                )
            return Verdict(Action.SERVE)
        return Verdict(Action.CLOSE, "the connection's authentication failed")

    def admit_raw_token(self) -> bool:
        """Whether the next frame is a raw SASL token (after SaslHandshake v0)."""
        return self.state is AuthState.RAW_AUTHENTICATE

    def handshake_answered(self, *, version: int, mechanism: str, supported: bool) -> bool:
        """After answering SaslHandshake: True when the exchange goes on, False when the
        connection is to be closed (unsupported, or a re-authentication changing the
        mechanism)."""
        if not supported or (self.state is AuthState.AUTHENTICATED and mechanism != self.mechanism):
            self._move(AuthState.FAILED)
            return False
        if self.state is AuthState.AUTHENTICATED:
            self._move(AuthState.REAUTHENTICATE)
        else:
            self._move(AuthState.AUTHENTICATE if version >= 1 else AuthState.RAW_AUTHENTICATE)
        self.mechanism = mechanism
        return True

    def step_answered(
        self,
        outcome: StepOutcome,
        *,
        now_ms: float,
        api_version: int = 0,
        principal: KafkaPrincipal | None = None,
    ) -> str:
        """After a SCRAM step: ``""`` when the connection goes on, else why it closes.

        ``api_version``: the SaslAuthenticate's (0 for a raw token); ``principal``: who
        authenticated, with COMPLETE."""
        if self.state is AuthState.AUTHENTICATE or self.state is AuthState.REAUTHENTICATE:
            self.authenticate_version = api_version
        if outcome is StepOutcome.FAILED:
            self._move(AuthState.FAILED)
            return "SASL authentication failed"
        if outcome is StepOutcome.CHALLENGE:
            return ""
        if principal is None:
            raise ValueError("a completed step needs the principal")
        if self.principal is not None and principal != self.principal:
            self._move(AuthState.FAILED)
            return (
                f"re-authentication as {principal} on a connection of {self.principal} "
                "(a connection keeps its principal)"
            )
        self._move(AuthState.AUTHENTICATED)
        self.principal = principal
        self.session_expires_ms = now_ms + self.reauth_ms if self.reauth_ms > 0 else None
        return ""

    def session_lifetime_ms(self, now_ms: float) -> int:
        """What SaslAuthenticate v1+ tells the client: 0 when the session does not expire."""
        if self.session_expires_ms is None:
            return 0
        return max(1, int(self.session_expires_ms - now_ms))
