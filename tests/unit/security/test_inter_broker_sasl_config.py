"""SASL between brokers: ``sasl.mechanism.inter.broker.protocol`` and the broker's own
login in ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (Kafka's form).

Covers the strict JAAS parser (every malformed text refused with a message naming the
key and never the password), the layout's broker logins for the inter-broker and
control plane listeners, and each startup refusal as a one-line ConfigError.
"""

from __future__ import annotations

import pytest
from headwater.security.jaas import JaasConfigError, ScramLogin, parse_scram_login
from headwater.server.config import BrokerConfig, ConfigError, config_from_properties, is_secret
from headwater.server.listeners import BrokerSaslLogin

MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = "Br0ker-s3cret"
JAAS = f'{MODULE} required username="broker" password="{SECRET}";'
KEY = "listener.name.internal.scram-sha-512.sasl.jaas.config"
SASL_INTERNAL = {
    "listeners": "CLIENT://:9092,INTERNAL://:9093",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def config(**props: str) -> BrokerConfig:
    return config_from_properties({"broker.id": "0", **props})


def test_kafka_form_parses_with_quotes_escapes_and_bare_words() -> None:
    assert parse_scram_login(JAAS) == ScramLogin("broker", SECRET)
    text = f'  {MODULE}   required\n  username=broker\n  password="a \\"q\\" b;c" ;  '
    assert parse_scram_login(text) == ScramLogin("broker", 'a "q" b;c')
    for flag in ("requisite", "sufficient", "optional"):
        assert parse_scram_login(JAAS.replace("required", flag)).username == "broker"


def test_login_repr_hides_the_password() -> None:
    login = parse_scram_login(JAAS)
    assert SECRET not in repr(login)
    assert SECRET not in repr(BrokerSaslLogin("SCRAM-SHA-512", "broker", SECRET))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected org.apache"),
        (f'{MODULE} username="b" password="{SECRET}";', "is not a JAAS control flag"),
        (f'com.example.Other required username="b" password="{SECRET}";', "not supported"),
        (f'{MODULE} required username="b" password="{SECRET}"', "must end with ';'"),
        (f'{MODULE} required username="b" password="{SECRET}";;', "one login module only"),
        (f'{MODULE} required username="b" password="{SECRET}"; {MODULE} required;', "one login"),
        (f'{MODULE} required username="b" password=;', "option password has no value"),
        (f'{MODULE} required username="b" password="{SECRET};', "unterminated quoted value"),
        (f'{MODULE} required username="b";', "password missing or empty"),
        (f'{MODULE} required password="{SECRET}";', "username missing or empty"),
        (f'{MODULE} required username="" password="{SECRET}";', "username missing or empty"),
        (f'{MODULE} required username="b" username="c" password="{SECRET}";', "given twice"),
        (f'{MODULE} required user="b" password="{SECRET}";', "unknown option 'user'"),
        (f'{MODULE} required username "b" password="{SECRET}";', 'expected option="value"'),
    ],
)
def test_malformed_jaas_is_refused_without_the_password(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message) as refused:
        parse_scram_login(text, key=KEY)
    assert str(refused.value).startswith(KEY + ":")
    assert SECRET not in str(refused.value)


def test_sasl_inter_broker_listener_with_a_login() -> None:
    layout = config(**SASL_INTERNAL, **{KEY: JAAS}).listener_layout
    assert layout.inter_broker_sasl == BrokerSaslLogin("SCRAM-SHA-512", "broker", SECRET)
    assert layout.control_plane_sasl == layout.inter_broker_sasl  # same listener


def test_scram_sha_256_between_brokers() -> None:
    layout = config(
        **SASL_INTERNAL,
        **{
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            "listener.name.internal.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.internal.scram-sha-256.sasl.jaas.config": JAAS,
        },
    ).listener_layout
    assert layout.inter_broker_sasl is not None
    assert layout.inter_broker_sasl.mechanism == "SCRAM-SHA-256"


def test_control_plane_has_its_own_login_and_ssl_inter_broker_has_none() -> None:
    layout = config(
        listeners="INTERNAL://:9093,CONTROL://:9094",
        **{
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROL",
            "listener.name.control.scram-sha-512.sasl.jaas.config": JAAS.replace(
                "broker", "controller"
            ),
        },
    ).listener_layout
    assert layout.inter_broker_sasl is None
    assert layout.control_plane_sasl is not None
    assert layout.control_plane_sasl.username == "controller"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, f"{KEY} is missing: brokers reach each other on the SASL_PLAINTEXT listener"),
        ({KEY: "  "}, f"{KEY} is missing"),
        ({KEY: JAAS[:-1]}, f"{KEY}: the login module's options must end with ';'"),
        (
            {"sasl.mechanism.inter.broker.protocol": "PLAIN", KEY: JAAS},
            "sasl.mechanism.inter.broker.protocol: PLAIN is not supported",
        ),
        (
            {"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256", KEY: JAAS},
            "SCRAM-SHA-256 is not enabled on listener INTERNAL",
        ),
        (
            # the login given for the wrong mechanism names the key that is missing
            {"listener.name.internal.scram-sha-256.sasl.jaas.config": JAAS},
            f"{KEY} is missing",
        ),
    ],
)
def test_startup_refusals_are_one_line_and_name_the_key(
    props: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        config(**SASL_INTERNAL, **props)
    text = str(refused.value)
    assert message in text
    assert "\n" not in text and SECRET not in text


def test_the_login_is_sensitive_in_describe_output() -> None:
    c = config(**SASL_INTERNAL, **{KEY: JAAS})
    assert is_secret(KEY)  # DescribeConfigs shows it as null
    assert SECRET not in repr(c.listener_layout)
