"""Named listeners in the broker config: Kafka's names and defaults, per-listener ssl.*
overrides, and a clear ConfigError naming the key for every bad combination."""

from __future__ import annotations

import pytest
from headwater.coordination import model
from headwater.coordination.model import BrokerRegistration
from headwater.server.config import (
    BrokerConfig,
    ConfigError,
    config_from_properties,
    is_secret,
    properties_from_env,
)
from headwater.server.listeners import SecurityProtocol


def config(**props: str) -> BrokerConfig:
    return config_from_properties({"broker.id": "0", **props})


TLS = {"ssl.keystore.location": "/etc/hw/broker.pem", "ssl.truststore.location": "/etc/hw/ca.pem"}


def test_classic_plaintext_listener_is_unchanged() -> None:
    c = config(listeners="PLAINTEXT://h:9092")
    layout = c.listener_layout
    assert [str(listener.endpoint) for listener in layout.listeners] == ["PLAINTEXT://h:9092"]
    assert layout.inter_broker == "PLAINTEXT" and layout.control_plane == ""
    assert c.listener.port == 9092 and c.advertised_listener.host == "h"
    assert c.listener_security_protocol_map == (
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
    )


def test_named_listeners_with_map_and_inter_broker_name() -> None:
    c = config(
        listeners="INTERNAL://:9091,CLIENT://0.0.0.0:9092,CONTROLLER://:9090",
        **{
            "advertised.listeners": "INTERNAL://b0.int:9091,CLIENT://b0.example.com:9092",
            "listener.security.protocol.map": "INTERNAL:SSL,CLIENT:SASL_SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "control.plane.listener.name": "CONTROLLER",
            "ssl.client.auth": "required",
            "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT",
            **TLS,
        },
    )
    layout = c.listener_layout
    assert [listener.name for listener in layout.listeners] == ["INTERNAL", "CLIENT", "CONTROLLER"]
    assert layout.inter_broker_listener.protocol is SecurityProtocol.SSL
    assert layout.control_plane_listener.name == "CONTROLLER"
    client = layout.get("CLIENT")
    assert client.protocol.uses_sasl and client.protocol.uses_tls
    assert client.sasl_mechanisms == ("SCRAM-SHA-512",)
    assert str(client.advertised) == "CLIENT://b0.example.com:9092"
    assert str(layout.get("CONTROLLER").advertised) == "CONTROLLER://127.0.0.1:9090"
    internal = layout.get("INTERNAL")
    assert internal.ssl is not None and internal.ssl.client_auth == "required"
    assert internal.ssl.principal_mapper.name_for("CN=broker-1,O=hw") == "broker-1"


def test_security_inter_broker_protocol_names_the_listener() -> None:
    c = config(
        listeners="SSL://:9093,PLAINTEXT://:9092",
        **{"security.inter.broker.protocol": "SSL", **TLS},
    )
    assert c.listener_layout.inter_broker == "SSL"


def test_per_listener_ssl_settings_override_the_broker_wide_ones() -> None:
    c = config(
        listeners="INTERNAL://:9091,CLIENT://:9092",
        **{
            "listener.security.protocol.map": "INTERNAL:SSL,CLIENT:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.location": "/etc/hw/default.pem",
            "listener.name.internal.ssl.keystore.location": "/etc/hw/internal.pem",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.internal.ssl.truststore.location": "/etc/hw/ca.pem",
        },
    )
    internal, client = c.listener_layout.get("INTERNAL").ssl, c.listener_layout.get("CLIENT").ssl
    assert internal is not None and client is not None
    assert internal.keystore_location == "/etc/hw/internal.pem"
    assert internal.client_auth == "required"
    assert client.keystore_location == "/etc/hw/default.pem" and client.client_auth == "none"
    # round trip through properties keeps the per-listener settings
    assert config_from_properties(c.to_properties()) == c


def test_inline_pem_keystore_and_truststore() -> None:
    c = config(
        listeners="SSL://:9093",
        **{
            "security.inter.broker.protocol": "SSL",
            "ssl.keystore.certificate.chain": "-----BEGIN CERTIFICATE-----\nx\n-----END",
            "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----\nsecret\n-----END",
            "ssl.truststore.certificates": "-----BEGIN CERTIFICATE-----\ny\n-----END",
        },
    )
    ssl = c.listener_layout.get("SSL").ssl
    assert ssl is not None and ssl.has_keystore and ssl.has_truststore
    assert "secret" not in repr(ssl)


def test_per_listener_settings_from_the_environment() -> None:
    props = properties_from_env({"HEADWATER_LISTENER_NAME_CLIENT_SSL_CLIENT_AUTH": "required"})
    assert props == {"listener.name.client.ssl.client.auth": "required"}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "FOO://:1"}, "listeners: listener FOO is not in listener.security"),
        (
            {"listeners": "A://:1", "listener.security.protocol.map": "A:TLS"},
            "unknown security protocol 'TLS'",
        ),
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "PLAINTEXT appears twice"),
        (
            {"listeners": "PLAINTEXT://:1,SSL://:1", **TLS},
            "each listener needs its own port",
        ),
        ({"listeners": "SSL://h:1", "security.inter.broker.protocol": "SSL"}, "needs a keystore"),
        ({"listeners": "PLAINTEXT://h:1", "advertised.listeners": "SSL://h:2"}, "not one of"),
        (
            {
                "listeners": "CLIENT://:1,INTERNAL://:2",
                "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
            },
            "inter.broker.listener.name",
        ),
        (
            {"listeners": "PLAINTEXT://:1", "inter.broker.listener.name": "NOPE"},
            "inter.broker.listener.name: NOPE is not one of the listeners",
        ),
        (
            {
                "listeners": "PLAINTEXT://:1",
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            },
            "cannot both be set",
        ),
        (
            {"listeners": "PLAINTEXT://:1", "control.plane.listener.name": "PLAINTEXT"},
            "must differ",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": "/k.pem",
                "ssl.client.auth": "required",
            },
            "needs a truststore",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": "/k.pem",
                "ssl.client.auth": "sometimes",
            },
            "ssl.client.auth: must be one of required, requested, none",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": "/k.pem",
                "ssl.client.auth": "requested",
            },
            "'requested' is not supported",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.type": "JKS",
                "ssl.keystore.location": "/k.jks",
            },
            "only PEM",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": "/k.pem",
                "ssl.key.password": "hunter2",
            },
            "ssl.key.password: encrypted PEM keys",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": "/k.pem",
                "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----",
            },
            "either as a file or inline",
        ),
        (
            {
                "listeners": "SSL://:1",
                "security.inter.broker.protocol": "SSL",
                "ssl.keystore.location": "/k.pem",
                "ssl.principal.mapping.rules": "RULE:oops",
            },
            "ssl.principal.mapping.rules",
        ),
        (
            {
                "listeners": "PLAINTEXT://:1,SASL_SSL://:2",
                "sasl.enabled.mechanisms": "PLAIN",
                **TLS,
            },
            "sasl.enabled.mechanisms: listener SASL_SSL supports",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://:1",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
            },
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config is missing",
        ),
        ({"listener.name.client.ssl.bogus": "x"}, "unknown broker config"),
        ({"listener.name.CLIENT.ssl.client.auth": "none"}, "lower case"),
    ],
)
def test_bad_listener_settings_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config(**props)


def test_secrets_are_marked_sensitive() -> None:
    for key in (
        "ssl.keystore.key",
        "ssl.key.password",
        "listener.name.client.ssl.keystore.key",
        "listener.name.client.scram-sha-512.sasl.jaas.config",
    ):
        assert is_secret(key), key
    assert not is_secret("ssl.keystore.location")


def test_registration_with_endpoints_round_trips_in_kafkas_json() -> None:
    reg = BrokerRegistration(
        1,
        "b1.int",
        9091,
        endpoints=("INTERNAL://b1.int:9091", "CLIENT://b1.example.com:9092"),
        security_protocol_map=(("CLIENT", "SASL_SSL"), ("INTERNAL", "SSL")),
    )
    data = model.encode_broker(reg)
    assert b'"endpoints":["INTERNAL://b1.int:9091","CLIENT://b1.example.com:9092"]' in data
    assert b'"listener_security_protocol_map":{"CLIENT":"SASL_SSL","INTERNAL":"SSL"}' in data
    back = model.decode_broker(1, data, epoch=7)
    assert back.endpoints == reg.endpoints and back.endpoint_for("CLIENT") == (
        "b1.example.com",
        9092,
    )
    assert back.endpoint_for("OTHER") is None
    classic = BrokerRegistration(2, "h", 1)
    assert classic.endpoint_for("ANY") == ("h", 1)
