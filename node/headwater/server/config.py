"""Broker configuration: Kafka's names, read from a properties file, env and flags.

Users bring their Kafka habits (DESIGN.md, "Configuration"), so every setting
has its Kafka ``server.properties`` name and meaning.  Sources, later winning:

1. a Java-properties file (``--config``);
2. ``HEADWATER_*`` environment variables: ``HEADWATER_BROKER_ID`` sets
   ``broker.id`` (upper-case, dots as underscores), as container images do.
   Two kinds of ``HEADWATER_*`` names are not broker settings and are passed
   over: those of the other commands (``HEADWATER_BOOTSTRAP`` of the clients,
   ``HEADWATER_OPERATOR_*``...; see :data:`NOT_BROKER_ENV`) and the variables
   Kubernetes injects for every Service of the namespace (a release named
   ``headwater`` has a Service ``headwater-bootstrap``, hence
   ``HEADWATER_BOOTSTRAP_SERVICE_HOST``; the chart also turns these off with
   ``enableServiceLinks: false``).  Any other unknown name is a typo and is
   refused, naming the variable;
3. ``--override key=value`` flags.

``${NAME}`` in any value is replaced by the environment variable ``NAME`` (the
Helm chart sets ``advertised.listeners=PLAINTEXT://${HOSTNAME}.<svc>:9092``).
Unknown keys, bad values and undefined variables raise one
:class:`ConfigError` naming the key, so a typo never silently falls back to
a default.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from headwater import runtime
from headwater.kafka.listeners import KafkaListenerConfig, kafka_listeners
from headwater.records import native
from headwater.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users
from headwater.server import listeners as named_listeners

ENV_PREFIX = "HEADWATER_"
NOT_BROKER_ENV = frozenset(
    {
        "HEADWATER_BOOTSTRAP",
        "HEADWATER_BROKER_STATEFULSET",
        "HEADWATER_RESYNC_INTERVAL_S",
        "HEADWATER_OPERATION_TIMEOUT_S",
        "HEADWATER_ROLL_CHECK_INTERVAL_S",
        runtime.KEEP_ENV,
        native.PURE_PYTHON_ENV,
    }
)
"""``HEADWATER_*`` variables of the clients, the operator and the process itself (the
switch interval, the record codec), never broker settings."""
_NOT_BROKER_PREFIXES = ("HEADWATER_OPERATOR_",)
# Kubernetes service links: <SVC>_SERVICE_HOST, <SVC>_SERVICE_PORT[_<NAME>], <SVC>_PORT,
# <SVC>_PORT_<N>_<PROTO>[_PROTO|_PORT|_ADDR].
_SERVICE_LINK = re.compile(
    r"[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?"
    r"|PORT(_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)?)"
)
DEFAULT_CHROOT = "/headwater"


class ConfigError(ValueError):
    """A configuration problem the user can fix; the message names the key."""


class Listener(NamedTuple):
    """``PLAINTEXT://host:port``; an empty host means all interfaces."""

    protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"


def _key(name: str, default: Any, doc: str, *, secret: bool = False) -> Any:
    """A config field under Kafka's ``name``; a ``secret`` one is left out of ``repr``."""
    return dataclasses.field(default=default, repr=not secret, metadata={"key": name, "doc": doc})


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    """One broker's static configuration (Kafka names in each field's ``key``)."""

    broker_id: int = _key("broker.id", -1, "This broker's id, unique in the cluster (>= 0).")
    listeners: str = _key(
        "listeners", "PLAINTEXT://127.0.0.1:9092", "Where the gRPC server listens."
    )
    advertised_listeners: str = _key(
        "advertised.listeners", "", "What clients are told to connect to; default: listeners."
    )
    listener_security_protocol_map: str = _key(
        "listener.security.protocol.map",
        named_listeners.DEFAULT_PROTOCOL_MAP,
        "Listener name to security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
    )
    inter_broker_listener_name: str = _key(
        "inter.broker.listener.name", "", "The listener brokers use to reach each other."
    )
    security_inter_broker_protocol: str = _key(
        "security.inter.broker.protocol",
        "",
        "Alternative to inter.broker.listener.name: the listener named after this protocol "
        "(default PLAINTEXT).",
    )
    control_plane_listener_name: str = _key(
        "control.plane.listener.name",
        "",
        "The listener the controller reaches brokers on (default: the inter-broker one).",
    )
    kafka_listeners: str = _key(
        "kafka.listeners",
        "",
        "Listeners speaking Kafka's wire protocol (NAME://host:port, names mapped in "
        "listener.security.protocol.map, PLAINTEXT only); empty: none.",
    )
    kafka_advertised_listeners: str = _key(
        "kafka.advertised.listeners",
        "",
        "What Kafka clients are told to connect to; default: kafka.listeners.",
    )
    socket_request_max_bytes: int = _key(
        "socket.request.max.bytes",
        104857600,
        "The largest request a Kafka listener accepts; a larger one closes the connection.",
    )
    ssl_keystore_type: str = _key("ssl.keystore.type", "PEM", "Keystore format (PEM only).")
    ssl_keystore_location: str = _key(
        "ssl.keystore.location", "", "PEM file with this broker's private key and cert chain."
    )
    ssl_keystore_certificate_chain: str = _key(
        "ssl.keystore.certificate.chain", "", "Inline PEM certificate chain (and ssl.keystore.key)."
    )
    ssl_keystore_key: str = _key(
        "ssl.keystore.key", "", "Inline PEM private key (sensitive).", secret=True
    )
    ssl_key_password: str = _key(
        "ssl.key.password",
        "",
        "Password of an encrypted key (not supported: leave unset).",
        secret=True,
    )
    ssl_keystore_password: str = _key(
        "ssl.keystore.password",
        "",
        "Keystore password (not supported for PEM: leave unset).",
        secret=True,
    )
    ssl_truststore_type: str = _key("ssl.truststore.type", "PEM", "Truststore format (PEM only).")
    ssl_truststore_location: str = _key(
        "ssl.truststore.location", "", "PEM file with the CA certificates trusted for peers."
    )
    ssl_truststore_certificates: str = _key(
        "ssl.truststore.certificates", "", "Inline PEM CA certificates trusted for peers."
    )
    ssl_truststore_password: str = _key(
        "ssl.truststore.password", "", "Truststore password (not supported for PEM).", secret=True
    )
    ssl_client_auth: str = _key(
        "ssl.client.auth", "none", "Client certificates on SSL listeners: required or none."
    )
    ssl_principal_mapping_rules: str = _key(
        "ssl.principal.mapping.rules",
        "DEFAULT",
        "Certificate subject to principal name: RULE:pattern/replacement/[LU],...,DEFAULT.",
    )
    sasl_enabled_mechanisms: str = _key(
        "sasl.enabled.mechanisms", "SCRAM-SHA-512", "SASL mechanisms of SASL_* listeners."
    )
    sasl_mechanism_inter_broker_protocol: str = _key(
        "sasl.mechanism.inter.broker.protocol",
        "SCRAM-SHA-512",
        "SASL mechanism brokers use towards each other on a SASL_* inter-broker (or control "
        "plane) listener; each broker's login is listener.name.<listener>.<mechanism "
        "lower-case>.sasl.jaas.config (ScramLoginModule, sensitive).",
    )
    connections_max_reauth_ms: int = _key(
        "connections.max.reauth.ms",
        0,
        "Lifetime of a SASL session (KIP-368): the client authenticates again after this; "
        "0: sessions last until the broker restarts or the credential is deleted.",
    )
    listener_name_settings: tuple[tuple[str, str], ...] = _key(
        "listener.name.*",
        (),
        "Per-listener settings: listener.name.<lower-case name>.ssl.*, "
        "listener.name.<name>.sasl.enabled.mechanisms and, for the broker's own login on a "
        "SASL inter-broker listener, listener.name.<name>.<mechanism>.sasl.jaas.config.",
        secret=True,
    )
    log_dirs: str = _key(
        "log.dirs", "/tmp/headwater-logs", "Comma-separated directories holding partition logs."
    )
    zookeeper_connect: str = _key(
        "zookeeper.connect",
        "127.0.0.1:2181",
        "ZooKeeper hosts, optionally with a chroot (default chroot /headwater).",
    )
    zookeeper_session_timeout_ms: int = _key(
        "zookeeper.session.timeout.ms", 18000, "ZooKeeper session timeout."
    )
    zookeeper_connection_timeout_ms: int = _key(
        "zookeeper.connection.timeout.ms", 18000, "How long startup waits for ZooKeeper."
    )
    leader_imbalance_check_interval_seconds: int = _key(
        "leader.imbalance.check.interval.seconds", 300, "How often the controller rebalances."
    )
    delete_topic_enable: bool = _key("delete.topic.enable", True, "Allow deleting topics.")
    num_partitions: int = _key("num.partitions", 1, "Partitions of a topic created without it.")
    default_replication_factor: int = _key(
        "default.replication.factor", 1, "Replication factor of a topic created without it."
    )
    min_insync_replicas: int = _key(
        "min.insync.replicas", 1, "Smallest ISR that may acknowledge an acks=all produce."
    )
    replica_lag_time_max_ms: int = _key(
        "replica.lag.time.max.ms", 30000, "A follower not caught up for this long leaves the ISR."
    )
    replica_fetch_max_bytes: int = _key(
        "replica.fetch.max.bytes", 1048576, "Bytes a follower asks for per partition."
    )
    replica_fetch_wait_max_ms: int = _key(
        "replica.fetch.wait.max.ms", 500, "Longest a follower fetch waits for data."
    )
    replica_fetch_backoff_ms: int = _key(
        "replica.fetch.backoff.ms", 1000, "Pause after a failed follower fetch."
    )
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable", False, "Elect an out-of-sync replica as last resort."
    )
    auto_create_topics_enable: bool = _key(
        "auto.create.topics.enable", False, "Create unknown topics on metadata requests."
    )
    message_max_bytes: int = _key(
        "message.max.bytes", 1048588, "Largest record batch accepted (topic: max.message.bytes)."
    )
    log_segment_bytes: int = _key("log.segment.bytes", 1 << 30, "Segment size before rolling.")
    log_retention_hours: int = _key("log.retention.hours", 168, "Time retention in hours.")
    log_retention_ms: int | None = _key(
        "log.retention.ms", None, "Time retention in ms; wins over log.retention.hours."
    )
    log_retention_bytes: int = _key(
        "log.retention.bytes", -1, "Size retention per partition (-1: unlimited)."
    )
    log_retention_check_interval_ms: int = _key(
        "log.retention.check.interval.ms", 300000, "How often retention runs."
    )
    inter_broker_protocol_version: str = _key(
        "inter.broker.protocol.version", "1", "Protocol version brokers speak to each other."
    )
    controlled_shutdown_enable: bool = _key(
        "controlled.shutdown.enable", True, "Move leaderships away before stopping."
    )
    controlled_shutdown_max_retries: int = _key(
        "controlled.shutdown.max.retries", 3, "Attempts at controlled shutdown."
    )
    controlled_shutdown_retry_backoff_ms: int = _key(
        "controlled.shutdown.retry.backoff.ms", 1000, "Pause between attempts."
    )
    controller_socket_timeout_ms: int = _key(
        "controller.socket.timeout.ms", 30000, "Timeout of controller-to-broker calls."
    )
    auto_leader_rebalance_enable: bool = _key(
        "auto.leader.rebalance.enable", True, "Move leadership back to preferred replicas."
    )
    broker_rack: str = _key("broker.rack", "", "Rack (zone) of this broker, for placement.")
    metrics_port: int = _key("metrics.port", 0, "Prometheus HTTP port (0: off).")
    grpc_max_message_bytes: int = _key(
        "grpc.max.message.bytes", 128 << 20, "Largest gRPC message sent or received."
    )
    offsets_topic_num_partitions: int = _key(
        "offsets.topic.num.partitions", 50, "Partitions of __consumer_offsets (fixed at creation)."
    )
    offsets_topic_replication_factor: int = _key(
        "offsets.topic.replication.factor",
        3,
        "Replication factor of __consumer_offsets (capped at the live broker count).",
    )
    offsets_retention_minutes: int = _key(
        "offsets.retention.minutes", 10080, "Committed offsets of an empty group expire after this."
    )
    offsets_commit_timeout_ms: int = _key(
        "offsets.commit.timeout.ms", 5000, "How long a commit waits for the offsets topic's ISR."
    )
    group_initial_rebalance_delay_ms: int = _key(
        "group.initial.rebalance.delay.ms",
        3000,
        "An empty group waits this long for more members before its first rebalance.",
    )
    group_min_session_timeout_ms: int = _key(
        "group.min.session.timeout.ms", 6000, "Shortest session.timeout.ms a consumer may use."
    )
    group_max_session_timeout_ms: int = _key(
        "group.max.session.timeout.ms", 1800000, "Longest session.timeout.ms a consumer may use."
    )
    group_max_size: int = _key("group.max.size", 2147483647, "Most members one group may have.")
    group_consumer_heartbeat_interval_ms: int = _key(
        "group.consumer.heartbeat.interval.ms",
        5000,
        "Heartbeat interval given to members of consumer-protocol (KIP-848) groups.",
    )
    group_consumer_session_timeout_ms: int = _key(
        "group.consumer.session.timeout.ms",
        45000,
        "A consumer-protocol member not heard from for this long is removed.",
    )
    group_consumer_min_session_timeout_ms: int = _key(
        "group.consumer.min.session.timeout.ms",
        45000,
        "Lowest allowed group.consumer.session.timeout.ms.",
    )
    group_consumer_max_session_timeout_ms: int = _key(
        "group.consumer.max.session.timeout.ms",
        60000,
        "Highest allowed group.consumer.session.timeout.ms.",
    )
    group_consumer_min_heartbeat_interval_ms: int = _key(
        "group.consumer.min.heartbeat.interval.ms",
        5000,
        "Lowest allowed group.consumer.heartbeat.interval.ms.",
    )
    group_consumer_max_heartbeat_interval_ms: int = _key(
        "group.consumer.max.heartbeat.interval.ms",
        15000,
        "Highest allowed group.consumer.heartbeat.interval.ms.",
    )
    group_consumer_assignors: str = _key(
        "group.consumer.assignors",
        "uniform,range",
        "Server-side assignors of consumer-protocol groups (uniform, range); the first is "
        "the default, members may name another (group.remote.assignor).",
    )
    group_consumer_max_size: int = _key(
        "group.consumer.max.size",
        2147483647,
        "Most members one consumer-protocol group may have.",
    )
    group_consumer_migration_policy: str = _key(
        "group.consumer.migration.policy",
        "bidirectional",
        "Whether a non-empty classic group converts to a consumer-protocol group when a "
        "member joins with group_protocol=consumer (upgrade) and back (downgrade): "
        "bidirectional, upgrade, downgrade or disabled (case-insensitive). Empty groups "
        "convert either way whatever the policy.",
    )
    log_cleaner_enable: bool = _key(
        "log.cleaner.enable", True, "Compact topics with cleanup.policy=compact."
    )
    log_cleaner_backoff_ms: int = _key(
        "log.cleaner.backoff.ms", 15000, "How often the log cleaner looks for logs to compact."
    )
    authorizer_class_name: str = _key(
        "authorizer.class.name",
        "",
        "Empty: no authorization (every request allowed). kafka.security.authorizer."
        "AclAuthorizer or headwater.AclAuthorizer: Kafka's ACL authorizer (docs/security.md).",
    )
    super_users: str = _key(
        "super.users", "", "Principals always allowed, semicolon-separated: User:admin;User:ops."
    )
    allow_everyone_if_no_acl_found: bool = _key(
        "allow.everyone.if.no.acl.found",
        False,
        "With the authorizer on: allow a resource no ACL applies to (Kafka's default: deny).",
    )
    zookeeper_set_acl: bool = _key(
        "zookeeper.set.acl",
        False,
        "Create znodes with ZooKeeper ACLs: the broker's digest identity may do all, the "
        "world only read; ACLs and credentials readable by the broker's identity alone.",
    )
    zookeeper_digest_username: str = _key(
        "zookeeper.digest.username",
        "",
        "User of ZooKeeper's digest scheme the broker authenticates as (Kafka uses a JAAS file).",
    )
    zookeeper_digest_password: str = _key(
        "zookeeper.digest.password",
        "",
        "Password of zookeeper.digest.username (sensitive: never shown by DescribeConfigs).",
        secret=True,
    )

    # -- derived views ------------------------------------------------------------------

    @functools.cached_property
    def listener_layout(self) -> named_listeners.ListenerLayout:
        """Every listener, checked (:mod:`headwater.server.listeners`)."""
        settings = {
            key: value
            for key, value in self.to_properties().items()
            if key.startswith(("ssl.", "sasl.", "listener.name."))
        }
        try:
            return named_listeners.listener_layout(
                listeners=self.listeners,
                advertised_listeners=self.advertised_listeners,
                protocol_map=self.listener_security_protocol_map,
                inter_broker_listener_name=self.inter_broker_listener_name,
                security_inter_broker_protocol=self.security_inter_broker_protocol,
                control_plane_listener_name=self.control_plane_listener_name,
                settings=settings,
            )
        except named_listeners.ListenerConfigError as exc:
            raise ConfigError(str(exc)) from None

    @functools.cached_property
    def kafka_listener_configs(self) -> tuple[KafkaListenerConfig, ...]:
        """The Kafka-protocol listeners, checked (:mod:`headwater.kafka.listeners`)."""
        try:
            return kafka_listeners(
                listeners=self.kafka_listeners,
                advertised_listeners=self.kafka_advertised_listeners,
                protocol_map=self.listener_security_protocol_map,
                grpc_listeners=[c.endpoint for c in self.listener_layout.listeners],
            )
        except named_listeners.ListenerConfigError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def listener(self) -> Listener:
        """The first listener (the only one of a classic ``PLAINTEXT://host:port`` setup)."""
        e = self.listener_layout.listeners[0].endpoint
        return Listener(e.protocol.value, e.host, e.port)

    @property
    def advertised_listener(self) -> Listener:
        e = self.listener_layout.listeners[0].advertised
        return Listener(e.protocol.value, e.host, e.port)

    @property
    def log_dir_list(self) -> list[Path]:
        return [Path(d.strip()) for d in self.log_dirs.split(",") if d.strip()]

    @property
    def retention_ms(self) -> int:
        if self.log_retention_ms is not None:
            return self.log_retention_ms
        return self.log_retention_hours * 3600 * 1000

    @property
    def zookeeper_hosts(self) -> str:
        """``zookeeper.connect`` without its chroot."""
        return self.zookeeper_connect.split("/", 1)[0]

    @property
    def zookeeper_chroot(self) -> str:
        if "/" in self.zookeeper_connect:
            chroot = "/" + self.zookeeper_connect.split("/", 1)[1].strip("/")
            return chroot if chroot != "/" else ""
        return DEFAULT_CHROOT

    def log_config_properties(self) -> dict[str, str]:
        """Broker defaults as topic-level properties (``headwater.storage.LogConfig``)."""
        return {
            "segment.bytes": str(self.log_segment_bytes),
            "retention.ms": str(self.retention_ms),
            "retention.bytes": str(self.log_retention_bytes),
            "max.message.bytes": str(self.message_max_bytes),
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election_enable).lower(),
        }

    def to_properties(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if field.name == "listener_name_settings":
                out.update(value)
                continue
            out[field.metadata["key"]] = (
                str(value).lower() if isinstance(value, bool) else str(value)
            )
        return out

    # -- loading --------------------------------------------------------------------------

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Build from string properties; raises ConfigError naming the first bad key."""
        fields = {f.metadata["key"]: f for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        per_listener: dict[str, str] = {}
        for key, raw in props.items():
            if key.startswith("listener.name."):
                try:
                    named_listeners.check_per_listener_key(key)
                except named_listeners.ListenerConfigError as exc:
                    raise ConfigError(str(exc)) from None
                per_listener[key] = raw.strip()
                continue
            field = fields.get(key)
            if field is None:
                raise ConfigError(f"unknown broker config {key!r}")
            values[field.name] = _parse_value(key, raw.strip(), field.type)
        values["listener_name_settings"] = tuple(sorted(per_listener.items()))
        config = cls(**values)
        config.validate()
        return config

    @classmethod
    def load(
        cls,
        *,
        config_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Sequence[str] = (),
        broker_id_from_hostname: bool = False,
    ) -> BrokerConfig:
        """File, then ``HEADWATER_*`` env, then ``key=value`` overrides; ``${ENV}`` expanded."""
        env = dict(os.environ if environ is None else environ)
        props: dict[str, str] = {}
        if config_file is not None:
            try:
                text = config_file.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read config file {config_file}: {exc}") from None
            props.update(parse_properties(text))
        props.update(properties_from_env(env))
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"--override {item!r}: expected key=value")
            props[key.strip()] = value
        if broker_id_from_hostname:
            props["broker.id"] = str(broker_id_from(env.get("HOSTNAME", "")))
        expanded = {k: expand_env(k, v, env) for k, v in props.items()}
        return cls.from_properties(expanded)

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        """``group.consumer.assignors`` as names, the default first."""
        return tuple(a.strip() for a in self.group_consumer_assignors.split(",") if a.strip())

    def _consumer_group_checks(self) -> list[tuple[str, bool, str]]:
        """Kafka's checks of the ``group.consumer.*`` settings (GroupCoordinatorConfig)."""
        hb, session = (
            self.group_consumer_heartbeat_interval_ms,
            self.group_consumer_session_timeout_ms,
        )
        min_hb, max_hb = (
            self.group_consumer_min_heartbeat_interval_ms,
            self.group_consumer_max_heartbeat_interval_ms,
        )
        min_s, max_s = (
            self.group_consumer_min_session_timeout_ms,
            self.group_consumer_max_session_timeout_ms,
        )
        unknown = [a for a in self.consumer_assignors if a not in CONSUMER_ASSIGNORS]
        names = self.consumer_assignors
        return [
            ("group.consumer.min.heartbeat.interval.ms", min_hb >= 1, "must be >= 1"),
            (
                "group.consumer.max.heartbeat.interval.ms",
                max_hb >= min_hb,
                "must be >= group.consumer.min.heartbeat.interval.ms",
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                min_hb <= hb <= max_hb,
                "must be within group.consumer.min/max.heartbeat.interval.ms",
            ),
            ("group.consumer.min.session.timeout.ms", min_s >= 1, "must be >= 1"),
            (
                "group.consumer.max.session.timeout.ms",
                max_s >= min_s,
                "must be >= group.consumer.min.session.timeout.ms",
            ),
            (
                "group.consumer.session.timeout.ms",
                min_s <= session <= max_s,
                "must be within group.consumer.min/max.session.timeout.ms",
            ),
            (
                "group.consumer.heartbeat.interval.ms",
                hb < session,
                "must be < group.consumer.session.timeout.ms",
            ),
            (
                "group.consumer.assignors",
                bool(names) and not unknown,
                f"unknown or no assignor {unknown or ''}: "
                f"expected some of {', '.join(CONSUMER_ASSIGNORS)}",
            ),
            ("group.consumer.assignors", len(set(names)) == len(names), "names an assignor twice"),
            ("group.consumer.max.size", self.group_consumer_max_size >= 1, "must be >= 1"),
            (
                "group.consumer.migration.policy",
                self.group_consumer_migration_policy.strip().lower() in MIGRATION_POLICIES,
                f"must be one of {', '.join(MIGRATION_POLICIES)}",
            ),
        ]

    def _security_checks(self) -> list[tuple[str, bool, str]]:
        """Authorizer and ZooKeeper-ACL settings (docs/security.md)."""
        name = self.authorizer_class_name.strip()
        try:
            parse_super_users(self.super_users)
            bad_super_users = ""
        except ValueError as exc:
            bad_super_users = str(exc)
        user, password = self.zookeeper_digest_username, self.zookeeper_digest_password
        return [
            (
                "authorizer.class.name",
                not name or name in AUTHORIZER_CLASS_NAMES,
                f"unknown authorizer {name!r}; leave it empty or use one of "
                f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))}",
            ),
            ("super.users", not bad_super_users, bad_super_users),
            (
                "zookeeper.digest.username",
                bool(user) == bool(password) and ":" not in user,
                "needs zookeeper.digest.password with it (and no ':')",
            ),
            (
                "zookeeper.set.acl",
                not self.zookeeper_set_acl or bool(user),
                "needs zookeeper.digest.username and zookeeper.digest.password",
            ),
        ]

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.authorizer_class_name.strip())

    def validate(self) -> None:
        checks: list[tuple[str, bool, str]] = [
            ("broker.id", self.broker_id >= 0, "must be set to an integer >= 0"),
            ("num.partitions", self.num_partitions >= 1, "must be >= 1"),
            ("default.replication.factor", self.default_replication_factor >= 1, "must be >= 1"),
            ("min.insync.replicas", self.min_insync_replicas >= 1, "must be >= 1"),
            ("replica.lag.time.max.ms", self.replica_lag_time_max_ms > 0, "must be > 0"),
            ("message.max.bytes", self.message_max_bytes > 0, "must be > 0"),
            ("zookeeper.session.timeout.ms", self.zookeeper_session_timeout_ms > 0, "must be > 0"),
            ("metrics.port", 0 <= self.metrics_port < 65536, "must be a port number or 0"),
            ("log.dirs", bool(self.log_dir_list), "must name at least one directory"),
            (
                "offsets.topic.num.partitions",
                self.offsets_topic_num_partitions >= 1,
                "must be >= 1",
            ),
            (
                "offsets.topic.replication.factor",
                self.offsets_topic_replication_factor >= 1,
                "must be >= 1",
            ),
            ("offsets.retention.minutes", self.offsets_retention_minutes >= 1, "must be >= 1"),
            ("offsets.commit.timeout.ms", self.offsets_commit_timeout_ms > 0, "must be > 0"),
            (
                "group.initial.rebalance.delay.ms",
                self.group_initial_rebalance_delay_ms >= 0,
                "must be >= 0",
            ),
            (
                "group.max.session.timeout.ms",
                self.group_max_session_timeout_ms >= self.group_min_session_timeout_ms,
                "must be >= group.min.session.timeout.ms",
            ),
            ("group.max.size", self.group_max_size >= 1, "must be >= 1"),
            *self._consumer_group_checks(),
            ("log.cleaner.backoff.ms", self.log_cleaner_backoff_ms > 0, "must be > 0"),
            ("zookeeper.connect", bool(self.zookeeper_hosts.strip()), "must name a host"),
            ("connections.max.reauth.ms", self.connections_max_reauth_ms >= 0, "must be >= 0"),
        ]
        for key, ok, why in checks:
            if not ok:
                raise ConfigError(f"{key}: {why}")
        for key, ok, why in self._security_checks():
            if not ok:
                raise ConfigError(f"{key}: {why}")
        self.listener_layout  # noqa: B018 (checks every listener setting)
        self.kafka_listener_configs  # noqa: B018
        if self.socket_request_max_bytes <= 0:
            raise ConfigError("socket.request.max.bytes: must be > 0")


SENSITIVE_KEYS = frozenset({"zookeeper.digest.password"})
"""Keys whose values DescribeConfigs and logs never show (Kafka's PASSWORD type)."""


CONSUMER_ASSIGNORS = ("uniform", "range")
"""The server-side assignors ``group.consumer.assignors`` may name
(:mod:`headwater.groups.consumer_assignors`)."""

MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
"""``group.consumer.migration.policy`` values (Kafka's; ``headwater.groups.values``)."""


def _parse_value(key: str, raw: str, type_name: Any) -> Any:
    kind = str(type_name)
    parse: Callable[[str], Any]
    if kind.startswith("int"):
        if raw == "" and "None" in kind:
            return None
        parse = int
    elif kind == "bool":
        parse = _bool
    else:
        return raw
    try:
        return parse(raw)
    except ValueError:
        expected = "true or false" if kind == "bool" else "an integer"
        raise ConfigError(f"{key}: invalid value {raw!r}, expected {expected}") from None


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError(raw)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``.properties``: ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments.

    Lines ending in an odd number of backslashes continue on the next line.
    """
    props: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if trailing % 2 == 1:
            logical += stripped[:-1]
            continue
        logical += stripped
        match = re.match(r"((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", logical)
        if match is not None:
            props[match.group(1).replace("\\", "")] = match.group(2).rstrip()
        elif logical.strip():
            props[logical.strip()] = ""
        logical = ""
    return props


def properties_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``HEADWATER_LOG_DIRS=/data`` -> ``{"log.dirs": "/data"}``.

    Names of known broker keys are mapped; those of other commands and Kubernetes service
    links are passed over (module docstring); any other ``HEADWATER_*`` name is refused.
    """
    known = {f.metadata["key"] for f in dataclasses.fields(BrokerConfig)}
    props: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or len(name) == len(ENV_PREFIX):
            continue
        key = name[len(ENV_PREFIX) :].lower().replace("_", ".")
        if key in known or key.startswith("listener.name."):
            props[key] = value
        elif not (
            name in NOT_BROKER_ENV
            or name.startswith(_NOT_BROKER_PREFIXES)
            or _SERVICE_LINK.fullmatch(name)
        ):
            raise ConfigError(
                f"environment variable {name}: unknown broker config {key!r} "
                f"({ENV_PREFIX}<KEY> sets a broker config; fix or unset it)"
            )
    return props


def expand_env(key: str, value: str, environ: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"{key}: environment variable ${{{name}}} is not set")
        return environ[name]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", replace, value)


def broker_id_from(hostname: str) -> int:
    """The StatefulSet ordinal: ``hw-broker-2`` -> 2."""
    match = re.search(r"(\d+)$", hostname)
    if match is None:
        raise ConfigError(
            f"--broker-id-from-hostname: HOSTNAME {hostname!r} does not end in an integer"
        )
    return int(match.group(1))
