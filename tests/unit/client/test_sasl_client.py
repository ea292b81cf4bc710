"""The client's SASL: the SCRAM exchange over real gRPC to an in-process SaslService, the
interceptor that carries the session, re-authentication after a broker forgets it, renewal
before the session's lifetime ends, and refusals that hold no password."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from headwater import errors
from headwater.client.transport import sasl
from headwater.security.scram import ScramCredential, ScramMechanism
from headwater.server.auth.sasl import SaslExchanges, SaslSessions
from headwater.server.convert import pb_error
from headwater.v1 import sasl_pb2

SHA512 = ScramMechanism.SCRAM_SHA_512
CREDENTIAL = ScramCredential.from_password(SHA512, "right-pw", salt=b"salt", iterations=4096)
WHOAMI = "/test.Protected/WhoAmI"


class Broker:
    """SaslService plus one protected method answering the caller's principal."""

    def __init__(self, *, reauth_ms: int = 0) -> None:
        self.reauth_ms = reauth_ms
        self.restart()
        self.refused = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    "headwater.v1.SaslService",
                    {
                        "SaslHandshake": grpc.unary_unary_rpc_method_handler(
                            self.handshake,
                            request_deserializer=sasl_pb2.SaslHandshakeRequest.FromString,
                            response_serializer=sasl_pb2.SaslHandshakeResponse.SerializeToString,
                        ),
                        "SaslAuthenticate": grpc.unary_unary_rpc_method_handler(
                            self.authenticate,
                            request_deserializer=sasl_pb2.SaslAuthenticateRequest.FromString,
                            response_serializer=sasl_pb2.SaslAuthenticateResponse.SerializeToString,
                        ),
                    },
                ),
                grpc.method_handlers_generic_handler(
                    "test.Protected", {"WhoAmI": grpc.unary_unary_rpc_method_handler(self.whoami)}
                ),
            )
        )
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def restart(self) -> None:
        """Forget every session and exchange, as a restarted broker does."""
        self.sessions = SaslSessions(reauth_ms=self.reauth_ms)
        self.exchanges = SaslExchanges(
            enabled_mechanisms=["SCRAM-SHA-512"],
            credentials=lambda u, m: CREDENTIAL if (u, m) == ("alice", SHA512) else None,
            sessions=self.sessions,
        )

    def handshake(self, request: Any, context: Any) -> Any:
        try:
            exchange_id = self.exchanges.handshake(request.mechanism)
        except errors.HeadwaterError as exc:
            return sasl_pb2.SaslHandshakeResponse(error=pb_error(exc.code), error_message=str(exc))
        return sasl_pb2.SaslHandshakeResponse(session_id=exchange_id, mechanisms=["SCRAM-SHA-512"])

    def authenticate(self, request: Any, context: Any) -> Any:
        try:
            r = self.exchanges.authenticate(request.session_id, request.auth_bytes)
        except errors.HeadwaterError as exc:
            return sasl_pb2.SaslAuthenticateResponse(
                error=pb_error(exc.code), error_message=str(exc)
            )
        return sasl_pb2.SaslAuthenticateResponse(
            auth_bytes=r.auth_bytes,
            session_token=r.session_token,
            session_lifetime_ms=r.session_lifetime_ms,
        )

    def whoami(self, request: bytes, context: Any) -> bytes:
        token = dict(context.invocation_metadata()).get(sasl.SESSION_METADATA_KEY)
        principal = self.sessions.principal_for(token) if token else None
        if principal is None:
            self.refused += 1
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "the SASL session is unknown")
        return str(principal).encode()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(None)


@pytest.fixture
def broker() -> Iterator[Broker]:
    b = Broker()
    yield b
    b.stop()


def channel_for(
    broker: Broker, password: str = "right-pw", user: str = "alice"
) -> tuple[grpc.Channel, sasl.SaslClientInterceptor, grpc.Channel]:
    raw = grpc.insecure_channel(broker.address)
    interceptor = sasl.SaslClientInterceptor(
        raw,
        credentials=sasl.SaslCredentials("SCRAM-SHA-512", user, password),
        address=broker.address,
    )
    return grpc.intercept_channel(raw, interceptor), interceptor, raw


def whoami(channel: grpc.Channel) -> bytes:
    method = channel.unary_unary(WHOAMI, request_serializer=None, response_deserializer=None)
    result: bytes = method(b"", timeout=10)
    return result


def test_authenticate_returns_a_session(broker: Broker) -> None:
    with grpc.insecure_channel(broker.address) as raw:
        session = sasl.authenticate(
            raw, mechanism="SCRAM-SHA-512", username="alice", password="right-pw", timeout_s=5
        )
    assert len(session.token) == 32 and session.lifetime_ms == 0
    assert "right-pw" not in repr(session) and session.token.hex() not in repr(session)
    assert str(broker.sessions.principal_for(session.token)) == "User:alice"


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong-pw"), ("bob", "right-pw")])
def test_bad_credentials_raise_sasl_authentication_failed(
    broker: Broker, user: str, password: str
) -> None:
    with (
        grpc.insecure_channel(broker.address) as raw,
        pytest.raises(errors.SaslAuthenticationFailedError) as info,
    ):
        sasl.authenticate(raw, mechanism="SCRAM-SHA-512", username=user, password=password)
    assert password not in str(info.value)
    assert len(broker.sessions) == 0


def test_unsupported_mechanism(broker: Broker) -> None:
    with (
        grpc.insecure_channel(broker.address) as raw,
        pytest.raises(errors.UnsupportedSaslMechanismError),
    ):
        sasl.authenticate(raw, mechanism="SCRAM-SHA-256", username="alice", password="x")


def test_unreachable_broker_is_a_network_error() -> None:
    with grpc.insecure_channel("127.0.0.1:1") as raw, pytest.raises(errors.NetworkError):
        sasl.authenticate(raw, mechanism="SCRAM-SHA-512", username="a", password="b", timeout_s=2)


def test_interceptor_authenticates_once_and_carries_the_session(broker: Broker) -> None:
    channel, interceptor, raw = channel_for(broker)
    with raw:
        assert whoami(channel) == b"User:alice"
        assert whoami(channel) == b"User:alice"
    assert interceptor.authentications == 1
    assert broker.refused == 0


def test_a_broker_that_forgot_the_session_is_answered_by_authenticating_again(
    broker: Broker,
) -> None:
    channel, interceptor, raw = channel_for(broker)
    with raw:
        assert whoami(channel) == b"User:alice"
        broker.restart()
        assert whoami(channel) == b"User:alice"
    assert interceptor.authentications == 2
    assert broker.refused == 1


def test_wrong_password_through_the_interceptor_raises_and_reaches_nothing(broker: Broker) -> None:
    channel, interceptor, raw = channel_for(broker, password="wrong-pw")
    with raw, pytest.raises(errors.SaslAuthenticationFailedError) as info:
        whoami(channel)
    assert "wrong-pw" not in str(info.value)
    assert broker.refused == 0 and interceptor.authentications == 0


def test_sessions_with_a_lifetime_are_renewed_before_it_ends() -> None:
    broker = Broker(reauth_ms=60_000)  # long in real time: the client's clock is fake
    now = [0.0]
    raw = grpc.insecure_channel(broker.address)
    interceptor = sasl.SaslClientInterceptor(
        raw,
        credentials=sasl.SaslCredentials("SCRAM-SHA-512", "alice", "right-pw"),
        clock=lambda: now[0],
        authenticator=lambda ch, **kw: sasl.authenticate(ch, clock=lambda: now[0], **kw),
    )
    channel = grpc.intercept_channel(raw, interceptor)
    try:
        assert whoami(channel) == b"User:alice"
        now[0] = 50_000.0
        assert whoami(channel) == b"User:alice"
        assert interceptor.authentications == 1
        now[0] = 51_000.0  # 85 % of the 60 s lifetime passed
        assert whoami(channel) == b"User:alice"
        assert interceptor.authentications == 2
    finally:
        raw.close()
        broker.stop()


def test_credentials_repr_hides_the_password() -> None:
    creds = sasl.SaslCredentials("SCRAM-SHA-512", "alice", "hunter2")
    assert "hunter2" not in repr(creds) and "alice" in repr(creds)
