"""The broker process's composition root: it builds the runtime and wires it together.

Startup: every servicer is registered before the gRPC server starts (the
Headwater services answer UNAVAILABLE until the replica manager exists, see
:mod:`headwater.server.startup`); the health service reports NOT_SERVING while
the log manager recovers the logs, the broker registers in ZooKeeper (waiting
out a previous run's registration if need be) and the controller sends it
UpdateMetadata and the LeaderAndIsr for its replicas; only then SERVING
(Kubernetes' readiness probe and the roll engine read it).

Shutdown on SIGTERM/SIGINT, in Kafka's order: health to NOT_SERVING, a
*controlled shutdown* (:mod:`headwater.server.runtime.controlled_shutdown`),
stop the periodic jobs, the group coordinator, the replica fetchers and the
gRPC server, close the logs cleanly (so the next start skips recovery),
deregister from ZooKeeper, exit 0.  Every step is bounded and an exit watchdog
halts a process whose shutdown still runs ``SHUTDOWN_TIMEOUT_S`` after the
controlled shutdown (:mod:`headwater.server.runtime.process`).

What runs where is in the runtime's modules (:mod:`headwater.server.runtime`)
and docs/architecture.md: the asyncio loop runs everything built here; the
coordinator (kazoo, the controller) has its own threads and reaches the loop
only through gRPC; blocking calls go through
:func:`headwater.server.runtime.offload.run_blocking`.  This module decides
nothing itself: it constructs, passes each object what it needs through its
constructor, and orders startup and shutdown.

Still reached through attributes set during startup: the ZooKeeper coordinator
(``coordinator``), which can only be started once the servicers are attached,
because registering makes the controller send this broker LeaderAndIsr.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from headwater import __version__, clock, interpreter
from headwater.coordination import reassignment_admin
from headwater.coordination.admin import NewTopic
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import BrokerRegistration
from headwater.coordination.settings import CoordinationSettings
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.placement import (
    OFFSETS_TOPIC,
    offsets_topic_configs,
    offsets_topic_replication_factor,
)
from headwater.kafka import server as kafka_server
from headwater.kafka.acl_apis import KafkaAclApis
from headwater.kafka.admin_apis import KafkaAdminApis
from headwater.kafka.apis import KafkaApis
from headwater.kafka.cluster_apis import KafkaClusterApis
from headwater.kafka.group_apis import KafkaGroupApis
from headwater.kafka.quota_apis import KafkaQuotaApis
from headwater.kafka.txn_apis import KafkaTxnApis
from headwater.kafka.user_apis import KafkaUserApis
from headwater.records.control import ControlRecordType
from headwater.server import host_metrics
from headwater.server.auth.acl_runtime import BrokerAuthorization
from headwater.server.auth.listener_auth import SessionLookup
from headwater.server.auth.sasl import SaslAuthentication
from headwater.server.client_quotas import BrokerClientQuotas
from headwater.server.config import BrokerConfig
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime import channels, listener_servers, process
from headwater.server.runtime.acl_admin import AclAdmin
from headwater.server.runtime.channels import inter_broker_security
from headwater.server.runtime.config_admin import ConfigAdmin
from headwater.server.runtime.controlled_shutdown import (
    ATTEMPT_TIMEOUT_MARGIN_S,
    ask_controller,
    controlled_shutdown,
)
from headwater.server.runtime.controller_channel import GrpcControllerChannel
from headwater.server.runtime.fetcher import ReplicaFetcherManager
from headwater.server.runtime.groups import (
    OffsetsLeadership,
    group_coordinator,
    group_end_offsets,
    register_group_metrics,
)
from headwater.server.runtime.internal_topics import InternalTopicCreator
from headwater.server.runtime.isr_store import ZooKeeperIsrStore
from headwater.server.runtime.jobs import periodic_jobs
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.runtime.role_changes import RoleChangeApplier
from headwater.server.runtime.scheduler import PeriodicScheduler
from headwater.server.runtime.transactions import (
    MarkerWriter,
    PeerChannels,
    TransactionStateLeadership,
    TransactionVerifier,
    transaction_coordinator,
)
from headwater.server.services import throttling
from headwater.server.services.acls import AclService
from headwater.server.services.admin import AdminService
from headwater.server.services.broker_service import (
    BrokerService,
    ProducerIdAllocator,
    add_broker_service,
)
from headwater.server.services.control import ControlService
from headwater.server.services.group import GroupService
from headwater.server.services.quotas import ClientQuotaAdminService
from headwater.server.services.sasl import SaslService, ScramAdminService
from headwater.server.services.transaction import TransactionService
from headwater.server.startup import DeferredServices, Readiness
from headwater.storage import LogConfig, LogManager
from headwater.transactions import placement as txn_placement
from headwater.transactions.coordinator_runtime import TransactionCoordinatorRuntime
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC
from headwater.v1 import (
    acls_pb2_grpc,
    admin_pb2_grpc,
    control_pb2_grpc,
    group_pb2_grpc,
    quotas_pb2_grpc,
    sasl_pb2_grpc,
    transaction_pb2_grpc,
)
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    "headwater.v1.Broker",
    "headwater.v1.Admin",
    "headwater.v1.Control",
    "headwater.v1.Group",
    "headwater.v1.Transaction",
    "headwater.v1.AclService",
    "headwater.v1.SaslService",
    "headwater.v1.ScramAdmin",
    "headwater.v1.ClientQuotaAdmin",
)

SHUTDOWN_TIMEOUT_S = 30.0
"""After the controlled shutdown, the rest of the shutdown must finish within this."""


class BrokerServer:
    """One broker; ``run()`` returns the process exit code."""

    def __init__(self, config: BrokerConfig, *, test_hooks: bool = False) -> None:
        self.config = config
        self.test_hooks = test_hooks
        self.metrics = BrokerMetrics()
        self.metadata = MetadataCache()
        self.health = HealthServicer()
        self.coordinator: BrokerCoordinator | None = None
        self.log_manager: LogManager | None = None
        self.groups: GroupCoordinatorRuntime | None = None
        self.transactions: TransactionCoordinatorRuntime | None = None
        self.replicas: ReplicaManager | None = None
        self.readiness = Readiness(config.broker_id)
        self._stop = asyncio.Event()
        self._controller_channel: GrpcControllerChannel | None = None
        self.authorization = BrokerAuthorization(config)
        self.sasl_sessions: SessionLookup | None = None
        """The SASL sessions SASL_* listeners check tokens against (set by the SASL setup)."""
        self._hooks: set[asyncio.Task[None]] = set()
        self.sasl = SaslAuthentication.from_config(config)
        """SASL exchanges, sessions and the SCRAM credential cache."""
        self.sasl_sessions = self.sasl.sessions
        self.client_quotas = BrokerClientQuotas(config)
        """Client quotas both front doors enforce, and their ZooKeeper store."""
        quotas = self.client_quotas.quotas
        self.metrics.register_client_quotas(
            lambda: ((str(k), u, c, f) for k, u, c, f in quotas.figures())
        )
        self.kafka_servers: list[kafka_server.KafkaServer] = []
        """The Kafka-protocol listeners (``kafka.listeners``), started with the runtime."""
        self.producer_ids = ProducerIdAllocator(config.broker_id, start_ms=clock.wall_ms())
        """One producer id allocator for both front doors (gRPC and Kafka)."""

    # -- lifecycle ------------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stop.set()

    async def _set_health(self, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ("", *SERVICE_NAMES):
            await self.health.set(name, status)

    async def run(self) -> int:
        config = self.config
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        if self.test_hooks:
            loop.add_signal_handler(signal.SIGUSR1, self._expire_session_for_tests)
            loop.add_signal_handler(signal.SIGUSR2, process.dump_stacks)
        metadata_changed = asyncio.Condition()

        # Everything is registered before start (gRPC refuses handlers added later); the
        # Headwater services answer UNAVAILABLE until attached below, health NOT_SERVING.
        # One gRPC server per listener, all with the same handlers (listener_servers).
        services = DeferredServices(SERVICE_NAMES)

        def register(server: grpc.aio.Server) -> None:
            health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
            server.add_generic_rpc_handlers((services,))

        await self._set_health(False)
        layout = config.listener_layout
        channels.configure_inter_broker(inter_broker_security(layout))
        listeners = await listener_servers.start_listeners(
            layout,
            register=register,
            options=channels.server_options(config.grpc_max_message_bytes),
            sessions=lambda: self.sasl_sessions,
            interceptors=[throttling.RequestQuotaInterceptor(self.client_quotas.quotas)],
        )

        defaults = LogConfig.from_properties(config.log_config_properties())
        log_manager = self.log_manager = await run_blocking(
            LogManager, config.log_dir_list, default_config=defaults
        )
        replicas = self.replicas = ReplicaManager(
            broker_id=config.broker_id,
            log_manager=log_manager,
            isr_store=ZooKeeperIsrStore(lambda: self.coordinator),
            metrics=self.metrics,
            min_insync_replicas=config.min_insync_replicas,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            default_log_properties=config.log_config_properties(),
            is_known_partition=self.metadata.contains,
        )
        fetchers = ReplicaFetcherManager(
            manager=replicas,
            broker_id=config.broker_id,
            max_bytes=config.replica_fetch_max_bytes,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            backoff_ms=config.replica_fetch_backoff_ms,
            socket_timeout_ms=config.replica_socket_timeout_ms,
            max_message_bytes=config.grpc_max_message_bytes,
        )
        self.metrics.register_state(
            partitions=replicas.snapshots,
            is_controller=lambda: self.coordinator is not None and self.coordinator.is_controller,
            reassigning_partitions=lambda: (
                self.coordinator.controller.reassigning_partitions
                if self.coordinator is not None and self.coordinator.is_controller
                else 0
            ),
        )
        self.metrics.register_host(
            disks=functools.partial(host_metrics.disks, tuple(config.log_dir_list)),
            certificates=functools.partial(
                host_metrics.certificates, tuple(config.listener_layout.listeners)
            ),
        )
        groups = self.groups = group_coordinator(
            config, replicas, partition_counts=self.metadata.partition_counts
        )
        txn_peers = PeerChannels()
        transactions = self.transactions = transaction_coordinator(
            config,
            replicas,
            write_markers=MarkerWriter(
                broker_id=config.broker_id,
                replicas=replicas,
                metadata=self.metadata,
                timeout_ms=config.offsets_commit_timeout_ms,
                peers=txn_peers,
            ),
            allocate_producer_id=self.producer_ids.next_id,
        )
        verifier = TransactionVerifier(
            broker_id=config.broker_id,
            runtime=transactions,
            metadata=self.metadata,
            peers=txn_peers,
        )
        replicas.verify_transaction = verifier
        replicas.add_to_transaction = verifier.add_partition
        replicas.on_marker_written = lambda tp, marker: (
            groups.complete_transaction(
                tp.partition,
                marker.producer_id,
                commit=marker.type is ControlRecordType.COMMIT,
            )
            if tp.topic == OFFSETS_TOPIC
            else None
        )
        offsets_leadership = OffsetsLeadership(groups).on_leadership
        txn_leadership = TransactionStateLeadership(transactions).on_leadership

        def on_leadership(tp: TopicPartition, leader_epoch: int | None) -> None:
            offsets_leadership(tp, leader_epoch)
            txn_leadership(tp, leader_epoch)

        role_changes = RoleChangeApplier(fetchers=fetchers, on_leadership=on_leadership)
        end_offsets = group_end_offsets(
            groups,
            replicas=replicas,
            leader_address=self._leader_address,
            timeout_ms=config.controller_socket_timeout_ms,
        )
        register_group_metrics(self.metrics, groups, replicas=replicas, remote=end_offsets)
        create_offsets_topic = InternalTopicCreator(
            coordinator=lambda: self.coordinator,
            new_topic=lambda: NewTopic(
                name=OFFSETS_TOPIC,
                num_partitions=groups.num_partitions,
                replication_factor=offsets_topic_replication_factor(
                    config.offsets_topic_replication_factor, len(self.metadata.brokers)
                ),
                configs=offsets_topic_configs(),
            ),
        )

        def transaction_state() -> NewTopic:
            rf = txn_placement.replication_factor(
                config.transaction_state_log_replication_factor, len(self.metadata.brokers)
            )
            return NewTopic(
                name=TRANSACTION_STATE_TOPIC,
                num_partitions=transactions.num_partitions,
                replication_factor=rf,
                configs=txn_placement.topic_configs(
                    min_isr=config.transaction_state_log_min_isr, replication_factor=rf
                ),
            )

        create_transaction_state = InternalTopicCreator(
            coordinator=lambda: self.coordinator, new_topic=transaction_state
        )
        services.attach(
            lambda target: self._add_servicers(
                target,
                replicas=replicas,
                groups=groups,
                transactions=transactions,
                role_changes=role_changes,
                metadata_changed=metadata_changed,
                create_offsets_topic=create_offsets_topic,
                create_transaction_state=create_transaction_state,
            )
        )
        self.kafka_servers = await kafka_server.start_kafka_listeners(
            config.kafka_listener_configs,
            apis=lambda name: KafkaApis(
                listener=name,
                replicas=replicas,
                metadata=self.metadata,
                metrics=self.metrics,
                authz=self.authorization.authz,
                next_producer_id=self.producer_ids.next_id,
                groups=KafkaGroupApis(
                    listener=name,
                    groups=groups,
                    metadata=self.metadata,
                    authz=self.authorization.authz,
                    ensure_offsets_topic=create_offsets_topic,
                ),
                admin=KafkaAdminApis(
                    coordinator=lambda: self.coordinator,
                    metadata=self.metadata,
                    authz=self.authorization.authz,
                    configs=ConfigAdmin(
                        coordinator=lambda: self.coordinator,
                        config=config,
                        authz=self.authorization.authz,
                    ),
                ),
                cluster=KafkaClusterApis(
                    coordinator=lambda: self.coordinator,
                    log_manager=lambda: self.log_manager,
                    authz=self.authorization.authz,
                ),
                acls=KafkaAclApis(
                    acls=AclAdmin(
                        store=lambda: self.authorization.store,
                        authz=self.authorization.authz,
                        refresh=self.authorization.refresh,
                    )
                ),
                transactions=KafkaTxnApis(
                    listener=name,
                    runtime=transactions,
                    groups=groups,
                    replicas=replicas,
                    metadata=self.metadata,
                    authz=self.authorization.authz,
                    is_known_partition=self.metadata.contains,
                    offsets_partition=lambda group_id: TopicPartition(
                        OFFSETS_TOPIC, groups.partition_for(group_id)
                    ),
                    ensure_transaction_state=create_transaction_state,
                ),
                users=KafkaUserApis(store=lambda: self.sasl.store, authz=self.authorization.authz),
                quotas=KafkaQuotaApis(
                    store=lambda: self.client_quotas.store, authz=self.authorization.authz
                ),
            ),
            quotas=self.client_quotas.quotas,
            max_request_bytes=config.socket_request_max_bytes,
            sasl=kafka_server.SaslSettings(
                new_server=self.sasl.exchanges.new_server,
                reauth_ms=config.connections_max_reauth_ms,
            ),
        )
        if config.metrics_port:
            self.metrics.serve(config.metrics_port)
        scheduler = PeriodicScheduler()
        for job in periodic_jobs(
            config,
            replicas=replicas,
            groups=groups,
            group_end_offsets=end_offsets,
            transactions=transactions,
        ):
            scheduler.start(job)
        try:
            if not await self._start_coordinator_unless_stopped(listeners):
                return 0
            if self.coordinator is not None:  # dynamic replication throttles (KIP-73)
                await replicas.quotas.watch(
                    functools.partial(
                        reassignment_admin.watch_broker_config, self.coordinator.store
                    )
                )
            await self._on_control_applied("registered", -1)
            log.info(
                "broker %d started; ready once the controller's metadata arrives", config.broker_id
            )
            await self._stop.wait()
            log.info("broker %d shutting down", config.broker_id)
            await self.health.enter_graceful_shutdown()
            fetchers.begin_shutdown()
            if config.controlled_shutdown_enable and self.coordinator is not None:
                await controlled_shutdown(
                    ask_controller(
                        self.coordinator,
                        broker_id=config.broker_id,
                        timeout_ms=config.controller_socket_timeout_ms,
                    ),
                    max_retries=config.controlled_shutdown_max_retries,
                    attempt_timeout_s=config.controller_socket_timeout_ms / 1000.0
                    + ATTEMPT_TIMEOUT_MARGIN_S,
                    backoff_ms=config.controlled_shutdown_retry_backoff_ms,
                )
        finally:
            process.start_exit_watchdog(config.broker_id, SHUTDOWN_TIMEOUT_S)
            stopping_at = time.monotonic()
            await process.bounded("stopping the periodic jobs", scheduler.close(), 10.0)
            await process.bounded("closing the group coordinator", groups.close(), 3.0)
            await process.bounded("closing the transaction coordinator", transactions.close(), 3.0)
            await process.bounded("closing the marker channels", txn_peers.close(), 3.0)
            # Release delayed produces and long polls, then stop serving (so no
            # LeaderAndIsr can start a fetcher any more), then stop the fetchers.
            replicas.shutdown()
            replicas.quotas.shutdown()
            await process.bounded(
                "stopping the gRPC servers",
                listener_servers.stop_listeners(listeners, grace_s=1.0),
                3.0,
            )
            await process.bounded(
                "stopping the Kafka listeners",
                kafka_server.stop_kafka_listeners(self.kafka_servers),
                3.0,
            )
            await process.bounded("stopping the replica fetchers", fetchers.shutdown(), 3.0)
            await process.bounded("closing the logs", run_blocking(log_manager.shutdown), 15.0)
            await process.bounded(
                "stopping the authorizer", run_blocking(self.authorization.stop), 5.0
            )
            await process.bounded("stopping the SCRAM cache", run_blocking(self.sasl.stop), 5.0)
            await process.bounded(
                "stopping the client quota watcher", run_blocking(self.client_quotas.stop), 5.0
            )
            if self.coordinator is not None:
                # Closing the controller's channels first cancels any send still waiting
                # on a broker (this one has stopped serving), so resigning does not wait.
                if self._controller_channel is not None:
                    self._controller_channel.close()
                await process.bounded(
                    "leaving ZooKeeper", run_blocking(self.coordinator.stop), 10.0
                )
            log.info(
                "broker %d stopped in %.1f s", config.broker_id, time.monotonic() - stopping_at
            )
        return 0

    def _add_servicers(
        self,
        server: Any,
        *,
        replicas: ReplicaManager,
        groups: GroupCoordinatorRuntime,
        transactions: TransactionCoordinatorRuntime,
        role_changes: RoleChangeApplier,
        metadata_changed: asyncio.Condition,
        create_offsets_topic: Callable[[], None],
        create_transaction_state: Callable[[], None],
    ) -> None:
        config = self.config
        group_pb2_grpc.add_GroupServicer_to_server(
            GroupService(
                runtime=groups,
                metadata=self.metadata,
                coordinator=lambda: self.coordinator,
                ensure_offsets_topic=create_offsets_topic,
                authz=self.authorization.authz,
                transactions=transactions,
                ensure_transaction_state=create_transaction_state,
            ),
            server,
        )
        add_broker_service(
            BrokerService(
                replicas=replicas,
                metadata=self.metadata,
                metrics=self.metrics,
                producer_ids=self.producer_ids,
                authz=self.authorization.authz,
                transactions=transactions,
                quotas=self.client_quotas.quotas,
            ),
            server,
        )
        transaction_pb2_grpc.add_TransactionServicer_to_server(
            TransactionService(
                runtime=transactions,
                groups=groups,
                replicas=replicas,
                is_known_partition=self.metadata.contains,
                offsets_partition=lambda group_id: TopicPartition(
                    OFFSETS_TOPIC, groups.partition_for(group_id)
                ),
                authz=self.authorization.authz,
            ),
            server,
        )
        control_pb2_grpc.add_ControlServicer_to_server(
            ControlService(
                replicas=replicas,
                metadata=self.metadata,
                metadata_changed=metadata_changed,
                metrics=self.metrics,
                coordinator=lambda: self.coordinator,
                on_leaders=role_changes.update_leaders,
                on_role_changes=role_changes.apply,
                on_applied=self._on_control_applied,
                authz=self.authorization.authz,
            ),
            server,
        )
        admin_pb2_grpc.add_AdminServicer_to_server(
            AdminService(
                coordinator=lambda: self.coordinator,
                metadata=self.metadata,
                metadata_changed=metadata_changed,
                metrics=self.metrics,
                config=config,
                authz=self.authorization.authz,
                log_manager=lambda: self.log_manager,
            ),
            server,
        )
        acls_pb2_grpc.add_AclServiceServicer_to_server(
            AclService(
                store=lambda: self.authorization.store,
                authz=self.authorization.authz,
                refresh=self.authorization.refresh,
                metrics=self.metrics,
            ),
            server,
        )
        sasl_pb2_grpc.add_SaslServiceServicer_to_server(
            SaslService(exchanges=self.sasl.exchanges, mechanisms_for=self.sasl.mechanisms_for),
            server,
        )
        sasl_pb2_grpc.add_ScramAdminServicer_to_server(
            ScramAdminService(store=lambda: self.sasl.store, authz=self.authorization.authz),
            server,
        )
        quotas_pb2_grpc.add_ClientQuotaAdminServicer_to_server(
            ClientQuotaAdminService(
                store=lambda: self.client_quotas.store, authz=self.authorization.authz
            ),
            server,
        )

    async def _on_control_applied(self, rpc: str, broker_epoch: int) -> None:
        """Registration, UpdateMetadata or LeaderAndIsr applied: maybe report SERVING."""
        readiness = self.readiness
        if readiness.ready or self._stop.is_set():
            return
        coordinator = self.coordinator
        if coordinator is not None:
            readiness.on_registered(coordinator.broker_epoch)
        if rpc == "UpdateMetadata":
            readiness.on_update_metadata(broker_epoch)
        hosted = self.replicas.hosted_partitions() if self.replicas is not None else frozenset()
        if readiness.evaluate(self.metadata.topics, hosted):
            process.freeze_startup_objects()
            await self._set_health(True)
            log.info("broker %d is ready (SERVING)", self.config.broker_id)

    def _leader_address(self, tp: TopicPartition) -> str | None:
        """``host:port`` of ``tp``'s leader when it is another live broker, else None."""
        leader = self.metadata.leader_of(tp)
        b = self.metadata.brokers.get(leader)
        return f"{b.host}:{b.port}" if b is not None and leader != self.config.broker_id else None

    async def _start_coordinator_unless_stopped(
        self, listeners: Sequence[listener_servers.BoundListener]
    ) -> bool:
        """Start the coordinator; False if a stop was requested first (e.g. while waiting
        for a previous session's registration to expire)."""
        starting = asyncio.ensure_future(self._start_coordinator(listeners))
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if starting.done():
            starting.result()
            return True
        starting.cancel()
        log.info("broker %d: stop requested during startup", self.config.broker_id)
        return False

    async def _start_coordinator(self, listeners: Sequence[listener_servers.BoundListener]) -> None:
        config = self.config
        inter_broker = config.listener_layout.inter_broker
        advertised = next(b for b in listeners if b.config.name == inter_broker).advertised
        endpoints, protocol_map = listener_servers.registered_endpoints(listeners)
        if self.kafka_servers:
            endpoints, protocol_map = kafka_server.registration_endpoints(
                [b.advertised for b in listeners], self.kafka_servers
            )
        settings = CoordinationSettings.from_properties(
            {
                **config.to_properties(),
                "zookeeper.connect": config.zookeeper_hosts + config.zookeeper_chroot,
            }
        )
        coordinator: BrokerCoordinator | None = None
        channel = GrpcControllerChannel(
            controller_id=config.broker_id,
            timeout_ms=config.controller_socket_timeout_ms,
            max_message_bytes=config.grpc_max_message_bytes,
            # The cluster id is read from ZooKeeper by ``coordinator.start()``, before its
            # controller can send anything.
            cluster_id=lambda: coordinator.cluster_id if coordinator is not None else "",
        )
        coordinator = BrokerCoordinator(
            settings,
            broker=BrokerRegistration(
                broker_id=config.broker_id,
                host=advertised.host,
                port=advertised.port,
                endpoints=endpoints,
                security_protocol_map=protocol_map,
                rack=config.broker_rack or None,
                version=__version__,
                protocol_version=config.inter_broker_protocol_version,
            ),
            channel=channel,
            config_validator=_validate_topic_config,
        )
        # The ACLs are loaded before registering: the controller's first requests are checked.
        await run_blocking(self.authorization.start, settings)
        await run_blocking(coordinator.start)
        self._controller_channel = channel
        self.coordinator = coordinator
        await run_blocking(self.sasl.start, coordinator)
        await run_blocking(self.client_quotas.start, coordinator)

    def _expire_session_for_tests(self) -> None:
        """SIGUSR1 with test hooks: expire our own ZooKeeper session (headwater.testing)."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        task = asyncio.get_running_loop().create_task(process.expire_session(coordinator))
        self._hooks.add(task)
        task.add_done_callback(self._hooks.discard)


def _validate_topic_config(props: Mapping[str, str]) -> None:
    LogConfig.from_properties(props)


def run_broker(config: BrokerConfig, *, test_hooks: bool = False) -> int:
    """Run one broker until SIGTERM; returns the exit code."""
    interpreter.tune_switch_interval()  # the event loop shares the GIL with grpc's threads
    return asyncio.run(BrokerServer(config, test_hooks=test_hooks).run())
