"""The broker's settings: every key under its Kafka ``server.properties`` name, with its
default and its documentation, and which keys hold secrets.

Users bring their Kafka habits (docs/design.md, "Configuration"), so every setting has its
Kafka name and meaning.  :class:`BrokerConfig` declares them (one field per key: the key in
``metadata["key"]``, the doc in ``metadata["doc"]``, read by ``scripts/gen-config-docs.py``)
and the values derived from them; :func:`is_secret` is the one rule for which values are
never shown.  Turning files, environment and flags into a config is
:mod:`headwater.server.config.loading`; the rules between keys are
:mod:`headwater.server.config.validation`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

from headwater.kafka.listeners import KafkaListenerConfig, kafka_listeners
from headwater.server import listeners as named_listeners

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
    """A config field under Kafka's ``name``; a ``secret`` one (:func:`is_secret`) is left
    out of ``repr``."""
    return dataclasses.field(
        default=default,
        repr=not secret,
        metadata={"key": name, "doc": doc, "secret": secret},
    )


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
        "listener.security.protocol.map: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, with "
        "the ssl.* and sasl.* settings of gRPC listeners); empty: none.",
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
    quota_window_num: int = _key(
        "quota.window.num",
        11,
        "Client quotas: how many samples a client's rate is measured over.",
    )
    quota_window_size_seconds: int = _key(
        "quota.window.size.seconds",
        1,
        "Client quotas: the length of each sample, in seconds.",
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
    replica_socket_timeout_ms: int = _key(
        "replica.socket.timeout.ms",
        5000,
        "Deadline of a follower's calls to its leader; at least replica.fetch.wait.max.ms + "
        "1000 (the leader holds a fetch that long, then sends the answer).  A call that runs "
        "out of it drops the connection.  A connection a network partition killed is found "
        "sooner, by gRPC keepalive (within about 2 s), so a follower is back in the ISR about "
        "replica.fetch.backoff.ms after the partition heals; this deadline catches what "
        "keepalive cannot, a leader that answers pings but not the fetch.  Below Kafka's "
        "30000, above what a large fetch response or a leader busy for a moment needs.",
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
    transaction_state_log_num_partitions: int = _key(
        "transaction.state.log.num.partitions",
        50,
        "Partitions of __transaction_state (fixed at creation).",
    )
    transaction_state_log_replication_factor: int = _key(
        "transaction.state.log.replication.factor",
        3,
        "Replication factor of __transaction_state (capped at the live broker count).",
    )
    transaction_state_log_min_isr: int = _key(
        "transaction.state.log.min.isr",
        2,
        "min.insync.replicas of __transaction_state (capped at its replication factor).",
    )
    transaction_max_timeout_ms: int = _key(
        "transaction.max.timeout.ms",
        900000,
        "Longest transaction.timeout.ms a producer may ask (INVALID_TRANSACTION_TIMEOUT).",
    )
    transactional_id_expiration_ms: int = _key(
        "transactional.id.expiration.ms",
        604800000,
        "A transactional id idle this long with no transaction open is removed.",
    )
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10000,
        "How often the coordinator aborts transactions past their timeout.",
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
        settings = self._listener_settings
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
    def _listener_settings(self) -> dict[str, str]:
        """``ssl.*``, ``sasl.*`` and ``listener.name.*`` by their Kafka names."""
        return {
            key: value
            for key, value in self.to_properties().items()
            if key.startswith(("ssl.", "sasl.", "listener.name."))
        }

    @functools.cached_property
    def kafka_listener_configs(self) -> tuple[KafkaListenerConfig, ...]:
        """The Kafka-protocol listeners, checked (:mod:`headwater.kafka.listeners`)."""
        try:
            return kafka_listeners(
                listeners=self.kafka_listeners,
                advertised_listeners=self.kafka_advertised_listeners,
                protocol_map=self.listener_security_protocol_map,
                grpc_listeners=[c.endpoint for c in self.listener_layout.listeners],
                settings=self._listener_settings,
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

    @property
    def consumer_assignors(self) -> tuple[str, ...]:
        """``group.consumer.assignors`` as names, the default first."""
        return tuple(a.strip() for a in self.group_consumer_assignors.split(",") if a.strip())

    @property
    def authorizer_enabled(self) -> bool:
        return bool(self.authorizer_class_name.strip())


SECRET_KEYS = frozenset(
    field.metadata["key"] for field in dataclasses.fields(BrokerConfig) if field.metadata["secret"]
)
"""The declared keys whose values are secrets (Kafka's PASSWORD type and private keys)."""

_PER_LISTENER = re.compile(r"listener\.name\.[^.]+\.(.+)")


def is_secret(key: str) -> bool:
    """Whether the value of ``key`` is a secret: never logged, left out of ``repr``, described
    with no value by DescribeConfigs (Kafka's ``sensitive=true``).

    The one rule: a declared key is secret when its field says so (:data:`SECRET_KEYS`); a
    per-listener key ``listener.name.<listener>.<setting>`` when its broker-wide ``setting`` is,
    and every ``<mechanism>.sasl.jaas.config`` (the broker's own login).
    """
    per_listener = _PER_LISTENER.fullmatch(key)
    if per_listener is not None:
        setting = per_listener.group(1)
        return setting.endswith(".sasl.jaas.config") or setting in SECRET_KEYS
    return key in SECRET_KEYS
