"""The SaslService exchange against real broker processes: credentials set through one
broker authenticate on another (the ZooKeeper notification reached its cache), a wrong
password and an unknown user get the same SASL_AUTHENTICATION_FAILED with no secret in
the message or the broker logs, deletion takes effect, and the Admin API answers Kafka's
refusals (KIP-554) without describing any key."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.admin.client import Admin
from headwater.client.admin.values import ScramCredentialInfo, ScramDeletion, ScramUpsertion
from headwater.client.transport import sasl
from headwater.testing.cluster import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import sasl_pb2, sasl_pb2_grpc

PASSWORD = "e2e-Secret-pw-7781"
WRONG = "e2e-Wrong-pw-1187"


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[Cluster]:
    with Cluster(
        brokers=2,
        data_dir=tmp_path_factory.mktemp("scram-exchange"),
        zookeeper=zookeeper.connect_string,
    ) as c:
        yield c


def login(address: str, user: str, password: str) -> sasl.SaslSession:
    with grpc.insecure_channel(address) as channel:
        return sasl.authenticate(
            channel, mechanism="SCRAM-SHA-512", username=user, password=password, timeout_s=10
        )


def login_eventually(
    address: str, user: str, password: str, timeout_s: float = 20.0
) -> sasl.SaslSession:
    """Until the other broker's cache has the credential (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return login(address, user, password)
        except errors.SaslAuthenticationFailedError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def fails_eventually(
    address: str, user: str, password: str, timeout_s: float = 20.0
) -> errors.HeadwaterError:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            login(address, user, password)
        except errors.SaslAuthenticationFailedError as exc:
            return exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"{user} could still authenticate after {timeout_s} s")
        time.sleep(0.1)


def broker_logs(cluster: Cluster) -> str:
    return "\n".join(
        Path(b.log_path).read_text(encoding="utf-8", errors="replace")
        for b in cluster.brokers.values()
    )


def test_credentials_set_on_one_broker_authenticate_on_another(cluster: Cluster) -> None:
    b0, b1 = cluster.brokers[0].address, cluster.brokers[1].address
    with Admin(b0) as admin:
        assert admin.alter_user_scram_credentials(
            [ScramUpsertion("alice", "SCRAM-SHA-512", 8192, PASSWORD)]
        ) == {"alice": None}
        described = admin.describe_user_scram_credentials(["alice"])
    assert described["alice"].credential_infos == (ScramCredentialInfo("SCRAM-SHA-512", 8192),)  # type: ignore[union-attr]
    session = login_eventually(b1, "alice", PASSWORD)
    assert len(session.token) == 32 and session.lifetime_ms == 0
    # The broker that wrote the credential learns it by its watch too, as the others do.
    assert login_eventually(b0, "alice", PASSWORD).token != session.token


def test_wrong_password_and_unknown_user_fail_alike_and_leak_nothing(cluster: Cluster) -> None:
    address = cluster.brokers[0].address
    with Admin(address) as admin:
        admin.alter_user_scram_credentials([ScramUpsertion("bob", "SCRAM-SHA-512", 4096, PASSWORD)])
    login_eventually(address, "bob", PASSWORD)
    with pytest.raises(errors.SaslAuthenticationFailedError) as wrong:
        login(address, "bob", WRONG)
    with pytest.raises(errors.SaslAuthenticationFailedError) as unknown:
        login(address, "mallory", PASSWORD)
    assert wrong.value.message == unknown.value.message
    assert "invalid credentials" in wrong.value.message
    for text in (str(wrong.value), str(unknown.value)):
        assert PASSWORD not in text and WRONG not in text
    logs = broker_logs(cluster)
    assert "SASL authentication" in logs and "failed" in logs
    assert PASSWORD not in logs and WRONG not in logs


def test_unsupported_mechanism_and_unknown_exchange(cluster: Cluster) -> None:
    address = cluster.brokers[0].address
    with grpc.insecure_channel(address) as channel:
        with pytest.raises(errors.UnsupportedSaslMechanismError, match="SCRAM-SHA-512") as info:
            sasl.authenticate(channel, mechanism="SCRAM-SHA-256", username="bob", password="x")
        response = sasl_pb2_grpc.SaslServiceStub(channel).SaslAuthenticate(
            sasl_pb2.SaslAuthenticateRequest(session_id=b"no-such", auth_bytes=b"n,,n=a,r=b"),
            timeout=10,
        )
    assert str(info.value).count("UNSUPPORTED_SASL_MECHANISM") == 1  # the code said once
    assert int(response.error) == errors.ErrorCode.ILLEGAL_SASL_STATE
    assert not response.session_token


def test_deletion_takes_effect_on_every_broker(cluster: Cluster) -> None:
    b0, b1 = cluster.brokers[0].address, cluster.brokers[1].address
    with Admin(b1) as admin:
        admin.alter_user_scram_credentials(
            [ScramUpsertion("carol", "SCRAM-SHA-512", 4096, PASSWORD)]
        )
        login_eventually(b0, "carol", PASSWORD)
        assert admin.alter_user_scram_credentials(
            deletions=[ScramDeletion("carol", "SCRAM-SHA-512")]
        ) == {"carol": None}
        fails_eventually(b0, "carol", PASSWORD)
        fails_eventually(b1, "carol", PASSWORD)
        with pytest.raises(errors.ResourceNotFoundError):
            admin.describe_user_scram_credentials(["carol"])


def test_admin_refusals_change_nothing(cluster: Cluster) -> None:
    with Admin(cluster.brokers[0].address) as admin:
        before = admin.describe_user_scram_credentials()
        out = admin.alter_user_scram_credentials(
            [
                ScramUpsertion("dave", "SCRAM-SHA-512", 1000, PASSWORD),
                ScramUpsertion("", "SCRAM-SHA-512", 4096, PASSWORD),
                ScramUpsertion("erin", "SCRAM-SHA-512", 4096, PASSWORD),
                ScramUpsertion("frank", "PLAIN", 4096, PASSWORD),
            ],
            [ScramDeletion("erin", "SCRAM-SHA-512"), ScramDeletion("nobody", "SCRAM-SHA-256")],
            raise_on_error=False,
        )
        assert isinstance(out["dave"], errors.UnacceptableCredentialError)
        assert isinstance(out[""], errors.UnacceptableCredentialError)
        assert isinstance(out["erin"], errors.DuplicateResourceError)
        assert isinstance(out["frank"], errors.UnsupportedSaslMechanismError)
        assert isinstance(out["nobody"], errors.ResourceNotFoundError)
        assert admin.describe_user_scram_credentials() == before
        with pytest.raises(errors.DuplicateResourceError):
            admin.describe_user_scram_credentials(["alice", "alice"])


def test_describe_output_holds_no_key_material(cluster: Cluster) -> None:
    with Admin(cluster.brokers[0].address) as admin:
        admin.alter_user_scram_credentials(
            [ScramUpsertion("gina", "SCRAM-SHA-256", 4096, PASSWORD)]
        )
        text = repr(admin.describe_user_scram_credentials())
    assert "gina" in text and "SCRAM-SHA-256" in text
    assert "salt" not in text and "key" not in text and PASSWORD not in text


def test_cli_through_a_broker_never_takes_the_password_from_argv(cluster: Cluster) -> None:
    bootstrap = cluster.brokers[1].address

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "headwater.cli.main", "users", *args, "--bootstrap", bootstrap],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    done = cli("scram-set", "henry", stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    described = cli("describe", "henry", "--output", "json")
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout) == [
        {"user": "henry", "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}
    ]
    with grpc.insecure_channel(cluster.brokers[0].address) as channel:
        deadline = time.monotonic() + 20
        while True:
            try:
                sasl.authenticate(
                    channel, mechanism="SCRAM-SHA-512", username="henry", password=PASSWORD
                )
                break
            except errors.SaslAuthenticationFailedError:
                assert time.monotonic() < deadline, "henry never authenticated"
                time.sleep(0.1)
    assert "--password" not in cli("scram-set", "--help").stdout.replace("--password-file", "")
    few = cli("scram-set", "henry", "--iterations", "10", stdin=PASSWORD + "\n")
    assert few.returncode != 0 and "UNACCEPTABLE_CREDENTIAL" in few.stderr
    gone = cli("scram-delete", "henry", "--mechanism", "SCRAM-SHA-512")
    assert gone.returncode == 0, gone.stderr
    missing = cli("describe", "henry")
    assert missing.returncode != 0 and "RESOURCE_NOT_FOUND" in missing.stderr
