"""Describing and altering configs: what both front doors (the gRPC Admin service and
the Kafka listener) call for DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Resources are Kafka's: a topic (its overrides in ZooKeeper over the broker's ``log.*``
defaults) or a broker (``""``: the cluster-wide default).  Brokers have dynamic configs
only for the replication throttles (KIP-73, :data:`quota.BROKER_DYNAMIC_KEYS`); the
rest of a broker's settings are static and read-only.

Invariants: every change is checked in full before anything is written (a bad key or
value raises INVALID_CONFIG or INVALID_REQUEST and changes nothing); ``validate_only``
checks exactly what a real change checks and writes nothing.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping, Sequence

from headwater import errors
from headwater.coordination import reassignment_admin
from headwater.coordination.broker import BrokerCoordinator
from headwater.replication import quota
from headwater.security.acls import AclOperation as Op
from headwater.server.auth.authorization import RequestAuthorizer
from headwater.server.config import BrokerConfig, is_secret
from headwater.server.convert import Context
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.replication_quotas import DEFAULT_ENTITY
from headwater.storage import LogConfig


class ResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type codes."""

    TOPIC = 2
    BROKER = 4


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigs config sources."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


class AlterOp(enum.IntEnum):
    """Kafka's IncrementalAlterConfigs operations."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


LIST_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
    }
)
"""Topic configs whose value is a comma-separated list (APPEND and SUBTRACT apply)."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool = False
    is_sensitive: bool = False


def resource_type(code: int) -> ResourceType:
    """The resource type of a request's code; INVALID_REQUEST for any other (Kafka's
    BROKER_LOGGER, CLIENT_METRICS, GROUP ... are not served)."""
    try:
        return ResourceType(code)
    except ValueError:
        raise errors.InvalidRequestError(
            f"unsupported config resource type {code} (topics 2 and brokers 4 are served)"
        ) from None


def apply_ops(
    current: Mapping[str, str],
    defaults: Mapping[str, str],
    ops: Sequence[tuple[str, AlterOp, str | None]],
) -> tuple[dict[str, str], list[str]]:
    """IncrementalAlterConfigs' ``(name, op, value)`` over ``current`` overrides:
    ``(set, delete)`` to write.  APPEND and SUBTRACT work on list configs
    (:data:`LIST_CONFIGS`) from the current value (the override, else the default) and
    raise INVALID_REQUEST on any other; a key named twice is INVALID_REQUEST, as Kafka's."""
    set_: dict[str, str] = {}
    delete: list[str] = []
    seen: set[str] = set()
    for name, op, value in ops:
        if name in seen:
            raise errors.InvalidRequestError(f"config {name!r} is altered twice in one request")
        seen.add(name)
        if op is AlterOp.DELETE:
            delete.append(name)
            continue
        if value is None:
            raise errors.InvalidRequestError(f"{op.name} of config {name!r} without a value")
        if op is AlterOp.SET:
            set_[name] = value
            continue
        if name not in LIST_CONFIGS:
            raise errors.InvalidRequestError(
                f"Config value {op.name.lower()} is not allowed for config key: {name}"
            )
        base = current.get(name, defaults.get(name, ""))
        items = [v for v in (s.strip() for s in base.split(",")) if v]
        given = [v for v in (s.strip() for s in value.split(",")) if v]
        if op is AlterOp.APPEND:
            items += [v for v in given if v not in items]
        else:
            items = [v for v in items if v not in given]
        set_[name] = ",".join(items)
    return set_, delete


class ConfigAdmin:
    """Configs of one broker's cluster (event-loop only; ZooKeeper in worker threads)."""

    def __init__(
        self,
        *,
        coordinator: Callable[[], BrokerCoordinator | None],
        config: BrokerConfig,
        authz: RequestAuthorizer,
    ) -> None:
        self._coordinator = coordinator
        self._config = config
        self._authz = authz

    def _coord(self) -> BrokerCoordinator:
        coordinator = self._coordinator()
        if coordinator is None:
            raise errors.BrokerNotAvailableError("the broker is not connected to ZooKeeper")
        return coordinator

    def authorize(self, context: Context, op: Op, type_: ResourceType, name: str) -> None:
        """DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, or on the cluster for a broker."""
        if type_ is ResourceType.TOPIC:
            if not self._authz.topic(context, op, name):
                raise errors.TopicAuthorizationFailedError(
                    f"not authorized to {op.name} of TOPIC {name!r}"
                )
        elif not self._authz.cluster(context, op):
            raise errors.ClusterAuthorizationFailedError(f"not authorized to {op.name} of brokers")

    def topic_defaults(self) -> dict[str, str]:
        return LogConfig.from_properties(self._config.log_config_properties()).to_properties()

    async def topic_overrides(self, name: str) -> dict[str, str]:
        """A topic's overrides; UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist
        or is being deleted (as in Kafka, where brokers stop serving it at once)."""
        coordinator = self._coord()
        # The marker first: the controller drops it and the topic's znodes in one multi-op,
        # so a topic read after an absent marker is not one whose deletion just finished.
        if name in await run_blocking(
            coordinator.store.get_topics_to_delete
        ) or name not in await run_blocking(coordinator.get_topics):
            raise errors.UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        return dict(await run_blocking(coordinator.get_topic_config, name))

    async def describe(
        self, type_: ResourceType, name: str, keys: set[str] | frozenset[str] = frozenset()
    ) -> list[ConfigEntry]:
        """Every config of the resource (or those of ``keys``), with its source."""
        if type_ is ResourceType.TOPIC:
            overrides = await self.topic_overrides(name)
            defaults = LogConfig.from_properties(self._config.log_config_properties())
            merged = LogConfig.from_properties(overrides, defaults=defaults).to_properties()
            return [
                ConfigEntry(
                    key,
                    value,
                    ConfigSource.DYNAMIC_TOPIC_CONFIG
                    if key in overrides
                    else ConfigSource.STATIC_BROKER_CONFIG,
                )
                for key, value in sorted(merged.items())
                if not keys or key in keys
            ]
        self._check_broker(name)
        entries = await self._describe_dynamic(name, keys)
        if name == "":
            return entries
        for key, value in sorted(self._config.to_properties().items()):
            if not keys or key in keys:
                sensitive = is_secret(key)
                entries.append(
                    ConfigEntry(
                        key,
                        None if sensitive and value else value,
                        ConfigSource.STATIC_BROKER_CONFIG,
                        read_only=True,
                        is_sensitive=sensitive,
                    )
                )
        return entries

    def _check_broker(self, name: str) -> None:
        if name not in ("", str(self._config.broker_id)):
            raise errors.InvalidRequestError(
                f"broker {name} is not this broker ({self._config.broker_id})"
            )

    async def _describe_dynamic(
        self, name: str, keys: set[str] | frozenset[str]
    ) -> list[ConfigEntry]:
        """The dynamic broker configs (replication throttles) of broker ``name`` ("": default)."""
        coordinator = self._coord()
        default = await run_blocking(coordinator.store.get_broker_config, DEFAULT_ENTITY)
        own = await run_blocking(coordinator.store.get_broker_config, name) if name else {}
        entries = []
        for key in sorted(quota.BROKER_DYNAMIC_KEYS):
            if keys and key not in keys:
                continue
            if key in own:
                value, source = own[key], ConfigSource.DYNAMIC_BROKER_CONFIG
            elif key in default:
                value, source = default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            elif name:
                value, source = str(quota.UNLIMITED), ConfigSource.DEFAULT_CONFIG
            else:
                continue
            entries.append(ConfigEntry(key, value, source))
        return entries

    async def broker_overrides(self, name: str) -> dict[str, str]:
        """Broker ``name``'s dynamic configs ("": the cluster-wide default)."""
        self._check_broker_name(name)
        return dict(
            await run_blocking(self._coord().store.get_broker_config, name or DEFAULT_ENTITY)
        )

    @staticmethod
    def _check_broker_name(name: str) -> None:
        if name and not name.isdigit():
            raise errors.InvalidRequestError(f"broker id {name!r} is not a number")

    async def alter(
        self,
        type_: ResourceType,
        name: str,
        set_: Mapping[str, str],
        delete: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> None:
        """Set and delete overrides of one resource, all or nothing."""
        if type_ is ResourceType.BROKER:
            await self._alter_broker(name, dict(set_), list(delete), validate_only=validate_only)
            return
        await run_blocking(
            self._coord().alter_topic_config, name, set_, delete, validate_only=validate_only
        )

    async def _alter_broker(
        self, name: str, set_: dict[str, str], delete: list[str], *, validate_only: bool
    ) -> None:
        """Dynamic broker configs in ``/config/brokers/<id>`` or ``<default>`` (name "")."""
        self._check_broker_name(name)
        static = sorted(k for k in (*set_, *delete) if k not in quota.BROKER_DYNAMIC_KEYS)
        if static:
            raise errors.InvalidRequestError(
                f"Cannot update these configs dynamically: {static}"
                f" (dynamic broker configs: {sorted(quota.BROKER_DYNAMIC_KEYS)})"
            )
        for key, value in set_.items():
            try:
                quota.parse_rate(value)
            except ValueError as exc:
                raise errors.InvalidRequestError(
                    f"invalid value {value!r} for {key}: {exc}"
                ) from None
        if not validate_only:
            await run_blocking(
                reassignment_admin.alter_broker_config,
                self._coord().store,
                name or DEFAULT_ENTITY,
                set_=set_,
                delete=delete,
            )
