"""The Kafka-protocol listeners' settings: ``kafka.listeners`` and ``kafka.advertised.listeners``.

Written as Kafka writes ``listeners`` (``NAME://host:port,...``), with each name's
security protocol from the same ``listener.security.protocol.map`` the gRPC listeners
use, e.g.::

    listeners=PLAINTEXT://:9091
    kafka.listeners=KAFKA://:9092
    kafka.advertised.listeners=KAFKA://broker-0.example:9092
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT

A separate key, not entries of ``listeners``: every ``listeners`` entry of a Headwater
broker is a gRPC server (its clients, the operator and the other brokers use them), and
a broker's registration names each endpoint once, so a Kafka listener needs a name of
its own.  Each protocol is Kafka's: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL, with the
TLS material and SASL mechanisms read as the gRPC listeners read theirs
(``listener.name.<name>.ssl.*`` / ``listener.name.<name>.sasl.enabled.mechanisms`` first,
then the broker-wide ``ssl.*`` / ``sasl.enabled.mechanisms``), e.g.::

    kafka.listeners=KAFKA://:9093
    listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:SASL_SSL
    listener.name.kafka.sasl.enabled.mechanisms=SCRAM-SHA-512

Pure: strings in, :class:`KafkaListenerConfig` out, or
:class:`~headwater.server.listeners.ListenerConfigError` naming the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from headwater.server.listeners import (
    EndPoint,
    ListenerConfigError,
    SslConfig,
    listener_security,
    parse_endpoints,
    parse_protocol_map,
)


@dataclasses.dataclass(frozen=True)
class KafkaListenerConfig:
    """One Kafka-protocol listener: where it binds and what Metadata advertises."""

    endpoint: EndPoint
    advertised: EndPoint
    ssl: SslConfig | None = None
    """TLS material (SSL and SASL_SSL)."""
    sasl_mechanisms: tuple[str, ...] = ()
    """The mechanisms a SaslHandshake may name (SASL_PLAINTEXT and SASL_SSL)."""

    @property
    def name(self) -> str:
        return self.endpoint.listener

    @property
    def uses_sasl(self) -> bool:
        return self.endpoint.protocol.uses_sasl


def kafka_listeners(
    *,
    listeners: str,
    advertised_listeners: str,
    protocol_map: str,
    grpc_listeners: Collection[EndPoint],
    settings: Mapping[str, str] | None = None,
) -> tuple[KafkaListenerConfig, ...]:
    """Check ``kafka.listeners`` (empty: no Kafka listener) against the gRPC listeners
    (``settings``: ``ssl.*``, ``sasl.*`` and ``listener.name.*`` by their Kafka names)."""
    if not listeners.strip():
        if advertised_listeners.strip():
            raise ListenerConfigError(
                "kafka.advertised.listeners is set but kafka.listeners is not"
            )
        return ()
    mapping = parse_protocol_map(protocol_map)
    bound = parse_endpoints(listeners, key="kafka.listeners", protocol_map=mapping)
    grpc_names = {e.listener for e in grpc_listeners}
    used_ports = {e.port for e in grpc_listeners if e.port}
    for e in bound:
        if e.listener in grpc_names:
            raise ListenerConfigError(
                f"kafka.listeners: {e.listener} is already a gRPC listener in listeners; "
                f"give the Kafka listener a name of its own (e.g. KAFKA://{e.host}:{e.port} "
                "with KAFKA:PLAINTEXT in listener.security.protocol.map)"
            )
        if e.port and e.port in used_ports:
            raise ListenerConfigError(f"kafka.listeners: port {e.port} of {e.listener} is taken")
        if e.port:
            used_ports.add(e.port)
    advertised: dict[str, EndPoint] = {}
    if advertised_listeners.strip():
        for e in parse_endpoints(
            advertised_listeners, key="kafka.advertised.listeners", protocol_map=mapping
        ):
            if not any(b.listener == e.listener for b in bound):
                raise ListenerConfigError(
                    f"kafka.advertised.listeners: {e.listener} is not one of kafka.listeners "
                    f"({', '.join(b.listener for b in bound)})"
                )
            advertised[e.listener] = e
    configs = []
    for e in bound:
        ssl, mechanisms = listener_security(e, settings or {}, key="kafka.listeners")
        configs.append(
            KafkaListenerConfig(
                endpoint=e,
                advertised=advertised.get(e.listener) or e._replace(host=e.host or "127.0.0.1"),
                ssl=ssl,
                sasl_mechanisms=mechanisms,
            )
        )
    return tuple(configs)
