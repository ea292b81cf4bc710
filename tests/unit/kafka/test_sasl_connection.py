"""SASL on one Kafka connection (headwater.kafka.sasl) against the broker's real SCRAM
server and a real SCRAM client: handshakes, a login, a wrong password, raw v0 tokens,
session lifetime and re-authentication, and the identity the authorizer then reads."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.kafka.authentication import Action, AuthState
from headwater.kafka.protocol import Request
from headwater.kafka.sasl import SaslConnection
from headwater.security.principal import ANONYMOUS, KafkaPrincipal, RequestIdentity
from headwater.security.scram import ScramClient, ScramCredential, ScramMechanism
from headwater.server.auth.identity import current_identity, reset_identity, set_identity
from headwater.server.auth.sasl import SaslExchanges, SaslSessions
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as HandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest as HandshakeV1

SHA512 = ScramMechanism.SCRAM_SHA_512
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw"}
CREDENTIALS = {
    user: ScramCredential.from_password(SHA512, pw, salt=user.encode(), iterations=4096)
    for user, pw in PASSWORDS.items()
}


@pytest.fixture(autouse=True)
def _own_identity() -> Iterator[None]:
    """A login sets the task's identity; put the one before the test back after it."""
    token = set_identity(RequestIdentity(ANONYMOUS, "unit-test", "NONE"))
    yield
    reset_identity(token)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def connection(*, reauth_ms: int = 0, clock: Clock | None = None) -> SaslConnection:
    exchanges = SaslExchanges(
        enabled_mechanisms=["SCRAM-SHA-512"],
        credentials=lambda user, m: CREDENTIALS.get(user) if m is SHA512 else None,
        sessions=SaslSessions(),
    )
    return SaslConnection(
        listener="KAFKA",
        host="10.0.0.7",
        mechanisms=("SCRAM-SHA-512",),
        new_server=exchanges.new_server,
        reauth_ms=reauth_ms,
        clock=clock or Clock(),
    )


def request(body: Any, correlation_id: int = 1) -> Request:
    return Request(body.__api_key__, body.__version__, correlation_id, "test", body)


def handshake(conn: SaslConnection, version: int = 1) -> Any:
    body = (HandshakeV1 if version else HandshakeV0)(mechanism="SCRAM-SHA-512")
    assert conn.auth.admit(17, version, now_ms=0).action is Action.HANDSHAKE
    response, closing = conn.handshake(request(body))
    assert closing == "" and response.error_code.value == 0
    return response


def login(conn: SaslConnection, user: str, password: str) -> Any:
    """SaslAuthenticate v1 steps after a handshake; the last response."""
    client = ScramClient(SHA512, username=user, password=password)
    first, closing = conn.authenticate(
        request(SaslAuthenticateRequest(auth_bytes=client.first_message()))
    )
    assert closing == "" and first.error_code.value == 0
    final = client.on_server_first(first.auth_bytes)
    last, closing = conn.authenticate(request(SaslAuthenticateRequest(auth_bytes=final)))
    if last.error_code.value == 0:
        client.on_server_final(last.auth_bytes)
        assert closing == ""
    else:
        assert closing
    return last


def test_the_handshake_names_the_listeners_mechanisms() -> None:
    assert handshake(connection()).mechanisms == ("SCRAM-SHA-512",)


def test_an_unsupported_mechanism_is_answered_then_closed() -> None:
    conn = connection()
    response, closing = conn.handshake(request(HandshakeV1(mechanism="PLAIN")))
    assert response.error_code.value == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ("SCRAM-SHA-512",)
    assert "'PLAIN' is not enabled on listener KAFKA" in closing
    assert conn.auth.state is AuthState.FAILED


def test_a_login_makes_the_user_the_connections_identity() -> None:
    conn = connection()
    handshake(conn)
    last = login(conn, "alice", "alice-pw")
    assert last.error_code.value == 0 and last.session_lifetime == datetime.timedelta(0)
    assert conn.auth.principal == KafkaPrincipal.user("alice")
    identity = current_identity(None)  # type: ignore[arg-type]
    assert (str(identity.principal), identity.host, identity.listener) == (
        "User:alice",
        "10.0.0.7",
        "KAFKA",
    )


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("nobody", "alice-pw")])
def test_a_wrong_password_or_unknown_user_fails_alike(user: str, password: str) -> None:
    conn = connection()
    handshake(conn)
    last = login(conn, user, password)
    assert last.error_code.value == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert last.error_message == (
        "Authentication failed: invalid credentials with SASL mechanism SCRAM-SHA-512"
    )
    assert conn.auth.state is AuthState.FAILED and conn.auth.principal is None


def test_raw_tokens_after_a_v0_handshake() -> None:
    conn = connection()
    handshake(conn, version=0)
    assert conn.auth.admit_raw_token()
    client = ScramClient(SHA512, username="bob", password="bob-pw")
    challenge, closing = conn.raw_token(client.first_message())
    assert challenge is not None and closing == ""
    final, closing = conn.raw_token(client.on_server_first(challenge))
    assert final is not None and closing == ""
    client.on_server_final(final)
    assert conn.auth.principal == KafkaPrincipal.user("bob")


def test_a_wrong_raw_token_gets_no_answer_and_closes() -> None:
    conn = connection()
    handshake(conn, version=0)
    client = ScramClient(SHA512, username="bob", password="not-bob")
    challenge, _ = conn.raw_token(client.first_message())
    assert challenge is not None
    answer, closing = conn.raw_token(client.on_server_first(challenge))
    assert (answer, closing) == (None, "SASL authentication failed")


def test_reauthentication_renews_the_session_lifetime() -> None:
    clock = Clock()
    conn = connection(reauth_ms=60_000, clock=clock)
    handshake(conn)
    assert login(conn, "alice", "alice-pw").session_lifetime == datetime.timedelta(seconds=60)
    clock.now += 50_000
    assert conn.auth.admit(17, 1, now_ms=clock.now).action is Action.HANDSHAKE
    handshake_response, _ = conn.handshake(request(HandshakeV1(mechanism="SCRAM-SHA-512")))
    assert handshake_response.error_code.value == 0
    assert login(conn, "alice", "alice-pw").session_lifetime == datetime.timedelta(seconds=60)
    assert conn.auth.session_expires_ms == clock.now + 60_000


def test_reauthentication_as_another_user_is_refused() -> None:
    conn = connection(reauth_ms=60_000)
    handshake(conn)
    login(conn, "alice", "alice-pw")
    conn.handshake(request(HandshakeV1(mechanism="SCRAM-SHA-512")))
    last = login(conn, "bob", "bob-pw")
    assert last.error_code.value == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "keeps its principal" in last.error_message
    assert conn.auth.state is AuthState.FAILED
