"""``headwater.Admin``: topics, partitions, configs and the cluster, with typed results.

Any broker accepts admin requests (it validates them and writes ZooKeeper; the
controller acts), so the admin client sends each request to any live broker,
retrying on another after a lost connection.  Per-topic errors come back as
Kafka's exceptions (``TopicAlreadyExistsError``, ``InvalidPartitionsError``,
...): methods that act on many topics raise the first failure, naming it,
unless ``raise_on_error=False``, in which case they return each topic's error.

Topic listing and description use the Metadata RPC (Kafka's admin does the
same), so they show the leaders, replicas and ISR a client would act on.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

from headwater import errors
from headwater.client import connection, offsets
from headwater.client import security as client_security
from headwater.client.admin_acls import AdminAcls
from headwater.client.admin_log_dirs import AdminLogDirs
from headwater.client.admin_reassignments import AdminReassignments
from headwater.client.admin_rebalance import AdminRebalance
from headwater.client.admin_scram import AdminScram
from headwater.client.group.admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupAdmin,
)
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.metadata import MetadataManager
from headwater.client.security import ClientSecurity
from headwater.client.settings import parse_bootstrap
from headwater.client.types import (
    OffsetAndTimestamp,
    PartitionMetadata,
    TopicPartition,
)
from headwater.retry import RetryPolicy
from headwater.v1 import admin_pb2, common_pb2

T = TypeVar("T")


class NewTopic(NamedTuple):
    """A topic to create; -1 means the broker's default (num.partitions, ...)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = {}
    replica_assignment: Mapping[int, Sequence[int]] | None = None


class TopicDescription(NamedTuple):
    name: str
    internal: bool
    partitions: tuple[PartitionMetadata, ...]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class ConfigEntry(NamedTuple):
    name: str
    value: str
    read_only: bool = False
    source: str = "SOURCE_UNKNOWN"
    is_sensitive: bool = False
    documentation: str = ""

    @property
    def is_default(self) -> bool:
        return self.source in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


class BrokerDescription(NamedTuple):
    """A live broker as DescribeCluster reports it, with the versions it runs.

    ``version`` is the broker's software version and ``protocol_version`` the
    ``inter.broker.protocol.version`` in force on it (rolling upgrades check
    both); either is ``""`` when the broker did not report it.
    """

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    version: str = ""
    protocol_version: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class ClusterDescription(NamedTuple):
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerDescription, ...]


OffsetSpec = int | str
"""``"earliest"``, ``"latest"``, ``"max_timestamp"`` or a timestamp in milliseconds."""

_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}


class Admin(AdminRebalance, AdminReassignments, AdminLogDirs, AdminScram, AdminAcls):
    """Administers a cluster; thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str | list[str] | tuple[str, ...] = "127.0.0.1:9092",
        *,
        request_timeout_ms: int = 30000,
        default_api_timeout_ms: int = 60000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        security_protocol: str = "PLAINTEXT",
        ssl_cafile: str | None = None,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_check_hostname: bool = True,
        sasl_mechanism: str | None = None,
        sasl_plain_username: str | None = None,
        sasl_plain_password: str | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers)
        self.request_timeout_ms = request_timeout_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self._retry = RetryPolicy(
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=max(retry_backoff_ms, retry_backoff_max_ms),
        )
        self._channels = connection.Channels(
            security=security
            or client_security.from_options(
                security_protocol=security_protocol,
                ssl_cafile=ssl_cafile,
                ssl_certfile=ssl_certfile,
                ssl_keyfile=ssl_keyfile,
                ssl_check_hostname=ssl_check_hostname,
                sasl_mechanism=sasl_mechanism,
                sasl_plain_username=sasl_plain_username,
                sasl_plain_password=sasl_plain_password,
            )
        )
        self._metadata = MetadataManager(
            bootstrap=self.bootstrap_servers,
            channels=self._channels,
            retry=self._retry,
            request_timeout_ms=request_timeout_ms,
        )
        self._groups = GroupAdmin(
            channels=self._channels,
            metadata=self._metadata,
            retry=self._retry,
            bootstrap=self.bootstrap_servers,
            request_timeout_ms=request_timeout_ms,
            default_api_timeout_ms=default_api_timeout_ms,
        )

    # -- plumbing -------------------------------------------------------------------

    def _admin_call(self, rpc: str, request: Any, *, timeout_ms: float | None = None) -> Any:
        """Send ``request`` to any broker's Admin service, retrying on another."""
        return self._call_any_broker(self._channels.admin, rpc, request, timeout_ms=timeout_ms)

    def _call_any_broker(
        self,
        stub_for: Callable[[str], Any],
        rpc: str,
        request: Any,
        *,
        timeout_ms: float | None = None,
    ) -> Any:
        """Send ``request`` as ``stub_for(address).<rpc>`` to any broker (known brokers in
        random order, then the bootstrap addresses), trying the next on a network error and
        retrying the whole round with a metadata refresh until ``default_api_timeout_ms``."""

        def attempt() -> Any:
            brokers = [b.address for b in self._metadata.current.brokers.values()]
            random.shuffle(brokers)
            candidates = brokers + [a for a in self.bootstrap_servers if a not in brokers]
            last: errors.HeadwaterError | None = None
            for address in candidates:
                try:
                    return connection.call(
                        getattr(stub_for(address), rpc),
                        request,
                        address=address,
                        timeout_ms=timeout_ms or self.request_timeout_ms,
                    )
                except errors.NetworkError as exc:
                    last = exc
            raise errors.NetworkError(
                f"cannot reach any broker (tried {', '.join(candidates)})"
                + (f"; last error: {last.message}" if last is not None else "")
            )

        return self._retry.call(
            attempt,
            timeout_ms=self.default_api_timeout_ms,
            on_retry=lambda _e: self._metadata.maybe_refresh(),
        )

    @staticmethod
    def _collect(
        results: Iterable[Any], *, raise_on_error: bool, what: Callable[[Any], str]
    ) -> dict[str, errors.HeadwaterError | None]:
        out: dict[str, errors.HeadwaterError | None] = {}
        for r in results:
            out[r.name] = errors.for_code(r.error, r.error_message or what(r)) if r.error else None
        if raise_on_error:
            for err in out.values():
                if err is not None:
                    raise err
        return out

    # -- topics ---------------------------------------------------------------------

    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[str, errors.HeadwaterError | None]:
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    configs=dict(t.configs),
                    assignments=[
                        admin_pb2.ReplicaAssignment(partition=p, broker_ids=list(ids))
                        for p, ids in (t.replica_assignment or {}).items()
                    ],
                )
                for t in new_topics
            ],
            timeout_ms=timeout_ms or self.request_timeout_ms,
            validate_only=validate_only,
        )
        resp = self._admin_call("CreateTopics", request)
        return self._collect(
            resp.topics, raise_on_error=raise_on_error, what=lambda r: f"topic {r.name!r}"
        )

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        self.create_topics([NewTopic(name, num_partitions, replication_factor, configs or {})])

    def delete_topics(
        self, names: Iterable[str], *, timeout_ms: int | None = None, raise_on_error: bool = True
    ) -> dict[str, errors.HeadwaterError | None]:
        request = admin_pb2.DeleteTopicsRequest(
            topics=list(names), timeout_ms=timeout_ms or self.request_timeout_ms
        )
        resp = self._admin_call("DeleteTopics", request)
        return self._collect(
            resp.topics, raise_on_error=raise_on_error, what=lambda r: f"topic {r.name!r}"
        )

    def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[str, errors.HeadwaterError | None]:
        """Grow each topic to the given total number of partitions."""
        request = admin_pb2.CreatePartitionsRequest(
            topics=[
                admin_pb2.CreatePartitionsTopic(name=name, count=count)
                for name, count in new_totals.items()
            ],
            timeout_ms=timeout_ms or self.request_timeout_ms,
            validate_only=validate_only,
        )
        resp = self._admin_call("CreatePartitions", request)
        return self._collect(
            resp.topics, raise_on_error=raise_on_error, what=lambda r: f"topic {r.name!r}"
        )

    def list_topics(self, *, include_internal: bool = False) -> list[str]:
        snap = self._retry.call(
            lambda: self._metadata.fetch(None), timeout_ms=self.default_api_timeout_ms
        )
        return sorted(
            t for t in snap.partitions if include_internal or t not in snap.internal_topics
        )

    def describe_topics(self, names: Iterable[str] | None = None) -> dict[str, TopicDescription]:
        """Partitions (leader, replicas, ISR) of ``names``, or of every topic."""
        wanted = None if names is None else list(names)
        snap = self._retry.call(
            lambda: self._metadata.fetch(wanted), timeout_ms=self.default_api_timeout_ms
        )
        for name, code in snap.topic_errors.items():
            raise errors.for_code(code, f"topic {name!r}")
        return {
            name: TopicDescription(name, name in snap.internal_topics, parts)
            for name, parts in sorted(snap.partitions.items())
        }

    # -- configs --------------------------------------------------------------------

    def describe_configs(
        self, topics: Iterable[str] = (), *, brokers: Iterable[int] = ()
    ) -> dict[str, dict[str, ConfigEntry]]:
        """Configs of topics (by name) and brokers (by id, keyed ``"broker:<id>"``)."""
        resources = [admin_pb2.ConfigResource(type=admin_pb2.TOPIC, name=t) for t in topics]
        resources += [admin_pb2.ConfigResource(type=admin_pb2.BROKER, name=str(b)) for b in brokers]
        resp = self._admin_call(
            "DescribeConfigs", admin_pb2.DescribeConfigsRequest(resources=resources)
        )
        out: dict[str, dict[str, ConfigEntry]] = {}
        for r in resp.results:
            if r.error:
                raise errors.for_code(r.error, r.error_message or f"configs of {r.name!r}")
            key = r.name if r.type == admin_pb2.TOPIC else f"broker:{r.name}"
            out[key] = {
                e.name: ConfigEntry(
                    e.name,
                    e.value,
                    e.read_only,
                    admin_pb2.ConfigSource.Name(e.source),
                    e.is_sensitive,
                    e.documentation,
                )
                for e in r.entries
            }
        return out

    def alter_topic_configs(
        self,
        topic: str,
        *,
        set_configs: Mapping[str, str] | None = None,
        delete_configs: Iterable[str] = (),
        validate_only: bool = False,
    ) -> None:
        """Set and delete topic configs (Kafka's incremental alter)."""
        configs = [
            admin_pb2.AlterableConfig(name=k, op=admin_pb2.SET, value=v)
            for k, v in (set_configs or {}).items()
        ]
        configs += [admin_pb2.AlterableConfig(name=k, op=admin_pb2.DELETE) for k in delete_configs]
        request = admin_pb2.AlterConfigsRequest(
            resources=[
                admin_pb2.AlterConfigsResource(type=admin_pb2.TOPIC, name=topic, configs=configs)
            ],
            validate_only=validate_only,
        )
        resp = self._admin_call("AlterConfigs", request)
        for r in resp.results:
            if r.error:
                raise errors.for_code(r.error, r.error_message or f"configs of {topic!r}")

    # -- cluster --------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        resp = self._admin_call("DescribeCluster", admin_pb2.DescribeClusterRequest())
        return ClusterDescription(
            resp.cluster_id,
            resp.controller_id,
            tuple(
                sorted(
                    (
                        BrokerDescription(
                            b.id, b.host, b.port, b.rack or None, b.version, b.protocol_version
                        )
                        for b in resp.brokers
                    ),
                    key=lambda b: b.broker_id,
                )
            ),
        )

    def elect_leaders(
        self, partitions: Iterable[TopicPartition] | None = None, *, unclean: bool = False
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Elect preferred (or, with ``unclean``, any) leaders; None = all partitions."""
        request = admin_pb2.ElectLeadersRequest(
            election_type=admin_pb2.UNCLEAN if unclean else admin_pb2.PREFERRED,
            partitions=[
                common_pb2.TopicPartition(topic=tp.topic, partition=tp.partition)
                for tp in partitions or ()
            ],
            timeout_ms=self.request_timeout_ms,
        )
        resp = self._admin_call("ElectLeaders", request)
        return {
            TopicPartition(r.topic, r.partition): (
                errors.for_code(r.error, r.error_message) if r.error else None
            )
            for r in resp.results
        }

    def list_offsets(
        self, specs: Mapping[TopicPartition, OffsetSpec]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Offsets by ``"earliest"``, ``"latest"``, ``"max_timestamp"`` or timestamp."""
        query: dict[TopicPartition, int] = {}
        for tp, spec in specs.items():
            if isinstance(spec, str):
                if spec not in _SPECS:
                    raise ValueError(f"offset spec must be one of {', '.join(_SPECS)} or a time")
                query[TopicPartition(*tp)] = _SPECS[spec]
            else:
                query[TopicPartition(*tp)] = spec
        return offsets.list_offsets(
            query,
            metadata=self._metadata,
            channels=self._channels,
            retry=self._retry,
            request_timeout_ms=self.request_timeout_ms,
            timeout_ms=self.default_api_timeout_ms,
        )

    # -- consumer groups (headwater.client.group.admin) ------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> list[ConsumerGroupListing]:
        """Every consumer group of the cluster, optionally only those in ``states``."""
        return self._groups.list_groups(states)

    def describe_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        """State, protocol, generation and members (with assignments) of each group."""
        return self._groups.describe_groups(group_ids)

    def delete_groups(
        self, group_ids: Iterable[str], *, raise_on_error: bool = True
    ) -> dict[str, errors.HeadwaterError | None]:
        """Delete empty groups and their committed offsets."""
        return self._groups.delete_groups(group_ids, raise_on_error=raise_on_error)

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """A group's committed offsets (all, or only those of ``partitions``)."""
        return self._groups.list_consumer_group_offsets(group_id, partitions)

    def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        """Set the committed offsets of a group that has no active members."""
        self._groups.alter_consumer_group_offsets(group_id, offsets)

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        self._channels.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
