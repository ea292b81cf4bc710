"""The Kafka listeners' TLS (headwater.server.tls.ssl_context, ReloadingSslContext,
certificate_subject): real handshakes in memory between Python's ssl client and server."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from headwater.server.listeners import SslConfig
from headwater.server.tls import (
    ReloadingSslContext,
    TlsMaterialError,
    certificate_subject,
    ssl_context,
)
from headwater.testing.tls import CertificateAuthority, write_keystore


def handshake(
    server: ssl.SSLContext, ca_pem: bytes, *, client_cert: Path | None = None
) -> tuple[dict[str, object], dict[str, object] | None]:
    """``(the server certificate the client saw, the client certificate the server saw)``."""
    client_context = ssl.create_default_context(cadata=ca_pem.decode())
    if client_cert is not None:
        client_context.load_cert_chain(client_cert)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_context.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    server_side = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end, out, into in (
            ("client", client, c_out, s_in),
            ("server", server_side, s_out, c_in),
        ):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
            into.write(out.read())
        if all(done.values()):
            break
    assert all(done.values())
    return client.getpeercert() or {}, server_side.getpeercert() or None


def test_the_context_serves_the_keystores_certificate(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    keystore = write_keystore(tmp_path / "broker.pem", ca.issue("broker-a"))
    seen, client = handshake(ssl_context(SslConfig(keystore_location=str(keystore))), ca.pem)
    assert certificate_subject(seen) == "CN=broker-a,O=Headwater Tests"
    assert client is None


def test_required_client_auth_verifies_the_clients_certificate(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    (tmp_path / "ca.pem").write_bytes(ca.pem)
    config = SslConfig(
        keystore_location=str(write_keystore(tmp_path / "broker.pem", ca.issue("broker"))),
        truststore_location=str(tmp_path / "ca.pem"),
        client_auth="required",
    )
    client_cert = write_keystore(tmp_path / "client.pem", ca.issue("alice", unit="Ops"))
    _, client = handshake(ssl_context(config), ca.pem, client_cert=client_cert)
    assert certificate_subject(client) == "CN=alice,OU=Ops,O=Headwater Tests"
    with pytest.raises(ssl.SSLError):
        handshake(ssl_context(config), ca.pem)


def test_a_rewritten_keystore_serves_new_connections(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    keystore = write_keystore(tmp_path / "broker.pem", ca.issue("first"))
    reloading = ReloadingSslContext(SslConfig(keystore_location=str(keystore)), listener="K")
    assert certificate_subject(handshake(reloading.context, ca.pem)[0]).startswith("CN=first")
    write_keystore(keystore, ca.issue("second-and-longer"))
    assert certificate_subject(handshake(reloading.context, ca.pem)[0]).startswith(
        "CN=second-and-longer"
    )
    assert reloading.reloads == 1


def test_an_unusable_keystore_is_refused_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key")
    with pytest.raises(TlsMaterialError, match=r"bad\.pem: expected one PEM private key"):
        ssl_context(SslConfig(keystore_location=str(bad)))


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ({"subject": ((("commonName", "a,b"),),)}, "CN=a\\,b"),
        ({"subject": ((("countryName", "FR"),), (("commonName", "x"),))}, "CN=x,C=FR"),
        ({}, None),
        (None, None),
    ],
)
def test_certificate_subjects_are_rfc_2253(
    subject: dict[str, object] | None, expected: str | None
) -> None:
    assert certificate_subject(subject) == expected
