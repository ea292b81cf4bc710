"""``kafka.listeners`` and ``kafka.advertised.listeners`` (headwater.kafka.listeners)."""

from __future__ import annotations

import pytest
from headwater.coordination.model import BrokerRegistration
from headwater.kafka import protocol
from headwater.kafka.acl_apis import KafkaAclApis
from headwater.kafka.admin_apis import KafkaAdminApis
from headwater.kafka.apis import KafkaApis, kafka_address
from headwater.kafka.cluster_apis import KafkaClusterApis
from headwater.kafka.group_apis import KafkaGroupApis
from headwater.kafka.listeners import kafka_listeners
from headwater.kafka.quota_apis import KafkaQuotaApis
from headwater.kafka.server import KafkaServer, registration_endpoints
from headwater.kafka.txn_apis import KafkaTxnApis
from headwater.kafka.user_apis import KafkaUserApis
from headwater.server.config import BrokerConfig, ConfigError, validate_config
from headwater.server.listeners import EndPoint, ListenerConfigError, SecurityProtocol

MAP = "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT,KSSL:SSL,KSASL:SASL_SSL,KSP:SASL_PLAINTEXT"
GRPC = [EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 9091)]


def test_no_kafka_listener_by_default() -> None:
    assert BrokerConfig(broker_id=0).kafka_listener_configs == ()


def test_a_kafka_listener_binds_and_advertises() -> None:
    (only,) = kafka_listeners(
        listeners="KAFKA://:9092",
        advertised_listeners="KAFKA://b0.example:19092",
        protocol_map=MAP,
        grpc_listeners=GRPC,
    )
    assert (only.name, only.endpoint.host, only.endpoint.port) == ("KAFKA", "", 9092)
    assert str(only.advertised) == "KAFKA://b0.example:19092"


def test_the_advertised_address_defaults_to_the_bound_one() -> None:
    (only,) = kafka_listeners(
        listeners="KAFKA://:9092", advertised_listeners="", protocol_map=MAP, grpc_listeners=GRPC
    )
    assert str(only.advertised) == "KAFKA://127.0.0.1:9092"


@pytest.mark.parametrize(
    ("listeners", "advertised", "message"),
    [
        ("PLAINTEXT://:9093", "", "PLAINTEXT is already a gRPC listener"),
        ("KAFKA://:9091", "", "port 9091 of KAFKA is taken"),
        ("KSSL://:9093", "", "kafka.listeners: SSL listener KSSL needs a keystore"),
        ("KSP://:9093", "", "sasl.enabled.mechanisms: listener KSP supports"),
        ("OTHER://:9093", "", "listener OTHER is not in listener.security.protocol.map"),
        ("KAFKA://:9093", "OTHER://x:1", "kafka.advertised.listeners: listener OTHER"),
        ("", "KAFKA://x:1", "kafka.advertised.listeners is set but kafka.listeners is not"),
        ("KAFKA:9093", "", "kafka.listeners: 'KAFKA:9093' is not LISTENER_NAME://host:port"),
    ],
)
def test_bad_settings_name_the_key(listeners: str, advertised: str, message: str) -> None:
    with pytest.raises(ListenerConfigError, match=message):
        kafka_listeners(
            listeners=listeners,
            advertised_listeners=advertised,
            protocol_map=MAP,
            grpc_listeners=GRPC,
        )


def test_a_secured_kafka_listener_reads_the_ssl_and_sasl_settings_as_grpc_ones_do() -> None:
    (only,) = kafka_listeners(
        listeners="KSASL://:9093",
        advertised_listeners="",
        protocol_map=MAP,
        grpc_listeners=GRPC,
        settings={
            "ssl.keystore.location": "/etc/broker.pem",
            "listener.name.ksasl.ssl.keystore.location": "/etc/kafka-door.pem",
            "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            "listener.name.ksasl.sasl.enabled.mechanisms": "scram-sha-512",
        },
    )
    assert only.uses_sasl
    assert only.ssl is not None and only.ssl.keystore_location == "/etc/kafka-door.pem"
    assert only.sasl_mechanisms == ("SCRAM-SHA-512",)


def test_a_plaintext_kafka_listener_has_no_tls_and_no_sasl() -> None:
    (only,) = kafka_listeners(
        listeners="KAFKA://:9092", advertised_listeners="", protocol_map=MAP, grpc_listeners=GRPC
    )
    assert (only.ssl, only.sasl_mechanisms, only.uses_sasl) == (None, (), False)


def test_the_broker_config_refuses_a_bad_kafka_listener() -> None:
    config = BrokerConfig(broker_id=0, kafka_listeners="PLAINTEXT://:0")
    with pytest.raises(ConfigError, match="already a gRPC listener"):
        validate_config(config)
    with pytest.raises(ConfigError, match=r"socket\.request\.max\.bytes: must be > 0"):
        validate_config(BrokerConfig(broker_id=0, socket_request_max_bytes=0))


def test_every_supported_api_has_a_handler() -> None:
    apis = KafkaApis(
        listener="KAFKA",
        replicas=None,  # type: ignore[arg-type]
        metadata=None,  # type: ignore[arg-type]
        metrics=None,  # type: ignore[arg-type]
        authz=None,  # type: ignore[arg-type]
        next_producer_id=lambda: 0,
        groups=KafkaGroupApis(
            listener="KAFKA",
            groups=None,  # type: ignore[arg-type]
            metadata=None,  # type: ignore[arg-type]
            authz=None,  # type: ignore[arg-type]
            ensure_offsets_topic=lambda: None,
        ),
        admin=KafkaAdminApis(
            coordinator=lambda: None,
            metadata=None,  # type: ignore[arg-type]
            authz=None,  # type: ignore[arg-type]
            configs=None,  # type: ignore[arg-type]
        ),
        acls=KafkaAclApis(acls=None),  # type: ignore[arg-type]
        cluster=KafkaClusterApis(
            coordinator=lambda: None,
            log_manager=lambda: None,
            authz=None,  # type: ignore[arg-type]
        ),
        transactions=KafkaTxnApis(
            listener="KAFKA",
            runtime=None,  # type: ignore[arg-type]
            groups=None,  # type: ignore[arg-type]
            replicas=None,  # type: ignore[arg-type]
            metadata=None,  # type: ignore[arg-type]
            authz=None,  # type: ignore[arg-type]
            is_known_partition=lambda tp: False,
            offsets_partition=lambda group: None,  # type: ignore[arg-type,return-value]
            ensure_transaction_state=lambda: None,
        ),
        users=KafkaUserApis(store=lambda: None, authz=None),  # type: ignore[arg-type]
        quotas=KafkaQuotaApis(store=lambda: None, authz=None),  # type: ignore[arg-type]
    )
    assert apis.api_keys == frozenset(protocol.SUPPORTED)


def test_metadata_advertises_only_brokers_with_that_kafka_listener() -> None:
    classic = BrokerRegistration(broker_id=0, host="h0", port=9091)
    both = BrokerRegistration(
        broker_id=1,
        host="h1",
        port=9091,
        endpoints=("PLAINTEXT://h1:9091", "KAFKA://k1:9092"),
        security_protocol_map=(("KAFKA", "PLAINTEXT"), ("PLAINTEXT", "PLAINTEXT")),
    )
    assert kafka_address(classic, "KAFKA") is None  # its one endpoint is gRPC
    assert kafka_address(both, "KAFKA") == ("k1", 9092)
    assert kafka_address(both, "OTHER") is None


def test_the_registration_names_grpc_then_kafka_endpoints() -> None:
    (config,) = kafka_listeners(
        listeners="KAFKA://:0",
        advertised_listeners="KAFKA://k0.example:0",
        protocol_map=MAP,
        grpc_listeners=GRPC,
    )
    server = KafkaServer(config, apis=None, max_request_bytes=1)  # type: ignore[arg-type]
    server.port = 19092  # as bound
    endpoints, protocols = registration_endpoints(
        [EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "h0", 9091)], [server]
    )
    assert endpoints == ("PLAINTEXT://h0:9091", "KAFKA://k0.example:19092")
    assert protocols == (("KAFKA", "PLAINTEXT"), ("PLAINTEXT", "PLAINTEXT"))
