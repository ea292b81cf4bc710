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

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from headwater import errors
from headwater.client.admin.acls import AclAdmin
from headwater.client.admin.core import AdminCore
from headwater.client.admin.log_dirs import LogDirsAdmin
from headwater.client.admin.quotas import (
    Entity,
    QuotaAdmin,
    QuotaAlteration,
    QuotaFilterComponent,
)
from headwater.client.admin.reassignments import ReassignmentsAdmin
from headwater.client.admin.rebalance import RebalanceAdmin
from headwater.client.admin.scram import ScramAdmin
from headwater.client.admin.transactions import (
    ProducerState,
    TransactionDescription,
    TransactionListing,
    TransactionsAdmin,
)
from headwater.client.admin.values import (
    ClusterDescription,
    ConfigEntry,
    LogDirs,
    NewTopic,
    OffsetSpec,
    PartitionReassignment,
    ScramDeletion,
    ScramUpsertion,
    TopicDescription,
    UserScramCredentialsDescription,
)
from headwater.client.consumer import offsets
from headwater.client.group.admin import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    GroupAdmin,
)
from headwater.client.group.listener import OffsetAndMetadata
from headwater.client.reassignment import (
    BrokerInfo,
    ReassignmentPlan,
    RebalanceGoals,
    RebalancePlan,
    VerifyResult,
)
from headwater.client.settings import parse_bootstrap
from headwater.client.transport import connection
from headwater.client.transport import security as client_security
from headwater.client.transport.metadata import MetadataManager
from headwater.client.transport.security import ClientSecurity
from headwater.client.types import (
    OffsetAndTimestamp,
    TopicPartition,
)
from headwater.retry import RetryPolicy
from headwater.security.acls import AclBinding, AclBindingFilter
from headwater.v1 import admin_pb2, common_pb2

T = TypeVar("T")


_admin_ids = itertools.count(1)
"""N of the default ``client_id`` ``adminclient-N``."""

_SPECS = {"earliest": -2, "latest": -1, "max_timestamp": -3}


class Admin:
    """Administers a cluster; thread-safe.

    Topics, configs, offsets, groups and the cluster are its own calls; the other areas
    are classes over its :class:`~headwater.client.admin.core.AdminCore` (and, for
    rebalancing, over its own calls), which it delegates to.
    """

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
        client_id: str | None = None,
    ) -> None:
        """``client_id``: Kafka's ``client.id``, sent with every call to the brokers (which
        apply client quotas by it); any printable-ASCII string.  None: ``adminclient-N``,
        N counting this process's admin clients from 1, as Kafka's default."""
        self.bootstrap_servers = parse_bootstrap(bootstrap_servers)
        self.request_timeout_ms = request_timeout_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self._retry = RetryPolicy(
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=max(retry_backoff_ms, retry_backoff_max_ms),
        )
        self.client_id = f"adminclient-{next(_admin_ids)}" if client_id is None else client_id
        self._channels = connection.Channels(
            client_id=self.client_id,
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
            ),
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
        self._core = AdminCore(
            bootstrap_servers=self.bootstrap_servers,
            request_timeout_ms=request_timeout_ms,
            default_api_timeout_ms=default_api_timeout_ms,
            retry=self._retry,
            channels=self._channels,
            metadata=self._metadata,
        )
        self._acls = AclAdmin(self._core)
        self._transactions = TransactionsAdmin(
            channels=self._channels,
            metadata=self._metadata,
            bootstrap=self.bootstrap_servers,
            request_timeout_ms=request_timeout_ms,
        )
        self._log_dirs = LogDirsAdmin(self._core)
        self._reassignments = ReassignmentsAdmin(self._core)
        self._scram = ScramAdmin(self._core)
        self._quotas = QuotaAdmin(self._core)
        self._rebalance = RebalanceAdmin(self)

    # -- ACLs (AclAdmin) ---------------------------------------------------------------

    def create_acls(self, bindings: Iterable[AclBinding]) -> list[errors.HeadwaterError | None]:
        """Create each ACL; one error (or None) per binding, in order.

        See :meth:`AclAdmin.create_acls`."""
        return self._acls.create_acls(bindings)

    def describe_acls(self, filter: AclBindingFilter) -> list[AclBinding]:
        """The ACLs ``filter`` matches (``AclBindingFilter.any()``: all of them).

        See :meth:`AclAdmin.describe_acls`."""
        return self._acls.describe_acls(filter)

    def delete_acls(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every ACL each filter matches; per filter, the ACLs it deleted.

        See :meth:`AclAdmin.delete_acls`."""
        return self._acls.delete_acls(filters)

    # -- log dirs (LogDirsAdmin) -------------------------------------------------------

    def describe_log_dirs(
        self,
        brokers: Iterable[int] | None = None,
        *,
        topics: Mapping[str, Sequence[int]] | Iterable[str] | None = None,
    ) -> dict[int, LogDirs]:
        """Every log dir of each of ``brokers`` (None: every live broker), by broker id.

        See :meth:`LogDirsAdmin.describe_log_dirs`."""
        return self._log_dirs.describe_log_dirs(brokers, topics=topics)

    def describe_log_dirs_each(
        self,
        brokers: Iterable[int] | None = None,
        *,
        topics: Mapping[str, Sequence[int]] | Iterable[str] | None = None,
    ) -> dict[int, LogDirs | errors.HeadwaterError]:
        """As :meth:`describe_log_dirs`, but each broker's error is returned, not raised.

        See :meth:`LogDirsAdmin.describe_log_dirs_each`."""
        return self._log_dirs.describe_log_dirs_each(brokers, topics=topics)

    # -- reassignments and replication throttles (ReassignmentsAdmin) ------------------

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        *,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Move each partition to its target replicas (preferred leader first); None cancels.

        See :meth:`ReassignmentsAdmin.alter_partition_reassignments`."""
        return self._reassignments.alter_partition_reassignments(
            reassignments, timeout_ms=timeout_ms
        )

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The partitions being moved (of ``partitions``, if given), with their replicas.

        See :meth:`ReassignmentsAdmin.list_partition_reassignments`."""
        return self._reassignments.list_partition_reassignments(partitions)

    def alter_broker_configs(
        self, broker_id: int | None, configs: Mapping[str, str | None]
    ) -> None:
        """Set (or, with a None value, delete) dynamic configs of a broker or the default.

        See :meth:`ReassignmentsAdmin.alter_broker_configs`."""
        return self._reassignments.alter_broker_configs(broker_id, configs)

    def describe_broker_configs(self, broker_id: int | None = None) -> dict[str, ConfigEntry]:
        """A broker's configs (static and dynamic, with their source) or, for None, the
        cluster-wide dynamic defaults.

        See :meth:`ReassignmentsAdmin.describe_broker_configs`."""
        return self._reassignments.describe_broker_configs(broker_id)

    # -- SCRAM credentials (ScramAdmin) ------------------------------------------------

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, *, raise_on_error: bool = True
    ) -> dict[str, UserScramCredentialsDescription | errors.HeadwaterError]:
        """Each user's mechanisms and iteration counts (``None``: every user with one).

        See :meth:`ScramAdmin.describe_user_scram_credentials`."""
        return self._scram.describe_user_scram_credentials(users, raise_on_error=raise_on_error)

    def alter_user_scram_credentials(
        self,
        upsertions: Iterable[ScramUpsertion] = (),
        deletions: Iterable[ScramDeletion] = (),
        *,
        raise_on_error: bool = True,
    ) -> dict[str, errors.HeadwaterError | None]:
        """Set and delete credentials; each user's error (None: done).

        See :meth:`ScramAdmin.alter_user_scram_credentials`."""
        return self._scram.alter_user_scram_credentials(
            upsertions, deletions, raise_on_error=raise_on_error
        )

    # -- client quotas (QuotaAdmin) ------------------------------------------------------

    def describe_client_quotas(
        self, components: Iterable[QuotaFilterComponent] = (), *, strict: bool = False
    ) -> dict[Entity, dict[str, float]]:
        """Quotas per entity. See :meth:`QuotaAdmin.describe_client_quotas`."""
        return self._quotas.describe_client_quotas(components, strict=strict)

    def alter_client_quotas(
        self,
        alterations: Iterable[QuotaAlteration],
        *,
        validate_only: bool = False,
        raise_on_error: bool = True,
    ) -> dict[Entity, errors.HeadwaterError | None]:
        """Set and remove quotas. See :meth:`QuotaAdmin.alter_client_quotas`."""
        return self._quotas.alter_client_quotas(
            alterations, validate_only=validate_only, raise_on_error=raise_on_error
        )

    # -- rebalancing and decommissioning (RebalanceAdmin) ------------------------------

    def broker_infos(self) -> list[BrokerInfo]:
        """The live brokers with their racks.

        See :meth:`RebalanceAdmin.broker_infos`."""
        return self._rebalance.broker_infos()

    def current_assignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Every partition's replicas (internal topics included), preferred leader first.

        See :meth:`RebalanceAdmin.current_assignment`."""
        return self._rebalance.current_assignment()

    def estimate_partition_sizes(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Each partition's bytes: measured by DescribeLogDirs, else estimated (module doc).

        See :meth:`RebalanceAdmin.estimate_partition_sizes`."""
        return self._rebalance.estimate_partition_sizes(partitions)

    def plan_rebalance(
        self,
        *,
        brokers: Sequence[int] | None = None,
        sizes: Mapping[TopicPartition, int] | None = None,
        goals: RebalanceGoals | None = None,
    ) -> RebalancePlan:
        """A plan that evens replicas, bytes and preferred leaders over ``brokers``.

        See :meth:`RebalanceAdmin.plan_rebalance`."""
        return self._rebalance.plan_rebalance(brokers=brokers, sizes=sizes, goals=goals)

    def plan_drain(
        self, broker_id: int, *, sizes: Mapping[TopicPartition, int] | None = None
    ) -> RebalancePlan:
        """A plan moving every replica off ``broker_id`` (which may be down), nothing else.

        See :meth:`RebalanceAdmin.plan_drain`."""
        return self._rebalance.plan_drain(broker_id, sizes=sizes)

    def generate_reassignment(
        self, topics: Sequence[str], brokers: Sequence[int], *, seed: int | None = None
    ) -> tuple[ReassignmentPlan, ReassignmentPlan]:
        """``--generate``: the (current, proposed) plans placing ``topics`` over ``brokers``.

        See :meth:`RebalanceAdmin.generate_reassignment`."""
        return self._rebalance.generate_reassignment(topics, brokers, seed=seed)

    def check_reassignment(self, plan: ReassignmentPlan) -> None:
        """Refuse (Kafka's errors) a plan naming unknown topics, partitions or brokers.

        See :meth:`RebalanceAdmin.check_reassignment`."""
        return self._rebalance.check_reassignment(plan)

    def execute_reassignment(
        self,
        plan: ReassignmentPlan | RebalancePlan,
        *,
        throttle_bytes_per_s: int | None = None,
        timeout_ms: int | None = None,
        raise_on_error: bool = True,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Start moving the plan's partitions; with a throttle, set it first (see module).

        See :meth:`RebalanceAdmin.execute_reassignment`."""
        return self._rebalance.execute_reassignment(
            plan,
            throttle_bytes_per_s=throttle_bytes_per_s,
            timeout_ms=timeout_ms,
            raise_on_error=raise_on_error,
        )

    def verify_reassignment(
        self,
        plan: ReassignmentPlan | RebalancePlan,
        *,
        preserve_throttles: bool = False,
        settle_s: float = 2.0,
    ) -> VerifyResult:
        """Each partition complete, in progress or failed; throttles removed when all complete.

        See :meth:`RebalanceAdmin.verify_reassignment`."""
        return self._rebalance.verify_reassignment(
            plan, preserve_throttles=preserve_throttles, settle_s=settle_s
        )

    def cancel_reassignment(
        self,
        plan: ReassignmentPlan | RebalancePlan,
        *,
        preserve_throttles: bool = False,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Cancel the plan's ongoing moves (back to the original replicas); throttles removed.

        See :meth:`RebalanceAdmin.cancel_reassignment`."""
        return self._rebalance.cancel_reassignment(plan, preserve_throttles=preserve_throttles)

    # -- plumbing -------------------------------------------------------------------

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
        resp = self._core.admin_call("CreateTopics", request)
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
        resp = self._core.admin_call("DeleteTopics", request)
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
        resp = self._core.admin_call("CreatePartitions", request)
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
        resp = self._core.admin_call(
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
        resp = self._core.admin_call("AlterConfigs", request)
        for r in resp.results:
            if r.error:
                raise errors.for_code(r.error, r.error_message or f"configs of {topic!r}")

    # -- cluster --------------------------------------------------------------------

    def describe_cluster(self) -> ClusterDescription:
        return self._core.describe_cluster()

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
        resp = self._core.admin_call("ElectLeaders", request)
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

    # -- transactions (TransactionsAdmin) ---------------------------------------------

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer id and epoch, timeout, start and partitions of each id."""
        self._metadata.maybe_refresh()
        return self._transactions.describe_transactions(transactional_ids)

    def list_transactions(
        self,
        *,
        states: Iterable[str] = (),
        producer_ids: Iterable[int] = (),
        duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """Every transactional id of the cluster passing the filters (all by default)."""
        self._metadata.maybe_refresh()
        return self._transactions.list_transactions(
            states=states, producer_ids=producer_ids, duration_ms=duration_ms
        )

    def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        """The active (idempotent and transactional) producers of each partition, with
        the start offset of the transaction each has open there."""
        return self._transactions.describe_producers(partitions)

    def abort_transaction(
        self, partition: TopicPartition, *, producer_id: int, producer_epoch: int
    ) -> None:
        """Abort a hanging transaction in one partition (Kafka's ``abortTransaction``)."""
        self._transactions.abort_transaction(
            partition, producer_id=producer_id, producer_epoch=producer_epoch
        )

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
