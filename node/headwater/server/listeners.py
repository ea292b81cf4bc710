"""Named listeners, as Kafka's: ``listeners=INTERNAL://:9091,CLIENT://:9092``.

A broker serves one gRPC port per listener.  Each listener has a name and, through
``listener.security.protocol.map``, a security protocol: PLAINTEXT, SSL (TLS, with
client certificates when ``ssl.client.auth=required``), SASL_PLAINTEXT or SASL_SSL.
``advertised.listeners`` says what clients are told (by listener name); the brokers
reach each other on ``inter.broker.listener.name`` (or the listener named after
``security.inter.broker.protocol``), and the controller reaches brokers on
``control.plane.listener.name`` when it is set, else on the inter-broker listener.
When that listener is SASL_SSL or SASL_PLAINTEXT, each broker logs in to the others
with ``sasl.mechanism.inter.broker.protocol`` (SCRAM-SHA-512 by default) and its own
credentials in ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (Kafka's
ScramLoginModule form, parsed strictly by :mod:`headwater.security.jaas`).

SSL settings are Kafka's ``ssl.*`` names, each overridable per listener as
``listener.name.<lower-case name>.ssl.*``; ``sasl.enabled.mechanisms`` likewise.

Pure: :func:`listener_layout` turns property strings into a :class:`ListenerLayout` or
raises :class:`ListenerConfigError` naming the key; nothing here reads a file (the PEM
material is loaded by :mod:`headwater.server.tls`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from typing import NamedTuple

from headwater.security.jaas import SCRAM_LOGIN_MODULE, JaasConfigError, parse_scram_login
from headwater.security.ssl_principal import PrincipalMapper, parse_rules


class ListenerConfigError(ValueError):
    """A listener setting the user can fix; the message names the key."""


class SecurityProtocol(enum.Enum):
    """Kafka's security protocols."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
CLIENT_AUTH = ("required", "requested", "none")
SASL_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_INTER_BROKER_MECHANISM = "SCRAM-SHA-512"

SSL_KEYS = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
)
"""The ``ssl.*`` settings a listener reads (each also as ``listener.name.<name>.ssl.*``)."""

LISTENER_KEYS = (*SSL_KEYS, "sasl.enabled.mechanisms")

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ENDPOINT = re.compile(rf"({_NAME})://(\[[^\]]*\]|[^:/\[\]]*):(\d+)")
_PER_LISTENER = re.compile(rf"listener\.name\.({_NAME})\.(.+)")
_JAAS = re.compile(r"[a-z0-9-]+\.sasl\.jaas\.config")


def check_per_listener_key(key: str) -> None:
    """``listener.name.<name>.<setting>``: refuse settings a listener does not read."""
    match = _PER_LISTENER.fullmatch(key)
    if match is None:
        raise ListenerConfigError(f"{key}: expected listener.name.<listener>.<setting>")
    setting = match.group(2)
    if setting not in LISTENER_KEYS and not _JAAS.fullmatch(setting):
        raise ListenerConfigError(
            f"unknown broker config {key!r}: a listener reads {', '.join(LISTENER_KEYS)} "
            "and <mechanism>.sasl.jaas.config"
        )
    if match.group(1) != match.group(1).lower():
        raise ListenerConfigError(f"{key}: the listener name is written in lower case here")


class BrokerSaslLogin(NamedTuple):
    """The broker's own SCRAM login towards other brokers (``sasl.mechanism.inter.broker.
    protocol`` and ``listener.name.<listener>.<mechanism>.sasl.jaas.config``); ``repr``
    hides the password."""

    mechanism: str
    username: str
    password: str

    def __repr__(self) -> str:
        return f"BrokerSaslLogin({self.mechanism!r}, {self.username!r}, password=<hidden>)"


class EndPoint(NamedTuple):
    """``NAME://host:port``; an empty host means all interfaces."""

    listener: str
    protocol: SecurityProtocol
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """``host:port`` to connect to (an empty host is this machine)."""
        return f"{self.host or '127.0.0.1'}:{self.port}"


def parse_protocol_map(text: str) -> dict[str, SecurityProtocol]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...``."""
    out: dict[str, SecurityProtocol] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not re.fullmatch(_NAME, name):
            raise ListenerConfigError(
                f"listener.security.protocol.map: {item!r} is not LISTENER_NAME:PROTOCOL"
            )
        try:
            protocol = SecurityProtocol(proto)
        except ValueError:
            raise ListenerConfigError(
                f"listener.security.protocol.map: unknown security protocol {proto!r} for "
                f"{name} (expected one of {', '.join(p.value for p in SecurityProtocol)})"
            ) from None
        if name in out:
            raise ListenerConfigError(f"listener.security.protocol.map: {name} is mapped twice")
        out[name] = protocol
    return out


def parse_endpoints(
    text: str, *, key: str, protocol_map: Mapping[str, SecurityProtocol]
) -> tuple[EndPoint, ...]:
    """``NAME://host:port,...``; names unique, each in the map, ports valid."""
    out: list[EndPoint] = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.fullmatch(item)
        if match is None:
            raise ListenerConfigError(f"{key}: {item!r} is not LISTENER_NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ListenerConfigError(
                f"{key}: listener {name} is not in listener.security.protocol.map "
                f"({', '.join(protocol_map) or 'empty'})"
            )
        if not 0 <= port < 65536:
            raise ListenerConfigError(f"{key}: port {port} of {name} is out of range")
        if any(e.listener == name for e in out):
            raise ListenerConfigError(f"{key}: listener name {name} appears twice")
        out.append(EndPoint(name, protocol, host, port))
    if not out:
        raise ListenerConfigError(f"{key}: no listener given")
    return tuple(out)


@dataclasses.dataclass(frozen=True)
class SslConfig:
    """One listener's TLS material, as Kafka's PEM keystore and truststore settings.

    Invariants: a keystore is given either as a file (``keystore_location``, PEM with the
    private key and the certificate chain) or inline (``keystore_certificate_chain`` and
    ``keystore_key``), never both; ``client_auth`` is one of :data:`CLIENT_AUTH`.
    """

    keystore_location: str = ""
    keystore_certificate_chain: str = dataclasses.field(default="", repr=False)
    keystore_key: str = dataclasses.field(default="", repr=False)
    truststore_location: str = ""
    truststore_certificates: str = dataclasses.field(default="", repr=False)
    client_auth: str = "none"
    principal_mapper: PrincipalMapper = dataclasses.field(
        default_factory=lambda: parse_rules("DEFAULT")
    )

    @property
    def has_keystore(self) -> bool:
        return bool(self.keystore_location or self.keystore_certificate_chain)

    @property
    def has_truststore(self) -> bool:
        return bool(self.truststore_location or self.truststore_certificates)

    @classmethod
    def from_settings(cls, get: _Getter) -> SslConfig:
        """Build from a lookup of ``ssl.*`` names (per-listener first); checks the values."""
        for type_key in ("ssl.keystore.type", "ssl.truststore.type"):
            kind = get(type_key)[1].strip().upper() or "PEM"
            if kind != "PEM":
                raise ListenerConfigError(
                    f"{get(type_key)[0]}: only PEM keystores and truststores are supported, "
                    f"not {kind}"
                )
        for secret in ("ssl.key.password", "ssl.keystore.password", "ssl.truststore.password"):
            where, value = get(secret)
            if value:
                raise ListenerConfigError(
                    f"{where}: encrypted PEM keys and password-protected stores are not "
                    "supported (gRPC loads unencrypted PEM keys); protect the key file by "
                    "its permissions instead"
                )
        location, chain, key = (
            get("ssl.keystore.location"),
            get("ssl.keystore.certificate.chain"),
            get("ssl.keystore.key"),
        )
        if location[1] and (chain[1] or key[1]):
            raise ListenerConfigError(
                f"{location[0]}: give the keystore either as a file or inline "
                "(ssl.keystore.certificate.chain and ssl.keystore.key), not both"
            )
        if bool(chain[1]) != bool(key[1]):
            raise ListenerConfigError(
                f"{chain[0] if not chain[1] else key[0]}: an inline keystore needs both "
                "ssl.keystore.certificate.chain and ssl.keystore.key"
            )
        trust_location, trust_inline = (
            get("ssl.truststore.location"),
            get("ssl.truststore.certificates"),
        )
        if trust_location[1] and trust_inline[1]:
            raise ListenerConfigError(
                f"{trust_location[0]}: give the truststore either as a file or inline "
                "(ssl.truststore.certificates), not both"
            )
        where, auth = get("ssl.client.auth")
        auth = auth.strip().lower() or "none"
        if auth not in CLIENT_AUTH:
            raise ListenerConfigError(f"{where}: must be one of {', '.join(CLIENT_AUTH)}")
        if auth == "requested":
            raise ListenerConfigError(
                f"{where}: 'requested' is not supported: gRPC can require a client "
                "certificate or not ask for one; use required or none"
            )
        where, rules = get("ssl.principal.mapping.rules")
        try:
            mapper = parse_rules(rules or "DEFAULT")
        except ValueError as exc:
            raise ListenerConfigError(f"{where}: {exc}") from None
        return cls(
            keystore_location=location[1].strip(),
            keystore_certificate_chain=chain[1],
            keystore_key=key[1],
            truststore_location=trust_location[1].strip(),
            truststore_certificates=trust_inline[1],
            client_auth=auth,
            principal_mapper=mapper,
        )


class _Getter:
    """Looks ``ssl.*`` up as ``listener.name.<name>.<key>`` first, then broker-wide.

    Returns ``(the key that was used, its value)``, so errors name what the user wrote.
    """

    def __init__(self, listener: str, settings: Mapping[str, str]) -> None:
        self._prefix = f"listener.name.{listener.lower()}."
        self._settings = settings

    def __call__(self, key: str) -> tuple[str, str]:
        own = self._prefix + key
        if own in self._settings:
            return own, self._settings[own]
        return key, self._settings.get(key, "")


@dataclasses.dataclass(frozen=True)
class ListenerConfig:
    """One listener: where it binds, what it advertises, how it authenticates."""

    endpoint: EndPoint
    advertised: EndPoint
    ssl: SslConfig | None
    sasl_mechanisms: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.endpoint.listener

    @property
    def protocol(self) -> SecurityProtocol:
        return self.endpoint.protocol


@dataclasses.dataclass(frozen=True)
class ListenerLayout:
    """Every listener of a broker and which of them the brokers use among themselves.

    Invariants: listener names and (non-zero) ports are unique; ``inter_broker`` and
    ``control_plane`` name listeners of ``listeners``; TLS listeners have a keystore;
    ``inter_broker_sasl`` (``control_plane_sasl``) is set exactly when that listener is
    SASL_*, with a mechanism the listener enables.
    """

    listeners: tuple[ListenerConfig, ...]
    inter_broker: str
    control_plane: str = ""
    inter_broker_sasl: BrokerSaslLogin | None = None
    """This broker's login on the inter-broker listener when it is SASL_*."""
    control_plane_sasl: BrokerSaslLogin | None = None
    """Its login on the control plane listener (the inter-broker one by default)."""

    def get(self, name: str) -> ListenerConfig:
        for listener in self.listeners:
            if listener.name == name:
                return listener
        raise KeyError(name)

    @property
    def inter_broker_listener(self) -> ListenerConfig:
        return self.get(self.inter_broker)

    @property
    def control_plane_listener(self) -> ListenerConfig:
        """Where the controller reaches brokers (the inter-broker listener by default)."""
        return self.get(self.control_plane or self.inter_broker)

    @property
    def advertised(self) -> tuple[EndPoint, ...]:
        return tuple(listener.advertised for listener in self.listeners)

    @property
    def protocol_map(self) -> dict[str, SecurityProtocol]:
        return {listener.name: listener.protocol for listener in self.listeners}


def listener_security(
    endpoint: EndPoint, settings: Mapping[str, str], *, key: str = "listeners"
) -> tuple[SslConfig | None, tuple[str, ...]]:
    """A listener's TLS material (SSL, SASL_SSL) and SASL mechanisms (SASL_*), checked;
    ``ssl.*`` and ``sasl.enabled.mechanisms`` are read as ``listener.name.<name>.<key>``
    first, then broker-wide.  The gRPC and the Kafka-protocol listeners both use it."""
    get = _Getter(endpoint.listener, settings)
    ssl = SslConfig.from_settings(get) if endpoint.protocol.uses_tls else None
    if ssl is not None and not ssl.has_keystore:
        raise ListenerConfigError(
            f"{key}: {endpoint.protocol.value} listener {endpoint.listener} needs a "
            "keystore: "
            f"set ssl.keystore.location (or listener.name.{endpoint.listener.lower()}"
            ".ssl.keystore.location), or ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    if ssl is not None and ssl.client_auth == "required" and not ssl.has_truststore:
        raise ListenerConfigError(
            f"{key}: {endpoint.listener} has ssl.client.auth=required, which needs a "
            "truststore "
            "(ssl.truststore.location or ssl.truststore.certificates)"
        )
    mechanisms: tuple[str, ...] = ()
    if endpoint.protocol.uses_sasl:
        where, raw = get("sasl.enabled.mechanisms")
        mechanisms = tuple(m.strip().upper() for m in raw.split(",") if m.strip())
        bad = [m for m in mechanisms if m not in SASL_MECHANISMS]
        if bad or not mechanisms:
            raise ListenerConfigError(
                f"{where}: listener {endpoint.listener} supports "
                f"{', '.join(SASL_MECHANISMS)}; got {', '.join(bad) or 'none'}"
            )
    return ssl, mechanisms


def listener_layout(
    *,
    listeners: str,
    advertised_listeners: str,
    protocol_map: str,
    inter_broker_listener_name: str,
    security_inter_broker_protocol: str,
    control_plane_listener_name: str,
    settings: Mapping[str, str],
) -> ListenerLayout:
    """Check and combine the listener settings (``settings``: ``ssl.*``, ``sasl.*`` and
    ``listener.name.*`` by their Kafka names)."""
    mapping = parse_protocol_map(protocol_map)
    bound = parse_endpoints(listeners, key="listeners", protocol_map=mapping)
    ports = [e.port for e in bound if e.port]
    if len(set(ports)) != len(ports):
        raise ListenerConfigError("listeners: each listener needs its own port")
    advertised: dict[str, EndPoint] = {}
    if advertised_listeners.strip():
        for e in parse_endpoints(
            advertised_listeners, key="advertised.listeners", protocol_map=mapping
        ):
            if not any(b.listener == e.listener for b in bound):
                raise ListenerConfigError(
                    f"advertised.listeners: {e.listener} is not one of the listeners "
                    f"({', '.join(b.listener for b in bound)})"
                )
            advertised[e.listener] = e
    configs = []
    for endpoint in bound:
        ssl, mechanisms = listener_security(endpoint, settings)
        shown = advertised.get(endpoint.listener) or endpoint._replace(
            host=endpoint.host or "127.0.0.1"
        )
        configs.append(ListenerConfig(endpoint, shown, ssl, mechanisms))
    inter_broker = _inter_broker_name(
        inter_broker_listener_name, security_inter_broker_protocol, bound
    )
    control_plane = control_plane_listener_name.strip().upper()
    if control_plane:
        if not any(b.listener == control_plane for b in bound):
            raise ListenerConfigError(
                f"control.plane.listener.name: {control_plane} is not one of the listeners"
            )
        if control_plane == inter_broker:
            raise ListenerConfigError(
                "control.plane.listener.name: must differ from inter.broker.listener.name"
            )
    layout = ListenerLayout(tuple(configs), inter_broker, control_plane)
    mechanism = _inter_broker_mechanism(settings)
    return dataclasses.replace(
        layout,
        inter_broker_sasl=_broker_login(
            layout.inter_broker_listener, mechanism=mechanism, settings=settings
        ),
        control_plane_sasl=_broker_login(
            layout.control_plane_listener, mechanism=mechanism, settings=settings
        ),
    )


def _inter_broker_mechanism(settings: Mapping[str, str]) -> str:
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = settings.get(key, "").strip().upper() or DEFAULT_INTER_BROKER_MECHANISM
    if mechanism not in SASL_MECHANISMS:
        raise ListenerConfigError(
            f"{key}: {mechanism} is not supported ({', '.join(SASL_MECHANISMS)})"
        )
    return mechanism


def _broker_login(
    listener: ListenerConfig, *, mechanism: str, settings: Mapping[str, str]
) -> BrokerSaslLogin | None:
    """The broker's own SCRAM login on a SASL listener it reaches other brokers on."""
    if not listener.protocol.uses_sasl:
        return None
    if mechanism not in listener.sasl_mechanisms:
        raise ListenerConfigError(
            f"sasl.mechanism.inter.broker.protocol: {mechanism} is not enabled on listener "
            f"{listener.name} (its sasl.enabled.mechanisms: {', '.join(listener.sasl_mechanisms)})"
        )
    key = f"listener.name.{listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = settings.get(key, "")
    if not text.strip():
        raise ListenerConfigError(
            f"{key} is missing: brokers reach each other on the {listener.protocol.value} "
            f"listener {listener.name}, so each broker needs its own login "
            f'({SCRAM_LOGIN_MODULE} required username="..." password="...";)'
        )
    try:
        login = parse_scram_login(text, key=key)
    except JaasConfigError as exc:
        raise ListenerConfigError(str(exc)) from None
    return BrokerSaslLogin(mechanism, login.username, login.password)


def _inter_broker_name(name: str, protocol: str, bound: tuple[EndPoint, ...]) -> str:
    name, protocol = name.strip().upper(), protocol.strip().upper()
    if name and protocol:
        raise ListenerConfigError(
            "inter.broker.listener.name and security.inter.broker.protocol cannot both be set"
        )
    if name:
        if not any(b.listener == name for b in bound):
            raise ListenerConfigError(
                f"inter.broker.listener.name: {name} is not one of the listeners "
                f"({', '.join(b.listener for b in bound)})"
            )
        return name
    wanted = protocol or "PLAINTEXT"
    try:
        SecurityProtocol(wanted)
    except ValueError:
        raise ListenerConfigError(
            f"security.inter.broker.protocol: unknown security protocol {wanted!r}"
        ) from None
    if not any(b.listener == wanted for b in bound):
        raise ListenerConfigError(
            f"no listener is named {wanted} for the brokers to reach each other: set "
            f"inter.broker.listener.name to one of {', '.join(b.listener for b in bound)}"
        )
    return wanted
