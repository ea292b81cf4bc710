"""The broker's channels to other brokers: client TLS files reloaded for new channels,
and the asyncio SASL session (authenticate once, again after the peer forgets it).

The SASL part runs a real in-process gRPC asyncio server whose handler accepts only
the session tokens it "issued", so a peer restart is clearing that set; the exchange
itself is a fake (the real SCRAM exchange is covered end to end).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from headwater import errors
from headwater.client import sasl_aio
from headwater.client.sasl import SESSION_METADATA_KEY, SaslCredentials, SaslSession
from headwater.coordination.model import BrokerRegistration
from headwater.server import tls
from headwater.server.config import config_from_properties
from headwater.server.listeners import SslConfig
from headwater.server.runtime import channels
from headwater.server.runtime.controller_channel import GrpcControllerChannel
from headwater.testing.tls import CertificateAuthority, write_keystore

SECRET = "inter-broker-Pw-1"
CREDS = SaslCredentials("SCRAM-SHA-512", "broker", SECRET)
METHOD = "/test.Echo/Call"
NOW = [1000.0]
"""The fake clock of the session tests (monotonic ms)."""


def test_client_credentials_reload_when_the_files_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca = CertificateAuthority.create()
    trust = tmp_path / "ca.pem"
    trust.write_bytes(ca.pem)
    keystore = write_keystore(tmp_path / "broker.pem", ca.issue("broker"))
    ssl = SslConfig(keystore_location=str(keystore), truststore_location=str(trust))
    reloading = tls.ReloadingChannelCredentials(ssl, listener="INTERNAL")
    generation, first = reloading.current()
    assert generation == 0 and reloading.current() == (0, first)  # unchanged: same object

    issued = ca.issue("broker-rotated")
    write_keystore(keystore, issued)
    generation, second = reloading.current()
    assert generation == 1 and second is not first

    body = issued.key_pem.decode().splitlines()[2]
    keystore.write_text("-----BEGIN PRIVATE KEY-----\n" + body + "\n")  # half written
    with caplog.at_level(logging.WARNING):
        assert reloading.current() == (1, second)  # the previous material is kept
        assert reloading.current() == (1, second)
    warnings = [r for r in caplog.records if "keeping the previous" in r.getMessage()]
    assert len(warnings) == 1 and body not in caplog.text

    write_keystore(keystore, ca.issue("broker-again"))
    assert reloading.current()[0] == 2


def test_one_listener_for_both_roles_shares_its_credentials(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    keystore = write_keystore(tmp_path / "broker.pem", ca.issue("broker"))
    layout = config_from_properties(
        {
            "broker.id": "0",
            "listeners": "INTERNAL://:9093",
            "listener.security.protocol.map": "INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": str(keystore),
            "listener.name.internal.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="broker" password="{SECRET}";'
            ),
        }
    ).listener_layout
    security = channels.inter_broker_security(layout)
    assert security.inter_broker.tls is security.control_plane.tls is not None
    assert security.inter_broker.sasl == CREDS
    assert SECRET not in repr(security)


class Peer:
    """A gRPC asyncio server answering METHOD for the session tokens it issued."""

    def __init__(self) -> None:
        self.issued: set[str] = set()
        self.calls = 0
        self.server = grpc.aio.server()
        self.port = 0

    async def start(self) -> None:
        async def call(request: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            self.calls += 1
            token = dict(context.invocation_metadata() or ()).get(SESSION_METADATA_KEY)
            if token not in self.issued:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid SASL session")
            return request

        handler = grpc.method_handlers_generic_handler(
            "test.Echo", {"Call": grpc.unary_unary_rpc_method_handler(call)}
        )
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()


@pytest_asyncio.fixture
async def peer() -> AsyncIterator[Peer]:
    p = Peer()
    await p.start()
    yield p
    await p.server.stop(None)


def fake_authenticator(peer: Peer, *, refuse: bool = False, lifetime_ms: int = 0) -> Any:
    async def authenticate(channel: grpc.aio.Channel, **kwargs: Any) -> SaslSession:
        assert kwargs["credentials"] == CREDS
        if refuse:
            raise errors.SaslAuthenticationFailedError(
                "Authentication failed: invalid credentials for user broker"
            )
        token = f"{len(peer.issued) + 1:08x}"
        peer.issued.add(token)
        return SaslSession(
            token=bytes.fromhex(token),
            lifetime_ms=lifetime_ms,
            mechanism=CREDS.mechanism,
            username=CREDS.username,
            obtained_at_ms=NOW[0],
        )

    return authenticate


def channel_to(peer: Peer, keeper: sasl_aio.SaslSessionKeeper) -> grpc.aio.Channel:
    return sasl_aio.sasl_channel(f"127.0.0.1:{peer.port}", keeper=keeper)


@pytest.mark.asyncio
async def test_session_is_opened_once_and_again_after_the_peer_forgets_it(peer: Peer) -> None:
    keeper = sasl_aio.SaslSessionKeeper(credentials=CREDS, authenticator=fake_authenticator(peer))
    async with channel_to(peer, keeper) as channel:
        call = channel.unary_unary(METHOD)
        assert await call(b"one", timeout=5) == b"one"
        assert await call(b"two", timeout=5) == b"two"
        assert keeper.authentications == 1 and peer.calls == 2
        peer.issued.clear()  # the peer restarted: it knows no session
        assert await call(b"three", timeout=5) == b"three"
        assert keeper.authentications == 2 and peer.calls == 4  # refused once, retried


@pytest.mark.asyncio
async def test_a_refused_exchange_reaches_the_caller_without_the_password(peer: Peer) -> None:
    keeper = sasl_aio.SaslSessionKeeper(
        credentials=CREDS, authenticator=fake_authenticator(peer, refuse=True)
    )
    async with channel_to(peer, keeper) as channel:
        with pytest.raises(errors.SaslAuthenticationFailedError) as refused:
            await channel.unary_unary(METHOD)(b"x", timeout=5)
    assert SECRET not in str(refused.value) and peer.calls == 0
    assert SECRET not in repr(CREDS)


@pytest.mark.asyncio
async def test_a_session_with_a_lifetime_is_renewed_before_it_ends(peer: Peer) -> None:
    NOW[0] = 1000.0
    keeper = sasl_aio.SaslSessionKeeper(
        credentials=CREDS,
        authenticator=fake_authenticator(peer, lifetime_ms=10_000),
        clock=lambda: NOW[0],
    )
    async with channel_to(peer, keeper) as channel:
        call = channel.unary_unary(METHOD)
        assert await call(b"a", timeout=5) == b"a"
        NOW[0] += 8_000  # 80% of the lifetime: the session is kept
        assert await call(b"b", timeout=5) == b"b"
        assert keeper.authentications == 1
        NOW[0] += 1_000  # 90%: renewed before the broker's deadline, no refusal needed
        assert await call(b"c", timeout=5) == b"c"
        assert keeper.authentications == 2 and peer.calls == 3


@pytest.mark.asyncio
async def test_short_lived_channels_to_one_peer_share_its_session(peer: Peer) -> None:
    keeper = sasl_aio.SaslSessionKeeper(credentials=CREDS, authenticator=fake_authenticator(peer))
    for i in range(3):
        async with channel_to(peer, keeper) as channel:
            assert await channel.unary_unary(METHOD)(b"%d" % i, timeout=5) == b"%d" % i
    assert keeper.authentications == 1 and peer.calls == 3


@pytest.fixture
def rotating_security(tmp_path: Path) -> Iterator[tuple[Path, CertificateAuthority]]:
    """The process-wide inter-broker security on files in ``tmp_path``; reset afterwards."""
    ca = CertificateAuthority.create()
    keystore = write_keystore(tmp_path / "broker.pem", ca.issue("broker"))
    reloading = tls.ReloadingChannelCredentials(
        SslConfig(keystore_location=str(keystore)), listener="INTERNAL"
    )
    peer = channels.PeerSecurity(tls=reloading)
    channels.configure_inter_broker(
        channels.InterBrokerSecurity(inter_broker=peer, control_plane=peer)
    )
    try:
        yield keystore, ca
    finally:
        channels.configure_inter_broker(channels.InterBrokerSecurity())


def test_the_controller_replaces_a_channel_made_before_a_rotation(
    rotating_security: tuple[Path, CertificateAuthority],
) -> None:
    keystore, ca = rotating_security
    controller = GrpcControllerChannel(controller_id=0, timeout_ms=1000, max_message_bytes=1 << 20)
    broker = BrokerRegistration(broker_id=1, host="127.0.0.1", port=1, epoch=1)
    try:
        first = controller._stub(broker)
        assert controller._stub(broker) is first  # unchanged files: the same channel
        write_keystore(keystore, ca.issue("broker-rotated"))
        assert channels.credentials_generation(control_plane=True) == 1
        assert controller._stub(broker) is not first  # made again with the new certificate
    finally:
        controller.close()
