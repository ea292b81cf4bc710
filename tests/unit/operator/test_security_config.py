"""The operator's client security settings from the environment the chart sets.

Defaults are PLAINTEXT with no Admin options (today's behaviour); the chart's TLS
environment becomes kafka-python-style Admin options; SCRAM reads the password from a
file and never shows it in repr; bad values stop the operator naming the variable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from headwater_operator.config import OperatorConfig
from headwater_operator.security_config import ClientSecurity


def test_plaintext_by_default_adds_no_admin_options() -> None:
    config = OperatorConfig.from_env({})
    assert config.security == ClientSecurity()
    assert config.admin_options() == {"request_timeout_ms": 30000}


def test_chart_tls_environment() -> None:
    env = {
        "HEADWATER_SECURITY_PROTOCOL": "ssl",
        "HEADWATER_SSL_CAFILE": "/etc/headwater/tls/ca.crt",
        "HEADWATER_SSL_CERTFILE": "/etc/headwater/tls/tls.crt",
        "HEADWATER_SSL_KEYFILE": "/etc/headwater/tls/tls.key",
        "HEADWATER_SUPER_USERS": "User:hw-headwater-broker; User:hw-headwater-operator",
        "HEADWATER_CLIENTS_CA_DIR": "/etc/headwater/clients-ca",
        "HEADWATER_USER_CERT_VALIDITY_DAYS": "30",
    }
    config = OperatorConfig.from_env(env)
    assert config.admin_options() == {
        "request_timeout_ms": 30000,
        "security_protocol": "SSL",
        "ssl_cafile": "/etc/headwater/tls/ca.crt",
        "ssl_certfile": "/etc/headwater/tls/tls.crt",
        "ssl_keyfile": "/etc/headwater/tls/tls.key",
    }
    assert config.security.super_users == ("User:hw-headwater-broker", "User:hw-headwater-operator")
    assert config.security.clients_ca_dir == "/etc/headwater/clients-ca"
    assert config.security.user_cert_validity_days == 30


def test_scram_password_from_a_file_is_never_shown(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    security = ClientSecurity.from_env(
        {
            "HEADWATER_SECURITY_PROTOCOL": "SASL_SSL",
            "HEADWATER_SASL_MECHANISM": "scram-sha-512",
            "HEADWATER_SASL_USERNAME": "operator",
            "HEADWATER_SASL_PASSWORD_FILE": str(secret),
        }
    )
    assert security.admin_options() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "operator",
        "sasl_plain_password": "s3cret",
    }
    assert "s3cret" not in repr(security)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"HEADWATER_SECURITY_PROTOCOL": "TLS"}, "HEADWATER_SECURITY_PROTOCOL"),
        ({"HEADWATER_SSL_CERTFILE": "/a"}, "HEADWATER_SSL_KEYFILE"),
        ({"HEADWATER_USER_CERT_VALIDITY_DAYS": "0"}, "HEADWATER_USER_CERT_VALIDITY_DAYS"),
        ({"HEADWATER_USER_CERT_VALIDITY_DAYS": "a year"}, "HEADWATER_USER_CERT_VALIDITY_DAYS"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ClientSecurity.from_env(env)
