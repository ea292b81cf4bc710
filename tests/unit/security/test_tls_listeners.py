"""Listeners in-process with real TLS: who is refused, which principal a call gets, and
certificates rotated without a restart.

The listeners are the broker's own (``listener_servers.start_listeners``) on 127.0.0.1
with certificates made by ``headwater.testing.tls``; a test service answers the
identity the interceptor recorded (``current_identity``), as servicers and the
authorizer read it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from headwater.security.principal import KafkaPrincipal
from headwater.server.auth.identity import current_identity
from headwater.server.config import config_from_properties
from headwater.server.runtime import listener_servers
from headwater.server.tls import TlsMaterialError
from headwater.testing.tls import CertificateAuthority, IssuedCertificate, write_keystore
from headwater.testing.zookeeper import free_ports

WHO = "/headwater.v1.Test/WhoAmI"
SASL = "/headwater.v1.SaslService/SaslHandshake"


async def _who(request: bytes, context: Any) -> bytes:
    identity = current_identity(context)
    return f"{identity.principal}|{identity.listener}|{identity.host}".encode()


class _TestHandler(grpc.GenericRpcHandler):  # type: ignore[type-arg]
    def service(self, details: grpc.HandlerCallDetails) -> Any:
        if details.method in (WHO, SASL):
            return grpc.unary_unary_rpc_method_handler(_who)
        return None


class _Sessions:
    def principal_for(self, token: bytes | str) -> KafkaPrincipal | None:
        return KafkaPrincipal.user("alice") if token == "ab" * 32 else None


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("pki")
    ca, rogue = CertificateAuthority.create(), CertificateAuthority.create("Rogue CA")
    (tmp / "ca.pem").write_bytes(ca.pem)
    return {
        "dir": tmp,
        "ca": ca,
        "rogue": rogue,
        "broker": write_keystore(tmp / "broker.pem", ca.issue("broker", unit="Brokers")),
        "alice": ca.issue("alice", unit="Eng"),
        "untrusted": rogue.issue("alice", unit="Eng"),
        "expired": ca.issue_expired("alice"),
    }


def _channel(address: str, ca: bytes, client: IssuedCertificate | None) -> grpc.aio.Channel:
    creds = grpc.ssl_channel_credentials(
        root_certificates=ca,
        private_key=client.key_pem if client else None,
        certificate_chain=client.chain_pem if client else None,
    )
    return grpc.aio.secure_channel(address, creds)


async def _call(channel: grpc.aio.Channel, method: str = WHO, token: str | None = None) -> str:
    metadata = (("x-headwater-sasl-session", token),) if token else None
    answer = await channel.unary_unary(method)(b"", timeout=5, metadata=metadata)
    return bytes(answer).decode()


@pytest_asyncio.fixture
async def listeners(pki: dict[str, Any]) -> AsyncIterator[dict[str, str]]:
    ports = dict(zip(("MTLS", "TLS", "PLAIN", "SASL"), free_ports(4), strict=True))
    config = config_from_properties(
        {
            "broker.id": "0",
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
            "listener.security.protocol.map": "MTLS:SSL,TLS:SSL,PLAIN:PLAINTEXT,SASL:SASL_SSL",
            "inter.broker.listener.name": "MTLS",
            "ssl.keystore.location": str(pki["broker"]),
            "ssl.truststore.location": str(pki["dir"] / "ca.pem"),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": (
                "RULE:^CN=(.*?),OU=Brokers,.*$/broker:$1/,RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L"
            ),
        }
    )
    health = HealthServicer()

    def register(server: grpc.aio.Server) -> None:
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        server.add_generic_rpc_handlers((_TestHandler(),))

    bound = await listener_servers.start_listeners(
        config.listener_layout, register=register, options=[], sessions=lambda: _Sessions()
    )
    try:
        yield {name: f"127.0.0.1:{port}" for name, port in ports.items()}
    finally:
        await listener_servers.stop_listeners(bound, grace_s=0)


@pytest.mark.asyncio
async def test_mtls_principal_comes_from_the_certificate_through_the_rules(
    listeners: dict[str, str], pki: dict[str, Any]
) -> None:
    async with _channel(listeners["MTLS"], pki["ca"].pem, pki["alice"]) as ch:
        assert await _call(ch) == "User:alice@eng|MTLS|127.0.0.1"
    broker_cert = pki["ca"].issue("b1", unit="Brokers")
    async with _channel(listeners["MTLS"], pki["ca"].pem, broker_cert) as ch:
        assert (await _call(ch)).startswith("User:broker:b1|MTLS|")


@pytest.mark.asyncio
@pytest.mark.parametrize("client", [None, "untrusted", "expired"])
async def test_mtls_listener_refuses_missing_untrusted_and_expired_certificates(
    listeners: dict[str, str], pki: dict[str, Any], client: str | None
) -> None:
    async with _channel(listeners["MTLS"], pki["ca"].pem, pki[client] if client else None) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _call(ch)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE  # the handshake fails


@pytest.mark.asyncio
async def test_client_refuses_a_broker_it_does_not_trust(
    listeners: dict[str, str], pki: dict[str, Any]
) -> None:
    async with _channel(listeners["TLS"], pki["rogue"].pem, None) as ch:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _call(ch)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.asyncio
async def test_tls_without_client_auth_and_plaintext_are_anonymous(
    listeners: dict[str, str], pki: dict[str, Any]
) -> None:
    async with _channel(listeners["TLS"], pki["ca"].pem, None) as ch:
        assert await _call(ch) == "User:ANONYMOUS|TLS|127.0.0.1"
    async with grpc.aio.insecure_channel(listeners["PLAIN"]) as ch:
        assert await _call(ch) == "User:ANONYMOUS|PLAIN|127.0.0.1"
    async with grpc.aio.insecure_channel(listeners["TLS"]) as ch:  # plaintext to a TLS port
        with pytest.raises(grpc.aio.AioRpcError):
            await _call(ch)


@pytest.mark.asyncio
async def test_sasl_listener_needs_a_session_except_for_sasl_and_health(
    listeners: dict[str, str], pki: dict[str, Any]
) -> None:
    async with _channel(listeners["SASL"], pki["ca"].pem, None) as ch:
        for token in (None, "cd" * 32, "not-hex"):
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await _call(ch, token=token)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "cd" * 32 not in (refused.value.details() or "")
        assert await _call(ch, token="ab" * 32) == "User:alice|SASL|127.0.0.1"
        assert (await _call(ch, SASL)).startswith("User:ANONYMOUS|SASL")
        health = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING


@pytest.mark.asyncio
async def test_keystore_rotation_serves_new_connections_without_a_restart(
    listeners: dict[str, str], pki: dict[str, Any], tmp_path: Path
) -> None:
    """The broker's certificate is replaced by one from another CA: a client trusting only
    the new CA is refused before the rotation and served after it; an established
    connection keeps working."""
    new_ca = CertificateAuthority.create("Rotated CA")
    old = pki["broker"].read_bytes()
    async with _channel(listeners["TLS"], pki["ca"].pem, None) as established:
        assert (await _call(established)).startswith("User:ANONYMOUS")
        async with _channel(listeners["TLS"], new_ca.pem, None) as ch:
            with pytest.raises(grpc.aio.AioRpcError):
                await _call(ch)
        try:
            write_keystore(pki["broker"], new_ca.issue("broker", unit="Brokers"))
            async with _channel(listeners["TLS"], new_ca.pem, None) as ch:
                assert (await _call(ch)).startswith("User:ANONYMOUS|TLS")
            assert (await _call(established)).startswith("User:ANONYMOUS")
            # a broken file keeps the last good material
            pki["broker"].write_bytes(b"-----BEGIN CERTIFICATE-----\ngarbage\n")
            async with _channel(listeners["TLS"], new_ca.pem, None) as ch:
                assert (await _call(ch)).startswith("User:ANONYMOUS|TLS")
        finally:
            pki["broker"].write_bytes(old)


def test_unusable_pem_material_is_refused_naming_the_file(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    only_cert = tmp_path / "only-cert.pem"
    only_cert.write_bytes(ca.issue("x").cert_pem)
    for path, message in ((tmp_path / "missing.pem", "No such file"), (only_cert, "private key")):
        config = config_from_properties(
            {
                "broker.id": "0",
                "listeners": "SSL://127.0.0.1:0",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": str(path),
            }
        )
        with pytest.raises(TlsMaterialError, match=message) as refused:
            listener_servers.tls.server_credentials(
                config.listener_layout.get("SSL").ssl,  # type: ignore[arg-type]
                listener="SSL",
            )
        assert str(path) in str(refused.value)
