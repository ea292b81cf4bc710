"""SASL on one Kafka-protocol connection: SaslHandshake and SaslAuthenticate over SCRAM.

The decisions are :class:`~headwater.kafka.authentication.ConnectionAuth`'s; this runs
them: it answers SaslHandshake (the listener's mechanisms), drives the broker's SCRAM
server (:meth:`headwater.server.auth.sasl.SaslExchanges.new_server`, the same exchange and
credential cache as the gRPC SaslService) with each SaslAuthenticate or raw token, and
once authenticated records the connection's principal
(:func:`headwater.server.auth.identity.set_identity`) for the authorizer.

A connection's requests are handled one at a time in the connection's task, so the
identity set here is the one every later request of the connection is authorized with.
Never logged: the SCRAM messages (the client proof).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

from headwater import errors
from headwater.clock import Clock, monotonic_ms
from headwater.errors import ErrorCode
from headwater.kafka.authentication import ConnectionAuth, StepOutcome
from headwater.kafka.protocol import Request, build, error_code, response_module
from headwater.security.principal import KafkaPrincipal, RequestIdentity
from headwater.security.scram import ScramServer
from headwater.server.auth.identity import set_identity

log = logging.getLogger(__name__)

ServerFactory = Callable[[str], ScramServer]
"""``mechanism -> a new SCRAM server exchange`` (the broker's :class:`SaslExchanges`)."""

AUTHENTICATION_FAILED = "Authentication failed: invalid credentials with SASL mechanism {}"
"""Kafka's message for a failed SCRAM exchange (the same for an unknown user)."""


class SaslConnection:
    """The SASL side of one connection on a SASL_PLAINTEXT or SASL_SSL Kafka listener."""

    def __init__(
        self,
        *,
        listener: str,
        host: str,
        mechanisms: tuple[str, ...],
        new_server: ServerFactory,
        reauth_ms: int,
        clock: Clock = monotonic_ms,
    ) -> None:
        self.auth = ConnectionAuth(reauth_ms=reauth_ms)
        self._listener = listener
        self._host = host
        self._mechanisms = mechanisms
        self._new_server = new_server
        self._clock = clock
        self._server: ScramServer | None = None

    def now_ms(self) -> float:
        return self._clock()

    def handshake(self, request: Request) -> tuple[Any, str]:
        """SaslHandshake's answer, and why the connection closes after it (``""``: not)."""
        mechanism = request.body.mechanism or ""
        supported = mechanism in self._mechanisms
        if supported:
            self._server = self._new_server(mechanism)
        going_on = self.auth.handshake_answered(
            version=request.api_version, mechanism=mechanism, supported=supported
        )
        module = response_module(request.api_key, request.api_version)
        code = ErrorCode.NONE if going_on else ErrorCode.UNSUPPORTED_SASL_MECHANISM
        response = build(
            module.SaslHandshakeResponse,
            error_code=error_code(code),
            mechanisms=self._mechanisms,
        )
        if going_on:
            return response, ""
        self._server = None
        return response, (
            f"SASL mechanism {mechanism[:40]!r} is not enabled on listener {self._listener} "
            f"({', '.join(self._mechanisms)})"
            if not supported
            else f"re-authentication must use the connection's mechanism {self.auth.mechanism}"
        )

    def authenticate(self, request: Request) -> tuple[Any, str]:
        """SaslAuthenticate's answer, and why the connection closes after it (``""``: not)."""
        challenge, code, message, closing = self._step(
            request.body.auth_bytes, api_version=request.api_version
        )
        module = response_module(request.api_key, request.api_version)
        lifetime_ms = self.auth.session_lifetime_ms(self._clock()) if self.auth.authenticated else 0
        response = build(
            module.SaslAuthenticateResponse,
            error_code=error_code(code),
            error_message=message,
            auth_bytes=challenge,
            session_lifetime=datetime.timedelta(milliseconds=lifetime_ms),
        )
        return response, closing

    def raw_token(self, token: bytes) -> tuple[bytes | None, str]:
        """The answer to a raw token after SaslHandshake v0 (None: none, the connection
        closes), and why the connection closes (``""``: not)."""
        challenge, code, _, closing = self._step(token, api_version=0)
        return (challenge if code is ErrorCode.NONE else None), closing

    def _step(
        self, auth_bytes: bytes, *, api_version: int
    ) -> tuple[bytes, ErrorCode, str | None, str]:
        """``(challenge, code, message, closing)`` of one SCRAM step."""
        server = self._server
        now = self._clock()
        if server is None:  # admit() only lets SaslAuthenticate through after a handshake
            raise AssertionError("SaslAuthenticate without an exchange")
        try:
            challenge = server.evaluate_response(auth_bytes)
        except errors.HeadwaterError as exc:
            self._server = None
            closing = self.auth.step_answered(
                StepOutcome.FAILED, now_ms=now, api_version=api_version
            )
            log.info(
                "Kafka listener %s: SASL authentication of %r from %s failed: %s",
                self._listener,
                server.attempted_user,
                self._host,
                exc,
            )
            return (
                b"",
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                AUTHENTICATION_FAILED.format(server.mechanism.value),
                closing,
            )
        if server.authorized_id is None:
            self.auth.step_answered(StepOutcome.CHALLENGE, now_ms=now, api_version=api_version)
            return challenge, ErrorCode.NONE, None, ""
        self._server = None
        principal = KafkaPrincipal.user(server.authorized_id)
        again = self.auth.principal is not None
        closing = self.auth.step_answered(
            StepOutcome.COMPLETE, now_ms=now, api_version=api_version, principal=principal
        )
        if closing:
            log.info("Kafka listener %s: %s from %s", self._listener, closing, self._host)
            return b"", ErrorCode.SASL_AUTHENTICATION_FAILED, closing, closing
        if again:
            log.info(
                "Kafka listener %s: %s re-authenticated from %s (session of %d ms)",
                self._listener,
                principal,
                self._host,
                self.auth.reauth_ms,
            )
        set_identity(RequestIdentity(principal, self._host, self._listener))
        return challenge, ErrorCode.NONE, None, ""
