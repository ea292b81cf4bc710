"""The broker process: wiring, startup recovery, serving, graceful shutdown.

Startup: the gRPC health service reports NOT_SERVING while the log manager
recovers the logs and the broker registers in ZooKeeper; it flips to SERVING
once the broker is registered (Kubernetes' readiness probe reads it).

Shutdown on SIGTERM/SIGINT, in Kafka's order: health to NOT_SERVING, a
*controlled shutdown* (ask the controller to move this broker's leaderships
away, retried ``controlled.shutdown.max.retries`` times), stop the replica
fetchers and the gRPC server, close the logs cleanly (so the next start skips
recovery), deregister from ZooKeeper, exit 0.

Threads: the asyncio loop runs everything here; the coordinator (kazoo, the
controller) has its own threads and reaches the loop only through gRPC, and
blocking ZooKeeper calls are made with :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from headwater import __version__, errors
from headwater.coordination import session
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import BrokerRegistration
from headwater.coordination.settings import CoordinationSettings
from headwater.errors import ErrorCode
from headwater.groups.placement import OFFSETS_TOPIC
from headwater.groups.runtime import GroupCoordinatorRuntime
from headwater.groups.values import GroupConfig
from headwater.replication import TopicPartition
from headwater.server.admin_service import AdminService
from headwater.server.broker_service import BrokerService, ProducerIdAllocator
from headwater.server.config import BrokerConfig
from headwater.server.control_service import ControlService
from headwater.server.controller_channel import GrpcControllerChannel
from headwater.server.fetcher import ReplicaFetcherManager, channel_options
from headwater.server.group_service import GroupService, replica_callables
from headwater.server.metadata_cache import MetadataCache
from headwater.server.metrics import BrokerMetrics, GroupOffset, RebalanceFigures
from headwater.server.replica_manager import ReplicaManager, wall_ms
from headwater.storage import LogConfig, LogManager
from headwater.storage.cleaner import LogCleaner
from headwater.v1 import (
    admin_pb2_grpc,
    broker_pb2_grpc,
    control_pb2,
    control_pb2_grpc,
    group_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    "headwater.v1.Broker",
    "headwater.v1.Admin",
    "headwater.v1.Control",
    "headwater.v1.Group",
)


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
        self._stop = asyncio.Event()
        self._leaders: dict[int, BrokerRegistration] = {}

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
            faulthandler.register(signal.SIGUSR2, all_threads=True)
        metadata_changed = asyncio.Condition()

        server = grpc.aio.server(options=channel_options(config.grpc_max_message_bytes))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        await self._set_health(False)
        listener = config.listener
        port = server.add_insecure_port(f"{listener.host or '0.0.0.0'}:{listener.port}")
        await server.start()
        log.info("broker %d listening on %s:%d", config.broker_id, listener.host, port)

        defaults = LogConfig.from_properties(config.log_config_properties())
        self.log_manager = await asyncio.to_thread(
            LogManager, config.log_dir_list, default_config=defaults
        )
        self.log_manager.start_scheduler(config.log_retention_check_interval_ms)

        replicas = ReplicaManager(
            broker_id=config.broker_id,
            log_manager=self.log_manager,
            isr_store=_LazyCoordinator(self),
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
            max_message_bytes=config.grpc_max_message_bytes,
        )
        replicas.on_follower_change = lambda changes: fetchers.add_partitions(
            changes, self._leaders
        )
        replicas.on_stop_follower = fetchers.remove_partitions
        self.metrics.register_state(
            partitions=replicas.snapshots,
            is_controller=lambda: self.coordinator is not None and self.coordinator.is_controller,
        )
        groups = self.groups = self._start_groups(replicas)
        group_pb2_grpc.add_GroupServicer_to_server(
            GroupService(
                runtime=groups,
                metadata=self.metadata,
                coordinator=lambda: self.coordinator,
                offsets_topic_replication_factor=config.offsets_topic_replication_factor,
            ),
            server,
        )
        broker_pb2_grpc.add_BrokerServicer_to_server(
            BrokerService(
                replicas=replicas,
                metadata=self.metadata,
                metrics=self.metrics,
                producer_ids=ProducerIdAllocator(config.broker_id, start_ms=wall_ms()),
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
                on_leaders=self._leaders.update,
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
            ),
            server,
        )
        if config.metrics_port:
            self.metrics.serve(config.metrics_port)
        isr_task = loop.create_task(replicas.run_isr_expiration())
        groups_task = loop.create_task(groups.run())
        cleaner_task = loop.create_task(self._run_log_cleaner(self.log_manager))
        try:
            await self._start_coordinator(port)
            await self._set_health(True)
            log.info("broker %d started", config.broker_id)
            await self._stop.wait()
            log.info("broker %d shutting down", config.broker_id)
            await self.health.enter_graceful_shutdown()
            if config.controlled_shutdown_enable:
                await self._controlled_shutdown()
        finally:
            isr_task.cancel()
            groups_task.cancel()
            cleaner_task.cancel()
            await groups.close()
            await fetchers.shutdown()
            replicas.shutdown()
            await server.stop(grace=1.0)
            await asyncio.to_thread(self.log_manager.shutdown)
            if self.coordinator is not None:
                await asyncio.to_thread(self.coordinator.stop)
        log.info("broker %d stopped", config.broker_id)
        return 0

    def _start_groups(self, replicas: ReplicaManager) -> GroupCoordinatorRuntime:
        """The group coordinator runtime, following this broker's offsets-topic leaderships."""
        config = self.config
        append, read = replica_callables(replicas, timeout_ms=config.offsets_commit_timeout_ms)
        runtime = GroupCoordinatorRuntime(
            num_partitions=config.offsets_topic_num_partitions,
            append=append,
            read=read,
            config=GroupConfig(
                group_min_session_timeout_ms=config.group_min_session_timeout_ms,
                group_max_session_timeout_ms=config.group_max_session_timeout_ms,
                group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                group_max_size=config.group_max_size,
                offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            ),
        )
        loads: set[asyncio.Future[None]] = set()

        def on_leadership_change(tp: TopicPartition, leader_epoch: int | None) -> None:
            if tp.topic != OFFSETS_TOPIC:
                return
            if leader_epoch is None:
                runtime.on_resign(tp.partition)
                return
            future = asyncio.ensure_future(runtime.on_become_leader(tp.partition, leader_epoch))
            loads.add(future)
            future.add_done_callback(loads.discard)

        replicas.on_leadership_change = on_leadership_change

        def end_offset(topic: str, partition: int) -> int | None:
            hosted = replicas.partitions.get(TopicPartition(topic, partition))
            return hosted.log.high_watermark if hosted is not None else None

        self.metrics.register_groups(
            committed=lambda: [
                GroupOffset(group, tp.topic, tp.partition, offset)
                for group, tp, offset in runtime.committed_offsets()
            ],
            end_offset=end_offset,
            rebalances=lambda: {
                group: RebalanceFigures(*figures)
                for group, figures in runtime.rebalance_stats().items()
            },
        )
        return runtime

    async def _run_log_cleaner(self, log_manager: LogManager) -> None:
        """Compact ``cleanup.policy=compact`` logs every ``log.cleaner.backoff.ms``."""
        if not self.config.log_cleaner_enable:
            return
        cleaner = LogCleaner()
        while True:
            await asyncio.sleep(self.config.log_cleaner_backoff_ms / 1000.0)
            try:
                stats = await asyncio.to_thread(
                    cleaner.maybe_clean, log_manager.logs(), now_ms=wall_ms()
                )
            except Exception:
                log.exception("log cleaner pass failed")
                continue
            if stats.segments_rewritten:
                log.info("log cleaner: %s", stats)

    async def _start_coordinator(self, port: int) -> None:
        config = self.config
        advertised = config.advertised_listener
        settings = CoordinationSettings.from_properties(
            {
                **config.to_properties(),
                "zookeeper.connect": config.zookeeper_hosts + config.zookeeper_chroot,
            }
        )
        channel = GrpcControllerChannel(
            controller_id=config.broker_id,
            timeout_ms=config.controller_socket_timeout_ms,
            max_message_bytes=config.grpc_max_message_bytes,
        )
        coordinator = BrokerCoordinator(
            settings,
            broker=BrokerRegistration(
                broker_id=config.broker_id,
                host=advertised.host,
                port=advertised.port or port,
                rack=config.broker_rack or None,
                version=__version__,
                protocol_version=config.inter_broker_protocol_version,
            ),
            channel=channel,
            config_validator=_validate_topic_config,
        )
        await asyncio.to_thread(coordinator.start)
        channel.cluster_id = coordinator.cluster_id
        self.coordinator = coordinator

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships; bounded retries (Kafka's behaviour)."""
        config = self.config
        coordinator = self.coordinator
        if coordinator is None:
            return
        for attempt in range(1, config.controlled_shutdown_max_retries + 1):
            try:
                remaining = await self._controlled_shutdown_once(coordinator)
                if remaining == 0:
                    log.info("controlled shutdown succeeded")
                    return
                log.info(
                    "controlled shutdown: %d partitions remain (attempt %d)", remaining, attempt
                )
            except Exception as exc:
                log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
            await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000.0)
        log.warning("controlled shutdown did not complete; shutting down anyway")

    async def _controlled_shutdown_once(self, coordinator: BrokerCoordinator) -> int:
        broker_id, epoch = self.config.broker_id, coordinator.broker_epoch
        if coordinator.is_controller:
            remaining = await asyncio.to_thread(
                coordinator.controller.controlled_shutdown, broker_id, epoch
            )
            return len(remaining)
        controller_id = await asyncio.to_thread(coordinator.controller_id)
        if controller_id is None:
            raise errors.NotControllerError("no active controller")
        brokers = (await asyncio.to_thread(coordinator.describe_cluster)).brokers
        target = next((b for b in brokers if b.broker_id == controller_id), None)
        if target is None:
            raise errors.NotControllerError(f"controller {controller_id} is not registered")
        timeout_s = self.config.controller_socket_timeout_ms / 1000.0
        async with grpc.aio.insecure_channel(f"{target.host}:{target.port}") as channel:
            stub = control_pb2_grpc.ControlStub(channel)
            response = await stub.ControlledShutdown(
                control_pb2.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch),
                timeout=timeout_s,
            )
        if ErrorCode(response.error) is not ErrorCode.NONE:
            raise errors.for_code(response.error, response.error_message)
        return len(response.remaining_partitions)

    def _expire_session_for_tests(self) -> None:
        """SIGUSR1 with test hooks: expire our own ZooKeeper session (headwater.testing)."""
        coordinator = self.coordinator
        if coordinator is None:
            return

        def expire() -> None:
            try:
                session.expire_session(coordinator.store.client)
                log.info("ZooKeeper session expired on request and re-established")
            except Exception as exc:
                log.warning("session expiry hook failed: %s", exc)

        threading.Thread(target=expire, name="expire-session", daemon=True).start()


def _validate_topic_config(props: Mapping[str, str]) -> None:
    LogConfig.from_properties(props)


class _LazyCoordinator:
    """The ISR store, resolved when used (the coordinator starts after the logs)."""

    def __init__(self, server: BrokerServer) -> None:
        self._server = server

    def _get(self) -> BrokerCoordinator:
        coordinator = self._server.coordinator
        if coordinator is None:
            raise errors.BrokerNotAvailableError("not connected to ZooKeeper yet")
        return coordinator

    def update_isr(self, topic: str, partition: int, lai: Any, expected_zk_version: int) -> Any:
        return self._get().update_isr(topic, partition, lai, expected_zk_version)

    def watch_topic_config(
        self, topic: str, callback: Callable[[str, dict[str, str]], None]
    ) -> Callable[[], None]:
        return self._get().watch_topic_config(topic, callback)

    def get_topic_config(self, topic: str) -> Mapping[str, str]:
        coordinator = self._server.coordinator
        return coordinator.get_topic_config(topic) if coordinator is not None else {}


def run_broker(config: BrokerConfig, *, test_hooks: bool = False) -> int:
    """Run one broker until SIGTERM; returns the exit code."""
    return asyncio.run(BrokerServer(config, test_hooks=test_hooks).run())
