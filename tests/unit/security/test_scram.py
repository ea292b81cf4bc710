"""SCRAM (RFC 5802/7677): the published SCRAM-SHA-256 vector, SHA-512 round trips,
Kafka's credential form, every illegal transition, and failures that name no secret."""

from __future__ import annotations

import base64
import itertools

import pytest
from headwater import errors
from headwater.security import scram
from headwater.security.scram import (
    ClientState,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    ServerState,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

SECRET = b"fake-salt-secret"


def store(**users: tuple[ScramMechanism, ScramCredential]) -> scram.CredentialLookup:
    def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        entry = users.get(user)
        return entry[1] if entry is not None and entry[0] is mechanism else None

    return lookup


def rfc_server() -> ScramServer:
    credential = ScramCredential.from_password(SHA256, "pencil", salt=RFC_SALT, iterations=4096)
    return ScramServer(
        SHA256,
        credentials=store(user=(SHA256, credential)),
        nonce=lambda: RFC_SERVER_NONCE,
        fake_salt_secret=SECRET,
    )


def counter_nonce() -> scram.Nonce:
    numbers = itertools.count()
    return lambda: f"nonce{next(numbers)}"


def exchange(
    mechanism: ScramMechanism, *, password: str, stored_password: str, user: str = "alice"
) -> tuple[ScramClient, ScramServer]:
    credential = ScramCredential.from_password(
        mechanism, stored_password, salt=b"salt-bytes", iterations=4096
    )
    client = ScramClient(mechanism, username=user, password=password, nonce=counter_nonce())
    server = ScramServer(
        mechanism,
        credentials=store(alice=(mechanism, credential)),
        nonce=counter_nonce(),
        fake_salt_secret=SECRET,
    )
    return client, server


def test_rfc7677_client_messages() -> None:
    client = ScramClient(SHA256, username="user", password="pencil", nonce=lambda: RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.on_server_first(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.on_server_final(RFC_SERVER_FINAL)
    assert client.state is ClientState.COMPLETE


def test_rfc7677_server_messages() -> None:
    server = rfc_server()
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert (server.state, server.authorized_id) == (ServerState.RECEIVE_CLIENT_FINAL, None)
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.state is ServerState.COMPLETE
    assert server.authorized_id == "user"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_round_trip(mechanism: ScramMechanism) -> None:
    client, server = exchange(mechanism, password="s3cret", stored_password="s3cret")
    final = server.evaluate_response(
        client.on_server_first(server.evaluate_response(client.first_message()))
    )
    client.on_server_final(final)
    assert client.state is ClientState.COMPLETE
    assert server.state is ServerState.COMPLETE
    assert server.authorized_id == "alice"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_wrong_password_and_unknown_user_fail_alike(mechanism: ScramMechanism) -> None:
    messages = []
    for user, password in (("alice", "wrong-password"), ("mallory", "s3cret")):
        client, server = exchange(mechanism, password=password, stored_password="s3cret", user=user)
        client_final = client.on_server_first(server.evaluate_response(client.first_message()))
        with pytest.raises(errors.SaslAuthenticationFailedError) as info:
            server.evaluate_response(client_final)
        assert server.state is ServerState.FAILED
        assert server.authorized_id is None
        assert info.value.code == errors.ErrorCode.SASL_AUTHENTICATION_FAILED
        assert password not in str(info.value) and "s3cret" not in str(info.value)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert mechanism.value in messages[0]


def test_unknown_user_gets_a_stable_salt_and_kafkas_iterations() -> None:
    def server_first(user: str) -> scram.ServerFirstMessage:
        server = ScramServer(
            SHA512, credentials=store(), nonce=lambda: "n", fake_salt_secret=SECRET
        )
        first = scram.ClientFirstMessage(username=user, nonce="c").encode()
        return scram.ServerFirstMessage.parse(server.evaluate_response(first))

    assert server_first("bob").salt == server_first("bob").salt
    assert server_first("bob").salt != server_first("carol").salt
    assert server_first("bob").iterations == scram.MIN_ITERATIONS


def test_a_credential_for_the_other_mechanism_does_not_authenticate() -> None:
    credential = ScramCredential.from_password(SHA256, "pw", salt=b"s", iterations=4096)
    server = ScramServer(
        SHA512, credentials=store(alice=(SHA256, credential)), fake_salt_secret=SECRET
    )
    client = ScramClient(SHA512, username="alice", password="pw")
    final = client.on_server_first(server.evaluate_response(client.first_message()))
    with pytest.raises(errors.SaslAuthenticationFailedError):
        server.evaluate_response(final)


# -- illegal transitions ----------------------------------------------------------------------


def test_server_transition_table_is_what_the_states_allow() -> None:
    assert scram.SERVER_TRANSITIONS[ServerState.COMPLETE] == frozenset()
    assert scram.SERVER_TRANSITIONS[ServerState.FAILED] == frozenset()
    for state in ServerState:
        server = rfc_server()
        server.state = state
        for target in ServerState:
            if target in scram.SERVER_TRANSITIONS[state]:
                server._transition_to(target)
                assert server.state is target
                server.state = state
            else:
                with pytest.raises(errors.IllegalSaslStateError):
                    server._transition_to(target)
                assert server.state is state


def test_client_transition_table_is_what_the_states_allow() -> None:
    for state in ClientState:
        client = ScramClient(SHA512, username="u", password="p")
        client.state = state
        for target in ClientState:
            if target in scram.CLIENT_TRANSITIONS[state]:
                client._transition_to(target)
                assert client.state is target
                client.state = state
            else:
                with pytest.raises(errors.IllegalSaslStateError):
                    client._transition_to(target)
                assert client.state is state


def test_server_refuses_messages_after_completion() -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    server.evaluate_response(RFC_CLIENT_FINAL)
    with pytest.raises(errors.IllegalSaslStateError):
        server.evaluate_response(RFC_CLIENT_FINAL)
    assert server.state is ServerState.COMPLETE


def test_server_refuses_messages_after_failure() -> None:
    server = rfc_server()
    with pytest.raises(errors.SaslAuthenticationFailedError):
        server.evaluate_response(RFC_CLIENT_FINAL)  # a client-final where client-first belongs
    assert server.state is ServerState.FAILED
    with pytest.raises(errors.IllegalSaslStateError):
        server.evaluate_response(RFC_CLIENT_FIRST)


def test_client_first_sent_twice_is_illegal() -> None:
    client = ScramClient(SHA256, username="user", password="pencil")
    client.first_message()
    with pytest.raises(errors.IllegalSaslStateError):
        client.first_message()
    assert client.state is ClientState.RECEIVE_SERVER_FIRST


def test_client_out_of_order_messages_are_illegal() -> None:
    client = ScramClient(SHA256, username="user", password="pencil", nonce=lambda: RFC_CLIENT_NONCE)
    with pytest.raises(errors.IllegalSaslStateError):
        client.on_server_first(RFC_SERVER_FIRST)
    with pytest.raises(errors.IllegalSaslStateError):
        client.on_server_final(RFC_SERVER_FINAL)
    client.first_message()
    with pytest.raises(errors.IllegalSaslStateError):
        client.on_server_final(RFC_SERVER_FINAL)
    client.on_server_first(RFC_SERVER_FIRST)
    with pytest.raises(errors.IllegalSaslStateError):
        client.on_server_first(RFC_SERVER_FIRST)
    client.on_server_final(RFC_SERVER_FINAL)
    with pytest.raises(errors.IllegalSaslStateError):
        client.on_server_final(RFC_SERVER_FINAL)
    assert client.state is ClientState.COMPLETE


# -- client-side checks of the server ---------------------------------------------------------


def client_after_first() -> ScramClient:
    client = ScramClient(SHA256, username="user", password="pencil", nonce=lambda: RFC_CLIENT_NONCE)
    client.first_message()
    return client


@pytest.mark.parametrize(
    ("challenge", "reason"),
    [
        (b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce"),
        (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095", "iterations"),
        (b"r=rOprNGfwEbeRWgbNEkqOx,s=not base64!,i=4096", "base64"),
        (b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=many", "number"),
        (b"m=ext,r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "mandatory"),
        (b"s=W22ZaJ0SNY7soEsUEjb6gQ==,r=x,i=4096", "expected"),
        (b"", "empty"),
        (b"\xff\xfe", "UTF-8"),
    ],
)
def test_client_refuses_a_bad_server_first(challenge: bytes, reason: str) -> None:
    client = client_after_first()
    with pytest.raises(errors.SaslAuthenticationFailedError, match=reason):
        client.on_server_first(challenge)
    assert client.state is ClientState.FAILED
    assert "pencil" not in repr(client)


@pytest.mark.parametrize(
    ("challenge", "reason"),
    [
        (b"v=AAAA", "signature"),
        (b"e=invalid-proof", "invalid-proof"),
        (b"x=1", "expected"),
    ],
)
def test_client_refuses_a_bad_server_final(challenge: bytes, reason: str) -> None:
    client = client_after_first()
    client.on_server_first(RFC_SERVER_FIRST)
    with pytest.raises(errors.SaslAuthenticationFailedError, match=reason):
        client.on_server_final(challenge)
    assert client.state is ClientState.FAILED


# -- strict parsing on the server -------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"", "empty"),
        (b"n=user,r=abc", "GS2"),
        (b"p=tls-unique,,n=user,r=abc", "channel binding"),
        (b"x,,n=user,r=abc", "n or y"),
        (b"n,,r=abc,n=user", "expected n="),
        (b"n,,n=,r=abc", "empty user"),
        (b"n,,n=us=er,r=abc", "2C or 3D"),
        (b"n,,n=user,r=", "nonce"),
        (b"n,,n=user,r=a,b", "attribute"),
        (b"n,,m=x,n=user,r=abc", "mandatory"),
        (b"n,a=admin,n=user,r=abc", "authorization id"),
        (b"\xc3\x28", "UTF-8"),
    ],
)
def test_server_refuses_a_bad_client_first(message: bytes, reason: str) -> None:
    server = rfc_server()
    with pytest.raises(errors.SaslAuthenticationFailedError, match=reason):
        server.evaluate_response(message)
    assert server.state is ServerState.FAILED


def test_server_accepts_escaped_names_and_kafka_extensions() -> None:
    first = scram.ClientFirstMessage.parse(b"n,a=a=3Db=2Cc,n=a=3Db=2Cc,r=abc,tokenauth=true")
    assert first.username == "a=b,c"
    assert first.extensions == {"tokenauth": "true"}
    assert scram.ClientFirstMessage.parse(first.encode()) == first


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (RFC_CLIENT_FINAL.replace(b"%hvY", b"%hvZ"), "nonce"),
        (RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel binding"),
        (RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=AAAA"), "invalid credentials"),
        (RFC_CLIENT_FINAL.split(b",p=")[0] + b",p=AAAA", "invalid credentials"),
        (RFC_CLIENT_FINAL.split(b",p=")[0], "expected"),
        (b"r=x,c=biws,p=AAAA", "expected"),
        (RFC_CLIENT_FINAL.replace(b"p=dHzb", b"p=!!!!"), "base64"),
    ],
)
def test_server_refuses_a_bad_client_final(message: bytes, reason: str) -> None:
    server = rfc_server()
    server.evaluate_response(RFC_CLIENT_FIRST)
    with pytest.raises(errors.SaslAuthenticationFailedError, match=reason) as info:
        server.evaluate_response(message)
    assert server.state is ServerState.FAILED
    assert server.authorized_id is None
    assert "pencil" not in str(info.value) and "dHzb" not in str(info.value)


# -- credentials ------------------------------------------------------------------------------


def test_credential_config_round_trip_and_kafka_form() -> None:
    credential = ScramCredential.from_password(SHA512, "pw", salt=b"\x01\x02", iterations=8192)
    text = credential.to_config()
    assert text.startswith("salt=AQI=,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.from_config(text) == credential
    assert "stored_key" not in repr(credential) and "AQI" not in repr(credential)


def test_credential_from_salted_password_matches_from_password() -> None:
    salted = SHA512.salted_password("pw", b"salt", 4096)
    assert ScramCredential.from_salted_password(
        SHA512, salted_password=salted, salt=b"salt", iterations=4096
    ) == ScramCredential.from_password(SHA512, "pw", salt=b"salt", iterations=4096)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("salt=AQI=,stored_key=AQI=,iterations=4096", "server_key"),
        ("salt=AQI=,stored_key=AQI=,server_key=AQI=,iterations=x", "non-numeric"),
        ("salt=?,stored_key=AQI=,server_key=AQI=,iterations=4096", "base64"),
        ("salt=AQI=,salt=AQI=,stored_key=AQI=,server_key=AQI=,iterations=1", "twice"),
        ("garbage", "attribute"),
    ],
)
def test_malformed_credential_config(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        ScramCredential.from_config(text)


def test_iteration_bounds_are_kafkas() -> None:
    scram.check_iterations(4096)
    scram.check_iterations(16384)
    with pytest.raises(ValueError, match="too few"):
        scram.check_iterations(4095)
    with pytest.raises(ValueError, match="too many"):
        scram.check_iterations(16385)


def test_mechanism_names() -> None:
    assert ScramMechanism.from_name("SCRAM-SHA-512") is SHA512
    with pytest.raises(errors.UnsupportedSaslMechanismError, match="SCRAM-SHA-256"):
        ScramMechanism.from_name("PLAIN")


def test_username_escaping_round_trips() -> None:
    for name in ("plain", "a=b", "a,b", "=,=2C"):
        assert scram.unescape_username(scram.escape_username(name)) == name


def test_random_nonces_are_printable_and_differ() -> None:
    a, b = scram.random_nonce(), scram.random_nonce()
    assert a != b and "," not in a and a.isprintable()
