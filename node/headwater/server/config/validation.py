"""The rules a broker config must keep: ranges, settings that need each other, names that
must be known.  Each rule is ``(key, holds, why)``; the first that does not hold is raised
as one :class:`~headwater.server.config.settings.ConfigError` naming its key.
"""

from __future__ import annotations

from headwater.security.authorizer import AUTHORIZER_CLASS_NAMES, parse_super_users
from headwater.server.config.settings import BrokerConfig, ConfigError

CONSUMER_ASSIGNORS = ("uniform", "range")
"""The server-side assignors ``group.consumer.assignors`` may name
(:mod:`headwater.groups.consumer.assignors`)."""

MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
"""``group.consumer.migration.policy`` values (Kafka's; ``headwater.groups.values``)."""


def validate_config(config: BrokerConfig) -> None:
    """Raise :class:`ConfigError` naming the first key that breaks a rule."""
    checks: list[tuple[str, bool, str]] = [
        ("broker.id", config.broker_id >= 0, "must be set to an integer >= 0"),
        ("num.partitions", config.num_partitions >= 1, "must be >= 1"),
        ("default.replication.factor", config.default_replication_factor >= 1, "must be >= 1"),
        ("min.insync.replicas", config.min_insync_replicas >= 1, "must be >= 1"),
        ("replica.lag.time.max.ms", config.replica_lag_time_max_ms > 0, "must be > 0"),
        (
            "replica.socket.timeout.ms",
            config.replica_socket_timeout_ms >= config.replica_fetch_wait_max_ms + 1000,
            f"must be >= replica.fetch.wait.max.ms + 1000 "
            f"({config.replica_fetch_wait_max_ms + 1000}), got {config.replica_socket_timeout_ms}",
        ),
        ("message.max.bytes", config.message_max_bytes > 0, "must be > 0"),
        ("zookeeper.session.timeout.ms", config.zookeeper_session_timeout_ms > 0, "must be > 0"),
        ("metrics.port", 0 <= config.metrics_port < 65536, "must be a port number or 0"),
        ("log.dirs", bool(config.log_dir_list), "must name at least one directory"),
        (
            "offsets.topic.num.partitions",
            config.offsets_topic_num_partitions >= 1,
            "must be >= 1",
        ),
        (
            "offsets.topic.replication.factor",
            config.offsets_topic_replication_factor >= 1,
            "must be >= 1",
        ),
        (
            "transaction.state.log.num.partitions",
            config.transaction_state_log_num_partitions >= 1,
            "must be >= 1",
        ),
        (
            "transaction.state.log.replication.factor",
            config.transaction_state_log_replication_factor >= 1,
            "must be >= 1",
        ),
        (
            "transaction.state.log.min.isr",
            config.transaction_state_log_min_isr >= 1,
            "must be >= 1",
        ),
        ("transaction.max.timeout.ms", config.transaction_max_timeout_ms > 0, "must be > 0"),
        (
            "transactional.id.expiration.ms",
            config.transactional_id_expiration_ms > 0,
            "must be > 0",
        ),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms > 0,
            "must be > 0",
        ),
        ("offsets.retention.minutes", config.offsets_retention_minutes >= 1, "must be >= 1"),
        ("offsets.commit.timeout.ms", config.offsets_commit_timeout_ms > 0, "must be > 0"),
        (
            "group.initial.rebalance.delay.ms",
            config.group_initial_rebalance_delay_ms >= 0,
            "must be >= 0",
        ),
        (
            "group.max.session.timeout.ms",
            config.group_max_session_timeout_ms >= config.group_min_session_timeout_ms,
            "must be >= group.min.session.timeout.ms",
        ),
        ("group.max.size", config.group_max_size >= 1, "must be >= 1"),
        *_consumer_group_checks(config),
        ("log.cleaner.backoff.ms", config.log_cleaner_backoff_ms > 0, "must be > 0"),
        ("zookeeper.connect", bool(config.zookeeper_hosts.strip()), "must name a host"),
        ("connections.max.reauth.ms", config.connections_max_reauth_ms >= 0, "must be >= 0"),
        ("socket.request.max.bytes", config.socket_request_max_bytes > 0, "must be > 0"),
        ("quota.window.num", config.quota_window_num >= 1, "must be >= 1"),
        ("quota.window.size.seconds", config.quota_window_size_seconds >= 1, "must be >= 1"),
    ]
    for key, ok, why in checks:
        if not ok:
            raise ConfigError(f"{key}: {why}")
    for key, ok, why in _security_checks(config):
        if not ok:
            raise ConfigError(f"{key}: {why}")
    config.listener_layout  # noqa: B018 (checks every listener setting)
    config.kafka_listener_configs  # noqa: B018 (and the Kafka-protocol ones)


def _consumer_group_checks(config: BrokerConfig) -> list[tuple[str, bool, str]]:
    """Kafka's checks of the ``group.consumer.*`` settings (GroupCoordinatorConfig)."""
    hb, session = (
        config.group_consumer_heartbeat_interval_ms,
        config.group_consumer_session_timeout_ms,
    )
    min_hb, max_hb = (
        config.group_consumer_min_heartbeat_interval_ms,
        config.group_consumer_max_heartbeat_interval_ms,
    )
    min_s, max_s = (
        config.group_consumer_min_session_timeout_ms,
        config.group_consumer_max_session_timeout_ms,
    )
    unknown = [a for a in config.consumer_assignors if a not in CONSUMER_ASSIGNORS]
    names = config.consumer_assignors
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
        ("group.consumer.max.size", config.group_consumer_max_size >= 1, "must be >= 1"),
        (
            "group.consumer.migration.policy",
            config.group_consumer_migration_policy.strip().lower() in MIGRATION_POLICIES,
            f"must be one of {', '.join(MIGRATION_POLICIES)}",
        ),
    ]


def _security_checks(config: BrokerConfig) -> list[tuple[str, bool, str]]:
    """Authorizer and ZooKeeper-ACL settings (docs/security.md)."""
    name = config.authorizer_class_name.strip()
    try:
        parse_super_users(config.super_users)
        bad_super_users = ""
    except ValueError as exc:
        bad_super_users = str(exc)
    user, password = config.zookeeper_digest_username, config.zookeeper_digest_password
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
            not config.zookeeper_set_acl or bool(user),
            "needs zookeeper.digest.username and zookeeper.digest.password",
        ),
    ]
