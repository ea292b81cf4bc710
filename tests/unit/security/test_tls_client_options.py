"""Client security options: kafka-python's names, Kafka's Java properties (the CLI's
--command-config, the Spark connector's kafka.* options) and sasl.jaas.config, each
bad value refused with a message naming it and never the password."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from headwater import errors
from headwater.client.transport import connection, rpc_errors
from headwater.client.transport.security import (
    ClientSecurity,
    from_java_properties,
    from_options,
    parse_jaas_config,
)
from headwater.testing.tls import CertificateAuthority, write_keystore

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="s3cr\\"et";'
)


def test_kafka_python_names() -> None:
    s = from_options(
        security_protocol="sasl_ssl",
        ssl_cafile="/ca.pem",
        sasl_mechanism="scram-sha-512",
        sasl_plain_username="alice",
        sasl_plain_password="hunter2",
    )
    assert s.security_protocol == "SASL_SSL" and s.uses_tls and s.uses_sasl
    assert s.sasl_mechanism == "SCRAM-SHA-512"
    assert "hunter2" not in repr(s)
    assert from_options() == ClientSecurity()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"security_protocol": "TLS"}, "security_protocol must be one of"),
        ({"security_protocol": "SSL", "ssl_certfile": "/c.pem"}, "go together"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "sasl_mechanism"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512"},
            "needs sasl_plain_username",
        ),
        ({"security_protocol": "SSL", "ssl_check_hostname": False}, "ssl_check_hostname"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_options(**options)  # type: ignore[arg-type]


def test_java_properties_of_a_command_config() -> None:
    s = from_java_properties(
        {
            "security.protocol": "SASL_SSL",
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.truststore.type": "PEM",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS,
            "client.id": "cli",
        }
    )
    assert (s.security_protocol, s.ssl_cafile) == ("SASL_SSL", "/etc/ca.pem")
    assert (s.sasl_plain_username, s.sasl_plain_password) == ("alice", 's3cr"et')
    mtls = from_java_properties(
        {"kafka.security.protocol": "SSL", "kafka.ssl.keystore.location": "/me.pem"},
        prefix="kafka.",
    )
    assert mtls.ssl_certfile == mtls.ssl_keyfile == "/me.pem"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"ssl.truststore.type": "JKS"}, "only PEM"),
        ({"ssl.key.password": "x"}, "encrypted PEM"),
        ({"ssl.keystore.password": "x"}, "ssl.keystore.password: not supported"),
        ({"ssl.endpoint.identification.algorithm": ""}, "host name"),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": 'org.example.Other required username="a" password="pw9";',
            },
            "not supported",
        ),
        ({"sasl.jaas.config": "nonsense"}, "expected org.apache"),
    ],
)
def test_bad_java_properties_are_refused(props: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        from_java_properties(props)
    assert "pw9" not in str(refused.value)


def test_jaas_config_without_password_is_refused() -> None:
    with pytest.raises(ValueError, match="needs username"):
        parse_jaas_config(
            "org.apache.kafka.common.security.scram.ScramLoginModule required username=a;"
        )


def test_channels_read_the_pem_files_once_and_refuse_bad_ones(tmp_path: Path) -> None:
    ca = CertificateAuthority.create()
    (tmp_path / "ca.pem").write_bytes(ca.pem)
    keystore = write_keystore(tmp_path / "me.pem", ca.issue("me"))
    good = ClientSecurity("SSL", str(tmp_path / "ca.pem"), str(keystore), str(keystore))
    connection.Channels(security=good).close()
    with pytest.raises(ValueError, match=r"ssl_cafile .*missing\.pem"):
        connection.Channels(security=ClientSecurity("SSL", str(tmp_path / "missing.pem")))
    (tmp_path / "nokey.pem").write_bytes(ca.pem)
    with pytest.raises(ValueError, match="ssl_keyfile: expected one unencrypted"):
        connection.Channels(
            security=ClientSecurity(
                "SSL", str(tmp_path / "ca.pem"), str(keystore), str(tmp_path / "nokey.pem")
            )
        )


def test_an_unauthenticated_call_is_an_authentication_failure() -> None:
    class Refused(grpc.RpcError, grpc.Call):  # type: ignore[misc]
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAUTHENTICATED

        def details(self) -> str:
            return "SASL authentication required on listener CLIENT"

    error = rpc_errors.translate_rpc_error(Refused(), "h:9092")
    assert isinstance(error, errors.SaslAuthenticationFailedError)
    assert "h:9092" in str(error) and "listener CLIENT" in str(error)
    assert not error.retriable
