"""The broker process: wiring, startup recovery, serving, graceful shutdown.

Startup: every servicer is registered before the gRPC server starts (the
Headwater services answer UNAVAILABLE until the replica manager exists, see
:mod:`headwater.server.startup`); the health service reports NOT_SERVING while
the log manager recovers the logs, the broker registers in ZooKeeper (waiting
out a previous run's registration if need be) and the controller sends it
UpdateMetadata and the LeaderAndIsr for its replicas; only then SERVING
(Kubernetes' readiness probe and the roll engine read it).

Shutdown on SIGTERM/SIGINT, in Kafka's order: health to NOT_SERVING, a
*controlled shutdown* (ask the controller to move this broker's leaderships
away, retried ``controlled.shutdown.max.retries`` times), stop the replica
fetchers and the gRPC server, close the logs cleanly (so the next start skips
recovery), deregister from ZooKeeper, exit 0.

Threads: the asyncio loop runs everything here; the coordinator (kazoo, the
controller) has its own threads and reaches the loop only through gRPC, and
blocking ZooKeeper and disk calls are made in daemon threads
(:func:`headwater.server.runtime.offload.run_blocking`), so a
call stuck on an unreachable ZooKeeper can neither hold up the shutdown nor
keep the process from exiting.

Every shutdown step is bounded (``_bounded``) and an exit watchdog halts a
process whose shutdown still runs ``SHUTDOWN_TIMEOUT_S`` after the controlled
shutdown: a broker told to stop always exits in bounded time.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from headwater import __version__, errors, runtime
from headwater.coordination import session
from headwater.coordination.broker import BrokerCoordinator
from headwater.coordination.model import BrokerRegistration
from headwater.coordination.settings import CoordinationSettings
from headwater.errors import ErrorCode
from headwater.groups.placement import OFFSETS_TOPIC
from headwater.groups.runtime import GroupCoordinatorRuntime
from headwater.groups.values import GroupConfig
from headwater.replication import TopicPartition
from headwater.server.config import BrokerConfig
from headwater.server.group_lag import REFRESH_INTERVAL_S, RemoteEndOffsets, list_latest
from headwater.server.metrics import BrokerMetrics, GroupOffset, RebalanceFigures
from headwater.server.runtime.channels import channel_options
from headwater.server.runtime.controller_channel import GrpcControllerChannel
from headwater.server.runtime.fetcher import ReplicaFetcherManager
from headwater.server.runtime.hosted import RoleChanges, wall_ms
from headwater.server.runtime.isr_store import ZooKeeperIsrStore
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.offload import run_blocking
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.server.runtime.scheduler import PeriodicJob, PeriodicScheduler
from headwater.server.services.admin import AdminService
from headwater.server.services.broker import BrokerService, ProducerIdAllocator
from headwater.server.services.control import ControlService
from headwater.server.services.group import GroupService, replica_callables
from headwater.server.startup import DeferredServices, Readiness
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

_T = TypeVar("_T")

GROUP_TICK_INTERVAL_MS = 250
"""How often the group coordinator's timers (session expiry, rebalance delays) run."""

SLOW_SHUTDOWN_STEP_S = 0.5
SHUTDOWN_TIMEOUT_S = 30.0
"""After the controlled shutdown, the rest of the shutdown must finish within this."""


async def _bounded(what: str, step: Awaitable[Any], timeout_s: float) -> None:
    """Run one shutdown step; log (and go on) if it fails or outlasts ``timeout_s``."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(step, timeout_s)
        took = time.monotonic() - started
        if took >= SLOW_SHUTDOWN_STEP_S:
            log.info("shutdown: %s took %.1f s", what, took)
    except TimeoutError:
        log.warning("shutdown: %s did not finish within %.0f s; going on", what, timeout_s)
        if log.isEnabledFor(logging.DEBUG):
            _dump_stacks()
    except Exception:
        log.exception("shutdown: %s failed; going on", what)


def _start_exit_watchdog(broker_id: int, timeout_s: float) -> None:
    """Halt the process if the shutdown has not completed ``timeout_s`` from now.

    Every step is bounded, but the interpreter's exit also joins threads
    (asyncio's executor) that may be blocked in a ZooKeeper or disk call; a
    broker that said it was stopping must exit, so this daemon thread ends it.
    """

    def watch() -> None:
        time.sleep(timeout_s)
        log.error("broker %d: shutdown still running after %.0f s; halting", broker_id, timeout_s)
        faulthandler.dump_traceback(all_threads=True)
        logging.shutdown()
        os._exit(1)

    threading.Thread(target=watch, name="exit-watchdog", daemon=True).start()


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
        self.remote_end_offsets: RemoteEndOffsets | None = None
        self._stop = asyncio.Event()
        self._leaders: dict[int, BrokerRegistration] = {}
        self.readiness = Readiness(config.broker_id)
        self.replicas: ReplicaManager | None = None
        self._fetchers: ReplicaFetcherManager | None = None
        self._on_offsets_leadership: Callable[[TopicPartition, int | None], None] = (
            lambda _tp, _epoch: None
        )
        self._controller_channel: GrpcControllerChannel | None = None

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
            loop.add_signal_handler(signal.SIGUSR2, _dump_stacks)
        metadata_changed = asyncio.Condition()

        # Everything is registered before start (gRPC refuses handlers added later); the
        # Headwater services answer UNAVAILABLE until attached below, health NOT_SERVING.
        server = grpc.aio.server(options=channel_options(config.grpc_max_message_bytes))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        services = DeferredServices(SERVICE_NAMES)
        server.add_generic_rpc_handlers((services,))
        await self._set_health(False)
        listener = config.listener
        port = server.add_insecure_port(f"{listener.host or '0.0.0.0'}:{listener.port}")
        await server.start()
        log.info("broker %d listening on %s:%d", config.broker_id, listener.host, port)

        defaults = LogConfig.from_properties(config.log_config_properties())
        self.log_manager = await run_blocking(
            LogManager, config.log_dir_list, default_config=defaults
        )

        replicas = ReplicaManager(
            broker_id=config.broker_id,
            log_manager=self.log_manager,
            isr_store=ZooKeeperIsrStore(lambda: self.coordinator),
            metrics=self.metrics,
            min_insync_replicas=config.min_insync_replicas,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            default_log_properties=config.log_config_properties(),
            is_known_partition=self.metadata.contains,
            on_role_changes=self._apply_role_changes,
        )
        self.replicas = replicas
        fetchers = self._fetchers = ReplicaFetcherManager(
            manager=replicas,
            broker_id=config.broker_id,
            max_bytes=config.replica_fetch_max_bytes,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            backoff_ms=config.replica_fetch_backoff_ms,
            max_message_bytes=config.grpc_max_message_bytes,
        )
        self.metrics.register_state(
            partitions=replicas.snapshots,
            is_controller=lambda: self.coordinator is not None and self.coordinator.is_controller,
        )
        groups = self.groups = self._start_groups(replicas)
        services.attach(
            lambda target: self._add_servicers(target, replicas, groups, metadata_changed)
        )
        if config.metrics_port:
            self.metrics.serve(config.metrics_port)
        scheduler = PeriodicScheduler()
        for job in self._periodic_jobs(self.log_manager, replicas, groups):
            scheduler.start(job)
        try:
            if not await self._start_coordinator_unless_stopped(port):
                return 0
            await self._on_control_applied("registered", -1)
            log.info(
                "broker %d started; ready once the controller's metadata arrives", config.broker_id
            )
            await self._stop.wait()
            log.info("broker %d shutting down", config.broker_id)
            await self.health.enter_graceful_shutdown()
            if config.controlled_shutdown_enable:
                await self._controlled_shutdown()
        finally:
            _start_exit_watchdog(config.broker_id, SHUTDOWN_TIMEOUT_S)
            stopping_at = time.monotonic()
            await _bounded("stopping the periodic jobs", scheduler.close(), 10.0)
            await _bounded("closing the group coordinator", groups.close(), 3.0)
            # Release delayed produces and long polls, then stop serving (so no
            # LeaderAndIsr can start a fetcher any more), then stop the fetchers.
            replicas.shutdown()
            await _bounded("stopping the gRPC server", server.stop(grace=1.0), 3.0)
            await _bounded("stopping the replica fetchers", fetchers.shutdown(), 3.0)
            await _bounded("closing the logs", run_blocking(self.log_manager.shutdown), 15.0)
            if self.coordinator is not None:
                # Closing the controller's channels first cancels any send still waiting
                # on a broker (this one has stopped serving), so resigning does not wait.
                if self._controller_channel is not None:
                    self._controller_channel.close()
                await _bounded("leaving ZooKeeper", run_blocking(self.coordinator.stop), 10.0)
            log.info(
                "broker %d stopped in %.1f s", config.broker_id, time.monotonic() - stopping_at
            )
        return 0

    def _add_servicers(
        self,
        server: Any,
        replicas: ReplicaManager,
        groups: GroupCoordinatorRuntime,
        metadata_changed: asyncio.Condition,
    ) -> None:
        config = self.config
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
                on_applied=self._on_control_applied,
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
        hosted = self.replicas.partitions if self.replicas is not None else {}
        if readiness.evaluate(self.metadata.topics, hosted):
            _freeze_startup_objects()
            await self._set_health(True)
            log.info("broker %d is ready (SERVING)", self.config.broker_id)

    def _start_groups(self, replicas: ReplicaManager) -> GroupCoordinatorRuntime:
        """The group coordinator runtime, following this broker's offsets-topic leaderships."""
        config = self.config
        append, read = replica_callables(replicas, timeout_ms=config.offsets_commit_timeout_ms)
        runtime = GroupCoordinatorRuntime(
            num_partitions=config.offsets_topic_num_partitions,
            tick_interval_ms=GROUP_TICK_INTERVAL_MS,  # ticked by the periodic scheduler
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

        self._on_offsets_leadership = on_leadership_change

        remote = self.remote_end_offsets = RemoteEndOffsets(
            wanted=lambda: [
                tp
                for tp in {
                    TopicPartition(t.topic, t.partition) for _, t, _ in runtime.committed_offsets()
                }
                if tp not in replicas.partitions
            ],
            leader_address=self._leader_address,
            ask=list_latest(timeout_s=config.controller_socket_timeout_ms / 1000.0),
        )

        def end_offset(topic: str, partition: int) -> int | None:
            tp = TopicPartition(topic, partition)
            local = replicas.high_watermark(tp)
            return local if local is not None else remote.get(tp)

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

    def _apply_role_changes(self, changes: RoleChanges) -> None:
        """A LeaderAndIsr's or StopReplica's role changes: fetchers, then group leaderships."""
        if self._fetchers is not None:
            if changes.unfollow:
                self._fetchers.remove_partitions(changes.unfollow)
            if changes.follow:
                self._fetchers.add_partitions(changes.follow, self._leaders)
        for tp, leader_epoch in changes.leadership:
            self._on_offsets_leadership(tp, leader_epoch)

    def _periodic_jobs(
        self,
        log_manager: LogManager,
        replicas: ReplicaManager,
        groups: GroupCoordinatorRuntime,
    ) -> list[PeriodicJob]:
        """Retention/flush/checkpoints, the cleaner, ISR expiry and the group timers."""
        config = self.config

        async def log_tasks(now_ms: int) -> None:
            await run_blocking(log_manager.run_periodic_tasks, now_ms)

        async def isr_expiration(_now_ms: int) -> None:
            replicas.maybe_shrink_isrs()

        async def group_timers(_now_ms: int) -> None:
            await groups.tick()

        jobs = [
            PeriodicJob("log-tasks", config.log_retention_check_interval_ms, log_tasks),
            # Kafka's isr-expiration: check for lagging followers every lag/2.
            PeriodicJob(
                "isr-expiration", max(config.replica_lag_time_max_ms / 2, 50), isr_expiration
            ),
            PeriodicJob("group-timers", GROUP_TICK_INTERVAL_MS, group_timers),
        ]
        if self.remote_end_offsets is not None:
            remote = self.remote_end_offsets

            async def group_lag(_now_ms: int) -> None:
                await remote.refresh()

            jobs.append(PeriodicJob("group-lag", REFRESH_INTERVAL_S * 1000, group_lag))
        if config.log_cleaner_enable:
            cleaner = LogCleaner()

            async def clean(now_ms: int) -> None:
                stats = await run_blocking(
                    lambda: cleaner.maybe_clean(log_manager.logs(), now_ms=now_ms)
                )
                if stats.segments_rewritten:
                    log.info("log cleaner: %s", stats)

            jobs.append(PeriodicJob("log-cleaner", config.log_cleaner_backoff_ms, clean))
        return jobs

    def _leader_address(self, tp: TopicPartition) -> str | None:
        """``host:port`` of ``tp``'s leader when it is another live broker, else None."""
        leader = self.metadata.leader_of(tp)
        b = self.metadata.brokers.get(leader)
        return f"{b.host}:{b.port}" if b is not None and leader != self.config.broker_id else None

    async def _start_coordinator_unless_stopped(self, port: int) -> bool:
        """Start the coordinator; False if a stop was requested first (e.g. while waiting
        for a previous session's registration to expire)."""
        starting = asyncio.ensure_future(self._start_coordinator(port))
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if starting.done():
            starting.result()
            return True
        starting.cancel()
        log.info("broker %d: stop requested during startup", self.config.broker_id)
        return False

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
        await run_blocking(coordinator.start)
        channel.cluster_id = coordinator.cluster_id
        self._controller_channel = channel
        self.coordinator = coordinator

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move our leaderships; bounded retries (Kafka's behaviour)."""
        config = self.config
        coordinator = self.coordinator
        if coordinator is None:
            return
        for attempt in range(1, config.controlled_shutdown_max_retries + 1):
            try:
                remaining = await asyncio.wait_for(
                    self._controlled_shutdown_once(coordinator),
                    config.controller_socket_timeout_ms / 1000.0 + 1.0,
                )
                if remaining == 0:
                    log.info("controlled shutdown succeeded")
                    return
                log.info(
                    "controlled shutdown: %d partitions remain (attempt %d)", remaining, attempt
                )
            except Exception as exc:
                log.warning("controlled shutdown attempt %d failed: %r", attempt, exc)
            await asyncio.sleep(config.controlled_shutdown_retry_backoff_ms / 1000.0)
        log.warning("controlled shutdown did not complete; shutting down anyway")

    async def _controlled_shutdown_once(self, coordinator: BrokerCoordinator) -> int:
        broker_id, epoch = self.config.broker_id, coordinator.broker_epoch
        if coordinator.is_controller:
            remaining = await run_blocking(
                coordinator.controller.controlled_shutdown, broker_id, epoch
            )
            return len(remaining)
        controller_id = await run_blocking(coordinator.controller_id)
        if controller_id is None:
            raise errors.NotControllerError("no active controller")
        brokers = (await run_blocking(coordinator.describe_cluster)).brokers
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


def _dump_stacks() -> None:
    """SIGUSR2 with test hooks: every thread's and every asyncio task's stack, to stderr."""
    faulthandler.dump_traceback(all_threads=True)
    for task in asyncio.all_tasks():
        try:
            task.print_stack(file=sys.stderr)
        except Exception as exc:  # gRPC's Cython frames have no line numbers
            print(f"{task!r}: {exc!r}", file=sys.stderr)
    sys.stderr.flush()


def _validate_topic_config(props: Mapping[str, str]) -> None:
    LogConfig.from_properties(props)


def run_broker(config: BrokerConfig, *, test_hooks: bool = False) -> int:
    """Run one broker until SIGTERM; returns the exit code."""
    runtime.tune_switch_interval()  # the event loop shares the GIL with grpc's threads
    return asyncio.run(BrokerServer(config, test_hooks=test_hooks).run())


def _freeze_startup_objects() -> None:
    """Collect once, then move everything alive to the garbage collector's permanent
    generation (``gc.freeze``), as long-running CPython servers do.

    Startup leaves tens of thousands of long-lived objects (modules, grpc, kazoo,
    protobuf descriptors, metadata).  Left in the collected generations, the first
    full collection after startup scanned them all on the event loop: a 24-27 ms
    stall of every request in flight, measured with a ``gc.callbacks`` probe
    during ``bench/client.py``'s end-to-end run, and each later collection paid
    for them again.  Frozen, they are never scanned; garbage made later is
    collected as before.
    """
    gc.collect()
    gc.freeze()
