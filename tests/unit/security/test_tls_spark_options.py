"""The Spark connector's kafka.security.protocol, kafka.ssl.* and kafka.sasl.* options
reach the client of the driver, the executors and the writer; bad ones are refused
naming the option and never the password."""

from __future__ import annotations

import pickle

import pytest
from headwater_spark.options import OptionError, parse_read_options, parse_write_options
from headwater_spark.source import _reader_settings

BASE = {"bootstrap.servers": "h:9093", "subscribe": "orders"}
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="spark" password="pw-77";'
)


def test_read_options_carry_the_security_to_the_executors() -> None:
    opts = parse_read_options(
        {
            **BASE,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.ssl.truststore.location": "/etc/ca.pem",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": JAAS,
        },
        streaming=False,
    )
    s = opts.security
    assert (s.security_protocol, s.ssl_cafile, s.sasl_plain_username) == (
        "SASL_SSL",
        "/etc/ca.pem",
        "spark",
    )
    settings = pickle.loads(pickle.dumps(_reader_settings(opts)))
    assert settings.security == s
    assert "pw-77" not in repr(opts)


def test_write_options_pass_the_security_to_the_producer() -> None:
    opts = parse_write_options(
        {
            "bootstrap.servers": "h:9093",
            "KAFKA.SECURITY.PROTOCOL": "SSL",
            "kafka.ssl.keystore.location": "/etc/me.pem",
        }
    )
    security = opts.producer["security"]
    assert security.security_protocol == "SSL" and security.ssl_keyfile == "/etc/me.pem"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"kafka.ssl.keystore.type": "JKS"}, "kafka.ssl.keystore.type"),
        ({"kafka.ssl.keystore.password": "pw-77"}, "kafka.ssl.keystore.password"),
        (
            {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512"},
            "kafka.sasl.jaas.config",
        ),
        (
            {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.jaas.config": JAAS},
            "kafka.sasl.mechanism",
        ),
    ],
)
def test_bad_security_options_name_the_option(extra: dict[str, str], named: str) -> None:
    with pytest.raises(OptionError, match=named) as refused:
        parse_read_options({**BASE, **extra}, streaming=True)
    assert "pw-77" not in str(refused.value)
