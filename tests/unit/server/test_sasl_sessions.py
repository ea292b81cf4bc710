"""SASL exchanges and sessions on the broker: handshake, the SCRAM exchange to a session
token, expiry (connections.max.reauth.ms), revocation, bounds, and every refusal."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from headwater import errors
from headwater.security.principal import KafkaPrincipal
from headwater.security.scram import ScramClient, ScramCredential, ScramMechanism
from headwater.server.auth import sasl
from headwater.server.auth.sasl import SaslExchanges, SaslSessions

SHA512 = ScramMechanism.SCRAM_SHA_512


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def counting_bytes() -> Callable[[int], bytes]:
    numbers = itertools.count(1)
    return lambda n: next(numbers).to_bytes(n, "big")


CREDENTIAL = ScramCredential.from_password(SHA512, "right", salt=b"salt", iterations=4096)


def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
    return CREDENTIAL if (user, mechanism) == ("alice", SHA512) else None


def setup(
    *, reauth_ms: int = 0, max_exchanges: int = 8
) -> tuple[SaslExchanges, SaslSessions, FakeClock]:
    clock = FakeClock()
    sessions = SaslSessions(reauth_ms=reauth_ms, clock=clock)
    exchanges = SaslExchanges(
        enabled_mechanisms=["SCRAM-SHA-512"],
        credentials=lookup,
        sessions=sessions,
        clock=clock,
        random_bytes=counting_bytes(),
        max_exchanges=max_exchanges,
        exchange_timeout_ms=30_000,
    )
    return exchanges, sessions, clock


def login(
    exchanges: SaslExchanges, *, user: str = "alice", password: str = "right"
) -> sasl.AuthenticateResult:
    exchange_id = exchanges.handshake("SCRAM-SHA-512")
    client = ScramClient(SHA512, username=user, password=password)
    step = exchanges.authenticate(exchange_id, client.first_message())
    assert step.session_token == b""
    final = exchanges.authenticate(exchange_id, client.on_server_first(step.auth_bytes))
    client.on_server_final(final.auth_bytes)
    return final


def test_a_complete_exchange_opens_a_session() -> None:
    exchanges, sessions, _ = setup()
    result = login(exchanges)
    assert len(result.session_token) == sasl.TOKEN_BYTES
    assert result.principal == KafkaPrincipal.user("alice")
    assert sessions.principal_for(result.session_token) == KafkaPrincipal.user("alice")
    assert sessions.principal_for(sasl.encode_token(result.session_token)) == KafkaPrincipal.user(
        "alice"
    )
    assert len(exchanges) == 0


@pytest.mark.parametrize(("user", "password"), [("alice", "wrong"), ("bob", "right")])
def test_wrong_password_or_unknown_user_open_nothing(user: str, password: str) -> None:
    exchanges, sessions, _ = setup()
    with pytest.raises(errors.SaslAuthenticationFailedError) as info:
        login(exchanges, user=user, password=password)
    assert password not in str(info.value)
    assert len(sessions) == 0 and len(exchanges) == 0


def test_unknown_mechanism_is_refused() -> None:
    exchanges, _, _ = setup()
    for name in ("PLAIN", "SCRAM-SHA-256", ""):
        with pytest.raises(errors.UnsupportedSaslMechanismError, match="SCRAM-SHA-512"):
            exchanges.handshake(name)
    assert len(exchanges) == 0


def test_unknown_failed_and_finished_exchanges_are_illegal_state() -> None:
    exchanges, _, _ = setup()
    with pytest.raises(errors.IllegalSaslStateError, match="SaslHandshake"):
        exchanges.authenticate(b"nope", b"n,,n=alice,r=x")
    exchange_id = exchanges.handshake("SCRAM-SHA-512")
    with pytest.raises(errors.SaslAuthenticationFailedError):
        exchanges.authenticate(exchange_id, b"garbage")
    with pytest.raises(errors.IllegalSaslStateError):
        exchanges.authenticate(exchange_id, b"n,,n=alice,r=x")


def test_exchanges_expire_and_are_bounded() -> None:
    exchanges, _, clock = setup(max_exchanges=2)
    first = exchanges.handshake("SCRAM-SHA-512")
    clock.now += 30_000
    with pytest.raises(errors.IllegalSaslStateError):
        exchanges.authenticate(first, b"n,,n=alice,r=x")
    ids = [exchanges.handshake("SCRAM-SHA-512") for _ in range(3)]
    assert len(exchanges) == 2
    with pytest.raises(errors.IllegalSaslStateError):
        exchanges.authenticate(ids[0], b"n,,n=alice,r=x")
    assert exchanges.authenticate(ids[2], b"n,,n=alice,r=x").auth_bytes.startswith(b"r=x")


def test_sessions_expire_after_reauth_ms() -> None:
    exchanges, sessions, clock = setup(reauth_ms=60_000)
    result = login(exchanges)
    assert result.session_lifetime_ms == 60_000
    clock.now += 59_999
    assert sessions.principal_for(result.session_token) is not None
    clock.now += 1
    assert sessions.principal_for(result.session_token) is None


def test_sessions_without_reauth_do_not_expire() -> None:
    exchanges, sessions, clock = setup()
    result = login(exchanges)
    assert result.session_lifetime_ms == 0
    clock.now += 10**9
    assert sessions.principal_for(result.session_token) == KafkaPrincipal.user("alice")


def test_revoking_a_user_ends_its_sessions_for_that_mechanism() -> None:
    exchanges, sessions, _ = setup()
    token = login(exchanges).session_token
    assert sessions.revoke_user("alice", "SCRAM-SHA-256") == 0
    assert sessions.principal_for(token) is not None
    assert sessions.revoke_user("alice", "SCRAM-SHA-512") == 1
    assert sessions.principal_for(token) is None


def test_sessions_are_bounded_oldest_first() -> None:
    sessions = SaslSessions(max_sessions=2, random_bytes=counting_bytes())
    tokens = [
        sessions.create(KafkaPrincipal.user(f"u{i}"), mechanism="SCRAM-SHA-512")[0]
        for i in range(3)
    ]
    assert sessions.principal_for(tokens[0]) is None
    assert sessions.principal_for(tokens[2]) == KafkaPrincipal.user("u2")


@pytest.mark.parametrize("value", ["", "zz", "00" * 31, b"\xff" * 5, "00" * 33])
def test_malformed_tokens_are_nobody(value: str | bytes) -> None:
    sessions = SaslSessions()
    assert sessions.principal_for(value) is None


def test_a_listener_offers_only_its_own_mechanisms() -> None:
    exchanges, _, _ = setup()
    with pytest.raises(errors.UnsupportedSaslMechanismError, match="SCRAM-SHA-256"):
        exchanges.handshake("SCRAM-SHA-512", allowed=["SCRAM-SHA-256"])
    assert len(exchanges) == 0
    assert exchanges.handshake("SCRAM-SHA-512", allowed=["SCRAM-SHA-512"])


def test_mechanisms_per_listener_from_the_broker_config() -> None:
    from headwater.server.config import config_from_properties

    config = config_from_properties(
        {
            "broker.id": "0",
            "listeners": "INTERNAL://127.0.0.1:9091,CLIENT://127.0.0.1:9092",
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        }
    )
    auth = sasl.SaslAuthentication.from_config(config)
    assert auth.mechanisms_for("CLIENT") == ("SCRAM-SHA-256",)
    assert auth.mechanisms_for("INTERNAL") == ("SCRAM-SHA-512", "SCRAM-SHA-256")
