"""The controller: Kafka's ``KafkaController`` (ZooKeeper mode) in miniature.

Every broker runs a :class:`Controller`; at most one is *active*.  A broker
becomes the active controller by creating the ephemeral ``/controller`` znode
while bumping ``/controller_epoch`` in the same multi-op; the epoch's znode
version then fences every write it makes, so a deposed controller (session
expired, paused, partitioned) cannot change cluster state.

Threading model (Kafka's ``ControllerEventManager``): one thread owns all
controller state and processes :mod:`~headwater.coordination.events` from a
queue, one at a time.  Kazoo watches and session listeners, RPC handlers
(:meth:`controlled_shutdown`, :meth:`elect_preferred_leaders`) and the
auto-rebalance timer only enqueue.  Requests to brokers go out through
per-broker sender threads (:mod:`~headwater.coordination.channel`), so a dead
broker never blocks the loop.

What the thread does with an event is decided without I/O: whether to handle
it, and how the ``/controller`` znode moves this broker between
:class:`~headwater.coordination.controller_state.ControllerState` s
(:mod:`~headwater.coordination.controller_state`); what the active controller
does about the cluster (:mod:`~headwater.coordination.decisions`, returning
:class:`~headwater.coordination.results.ControllerResult` values).  The
:class:`~headwater.coordination.executor.ControllerExecutor` does the
ZooKeeper reads and carries the results out.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from kazoo.exceptions import KazooException

from headwater import errors
from headwater.clock import Clock, WallClock, monotonic_ms, wall_ms
from headwater.coordination import events as ev
from headwater.coordination.channel import ControllerChannel, ControllerChannelManager
from headwater.coordination.context import ControllerContext
from headwater.coordination.controller_state import (
    Admission,
    ControllerState,
    admit,
    after_controller_read,
    idle_wait_ms,
    on_failure,
    rebalance_due,
)
from headwater.coordination.executor import ControllerExecutor, Watches
from headwater.coordination.settings import CoordinationSettings
from headwater.coordination.store import ControllerStore
from headwater.errors import ErrorCode
from headwater.values import TopicPartition

log = logging.getLogger(__name__)


_IDLE_POLL_MS = 1000.0
_T = TypeVar("_T")


class Controller:
    """One broker's controller: elects itself when it can, acts while active.

    Public methods may be called from any thread; they enqueue.  ``start`` and
    ``stop`` are called by the owner (:class:`~headwater.coordination.broker.BrokerCoordinator`).
    """

    def __init__(
        self,
        store: ControllerStore,
        *,
        broker_id: int,
        channel: ControllerChannel,
        settings: CoordinationSettings,
        clock: Clock = monotonic_ms,
        now_ms: WallClock = wall_ms,
        on_reconnect: Callable[[], None] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._store = store
        self._settings = settings
        self._clock = clock
        self._now_ms = now_ms
        self._on_reconnect = on_reconnect
        self._channel = channel
        self._queue: queue.Queue[ev.ControllerEvent] = queue.Queue()
        self._state = ControllerState.INACTIVE
        self._ctx = ControllerContext()
        self._channels = ControllerChannelManager(channel)
        self._executor = self._new_executor()
        self._thread: threading.Thread | None = None
        self._active_controller_id: int | None = None
        self._next_rebalance_ms = float("inf")
        self._reassigning_partitions = 0

    def _new_executor(self) -> ControllerExecutor:
        watches = Watches(
            brokers=self._enqueuer(ev.BrokerChange()),
            topics=self._enqueuer(ev.TopicChange()),
            deletions=self._enqueuer(ev.TopicDeletion()),
            isr_changes=self._enqueuer(ev.IsrChangeNotification()),
            preferred=self._enqueuer(ev.PreferredReplicaElection(from_zk=True)),
        )
        return ControllerExecutor(
            self._store,
            self._ctx,
            self._channels,
            watches=watches,
            topic_watch=self._topic_watch,
            unclean=self._settings.unclean_leader_election_enable,
        )

    # -- public API (any thread) ---------------------------------------------

    @property
    def state(self) -> ControllerState:
        return self._state

    @property
    def is_active(self) -> bool:
        return self._state is ControllerState.ACTIVE

    @property
    def controller_epoch(self) -> int:
        return self._ctx.controller_epoch

    @property
    def reassigning_partitions(self) -> int:
        """Partitions being reassigned, as of the last event handled (0 unless active).

        Kafka's ``ReassigningPartitions`` gauge: like Kafka's ``updateMetrics`` the
        event thread sets it after each event, so any thread may read it.
        """
        return self._reassigning_partitions

    @property
    def active_controller_id(self) -> int | None:
        """The controller this broker last saw in ``/controller`` (None: none)."""
        return self._active_controller_id

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"controller-event-thread-{self.broker_id}", daemon=True
        )
        self._thread.start()
        self.enqueue(ev.Startup())

    def stop(self, *, timeout_s: float = 10.0) -> None:
        """Resign (deleting ``/controller`` if held) and stop the event thread."""
        thread = self._thread
        if thread is None:
            return
        self.enqueue(ev.Shutdown())
        thread.join(timeout_s)
        self._thread = None

    def enqueue(self, event: ev.ControllerEvent) -> None:
        self._queue.put(event)

    def session_expired(self) -> None:
        """Called from kazoo's thread on ``KazooState.LOST``."""
        self.enqueue(ev.Expire())

    def session_reestablished(self) -> None:
        """Called from kazoo's thread on ``CONNECTED`` after ``LOST``."""
        self.enqueue(ev.RegisterBrokerAndReelect())

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int, *, timeout_s: float = 30.0
    ) -> list[TopicPartition]:
        """Move leaderships off ``broker_id``; return the partitions it still leads.

        Raises NotControllerError when this broker is not the active controller.
        """
        future: Future[list[TopicPartition]] = Future()
        self.enqueue(ev.ControlledShutdown(broker_id, broker_epoch, future))
        return self._wait(future, timeout_s)

    def elect_preferred_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None, *, timeout_s: float = 30.0
    ) -> dict[TopicPartition, ErrorCode]:
        future: Future[dict[TopicPartition, ErrorCode]] = Future()
        parts = tuple(TopicPartition(*tp) for tp in partitions) if partitions is not None else None
        self.enqueue(ev.PreferredReplicaElection(parts, result=future))
        return self._wait(future, timeout_s)

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, tuple[int, ...] | None],
        *,
        timeout_s: float = 30.0,
    ) -> dict[TopicPartition, errors.HeadwaterError | None]:
        """Start, replace or cancel (None) moves; each partition's refusal, or None.

        Raises NotControllerError when this broker is not the active controller.
        """
        future: Future[dict[TopicPartition, errors.HeadwaterError | None]] = Future()
        items = tuple((TopicPartition(*tp), t) for tp, t in reassignments.items())
        self.enqueue(ev.AlterPartitionReassignments(items, future))
        return self._wait(future, timeout_s)

    @staticmethod
    def _wait(future: Future[_T], timeout_s: float) -> _T:
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout as e:
            raise errors.RequestTimedOutError("controller did not answer in time") from e

    # -- watches (kazoo's thread: enqueue only) --------------------------------

    def _enqueuer(self, event: ev.ControllerEvent) -> Callable[[Any], None]:
        def watch(_: Any) -> None:
            self.enqueue(event)

        return watch

    def _controller_watch(self, _: Any) -> None:
        self.enqueue(ev.ControllerChange())

    def _topic_watch(self, topic: str) -> Callable[[Any], None]:
        return self._enqueuer(ev.PartitionModifications(topic))

    # -- the event thread ----------------------------------------------------

    def _run(self) -> None:
        while True:
            wait_ms = idle_wait_ms(
                self._state,
                auto_rebalance=self._settings.auto_leader_rebalance_enable,
                next_rebalance_ms=self._next_rebalance_ms,
                now_ms=self._clock(),
                idle_poll_ms=_IDLE_POLL_MS,
            )
            try:
                event: ev.ControllerEvent | None = self._queue.get(timeout=wait_ms / 1000.0)
            except queue.Empty:
                event = None
            if isinstance(event, ev.Shutdown):
                self.handle(event)
                return
            if event is None:
                if not rebalance_due(
                    self._state, next_rebalance_ms=self._next_rebalance_ms, now_ms=self._clock()
                ):
                    continue
                event = ev.AutoPreferredReplicaLeaderElection()
            self.handle(event)

    def run_pending(self, *, limit: int = 100) -> int:
        """Handle up to ``limit`` queued events on the calling thread; return how many.

        For single-threaded drivers (unit tests) of a controller whose event
        thread was never started; never call it while the thread runs.
        """
        done = 0
        while done < limit:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            self.handle(event)
            done += 1
        return done

    def handle(self, event: ev.ControllerEvent) -> None:
        """Process one event; the event thread's body (tests call it directly, unstarted)."""
        if isinstance(event, ev.Shutdown):
            self._shutdown()
            self._reassigning_partitions = 0
            return
        try:
            self._handle(event)
        finally:
            self._reassigning_partitions = len(self._ctx.reassignments) if self.is_active else 0

    def _handle(self, event: ev.ControllerEvent) -> None:
        try:
            admission = admit(self._state, event)
            if admission is Admission.REFUSE:
                raise errors.NotControllerError(f"broker {self.broker_id} is not the controller")
            if admission is Admission.PROCESS:
                self._dispatch(event)
        except Exception as e:
            outcome = on_failure(e)
            if outcome.resign:
                log.warning("controller %d was deposed: %s", self.broker_id, e)
            elif isinstance(e, KazooException):
                log.warning(
                    "controller %d: ZooKeeper error handling %s: %r", self.broker_id, event, e
                )
            elif outcome.unexpected:
                log.exception("controller %d: failed handling %s", self.broker_id, event)
            self._fail(event, outcome.error)
            if outcome.resign:
                self._resign()
                self.enqueue(ev.Reelect())

    @staticmethod
    def _fail(event: ev.ControllerEvent, error: BaseException) -> None:
        result = getattr(event, "result", None)
        if result is not None and not result.done():
            result.set_exception(error)

    def _dispatch(self, event: ev.ControllerEvent) -> None:
        """Handle an admitted event (see :func:`~headwater.coordination.controller_state.admit`)."""
        executor = self._executor
        if isinstance(event, ev.Startup | ev.Reelect):
            self._elect()
        elif isinstance(event, ev.ControllerChange):
            self._on_controller_change()
        elif isinstance(event, ev.Expire):
            self._resign(delete_znode=False)
            self._active_controller_id = None
        elif isinstance(event, ev.RegisterBrokerAndReelect):
            if self._on_reconnect is not None:
                self._on_reconnect()
            self._elect()
        elif isinstance(event, ev.ControlledShutdown):
            event.result.set_result(
                executor.controlled_shutdown(event.broker_id, event.broker_epoch)
            )
        elif isinstance(event, ev.PreferredReplicaElection):
            results = executor.preferred_election(event.partitions, from_zk=event.from_zk)
            if event.result is not None:
                event.result.set_result(results)
        elif isinstance(event, ev.BrokerChange):
            executor.on_broker_change()
        elif isinstance(event, ev.TopicChange):
            executor.on_topic_change()
        elif isinstance(event, ev.PartitionModifications):
            executor.on_partition_modifications(event.topic)
        elif isinstance(event, ev.TopicDeletion):
            executor.on_topic_deletion()
        elif isinstance(event, ev.IsrChangeNotification):
            executor.on_isr_change()
        elif isinstance(event, ev.AlterPartitionReassignments):
            event.result.set_result(executor.alter_reassignments(dict(event.reassignments)))
        elif isinstance(event, ev.AutoPreferredReplicaLeaderElection):
            self._schedule_rebalance()
            executor.auto_rebalance()

    # -- election and resignation --------------------------------------------

    def _elect(self) -> None:
        current = self._store.get_controller_id(watch=self._controller_watch)
        self._active_controller_id = current
        step = after_controller_read(self._state, self.broker_id, current, on_change=False)
        if step.resign:
            self._resign()
        if step.campaign:
            self._campaign()

    def _on_controller_change(self) -> None:
        current = self._store.get_controller_id(watch=self._controller_watch)
        self._active_controller_id = current
        step = after_controller_read(self._state, self.broker_id, current, on_change=True)
        if step.resign:
            self._resign()
        if step.campaign:
            self._elect()

    def _campaign(self) -> None:
        won = self._store.try_become_controller(self.broker_id, now_ms=self._now_ms())
        if won is None:
            self._active_controller_id = self._store.get_controller_id(watch=self._controller_watch)
            return
        log.info("broker %d is the controller, epoch %d", self.broker_id, won.epoch)
        self._active_controller_id = self.broker_id
        self._ctx.reset()
        self._ctx.epoch = won
        self._state = self._state.transition_to(ControllerState.ACTIVE)
        self._schedule_rebalance()
        self._executor.on_failover()

    def _resign(self, *, delete_znode: bool = False) -> None:
        if self._state is not ControllerState.ACTIVE:
            return
        log.info("controller %d resigns (epoch %d)", self.broker_id, self._ctx.controller_epoch)
        if delete_znode:
            try:
                self._store.resign_controller(self.broker_id)
            except KazooException as e:
                log.warning("could not delete /controller: %r", e)
        self._state = self._state.transition_to(ControllerState.INACTIVE)
        self._ctx.reset()
        self._channels.shutdown()
        self._channels = ControllerChannelManager(self._channel)
        self._executor = self._new_executor()
        self._next_rebalance_ms = float("inf")

    def _schedule_rebalance(self) -> None:
        interval_ms = self._settings.leader_imbalance_check_interval_s * 1000.0
        self._next_rebalance_ms = self._clock() + interval_ms

    def _shutdown(self) -> None:
        if self._state is ControllerState.STOPPED:
            return
        self._resign(delete_znode=True)
        self._state = self._state.transition_to(ControllerState.STOPPED)
        while True:  # fail whatever is still queued
            try:
                self._fail(self._queue.get_nowait(), errors.NotControllerError("shutting down"))
            except queue.Empty:
                break
