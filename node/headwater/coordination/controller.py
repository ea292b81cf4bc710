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
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from kazoo.exceptions import KazooException

from headwater import errors
from headwater.coordination import events as ev
from headwater.coordination.channel import ControllerChannel, ControllerChannelManager
from headwater.coordination.controller_actions import ControllerActions, Watches
from headwater.coordination.partitions import (
    ControllerContext,
    PartitionStateChanger,
    TopicPartition,
)
from headwater.coordination.settings import CoordinationSettings
from headwater.coordination.store import ZkStore
from headwater.errors import ErrorCode

log = logging.getLogger(__name__)

_IDLE_POLL_S = 1.0
_T = TypeVar("_T")


class Controller:
    """One broker's controller: elects itself when it can, acts while active.

    Public methods may be called from any thread; they enqueue.  ``start`` and
    ``stop`` are called by the owner (:class:`~headwater.coordination.broker.BrokerCoordinator`).
    """

    def __init__(
        self,
        store: ZkStore,
        *,
        broker_id: int,
        channel: ControllerChannel,
        settings: CoordinationSettings,
        clock: Callable[[], float] = time.monotonic,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
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
        self._ctx = ControllerContext()
        self._changer = PartitionStateChanger(
            store, self._ctx, unclean=settings.unclean_leader_election_enable
        )
        self._channels = ControllerChannelManager(channel)
        self._actions = self._new_actions()
        self._thread: threading.Thread | None = None
        self._active_controller_id: int | None = None
        self._next_rebalance = float("inf")

    def _new_actions(self) -> ControllerActions:
        watches = Watches(
            brokers=self._enqueuer(ev.BrokerChange()),
            topics=self._enqueuer(ev.TopicChange()),
            deletions=self._enqueuer(ev.TopicDeletion()),
            isr_changes=self._enqueuer(ev.IsrChangeNotification()),
            preferred=self._enqueuer(ev.PreferredReplicaElection(from_zk=True)),
        )
        return ControllerActions(
            self._store,
            self._ctx,
            self._changer,
            self._channels,
            watches=watches,
            topic_watch=self._topic_watch,
        )

    # -- public API (any thread) ---------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._ctx.epoch is not None

    @property
    def controller_epoch(self) -> int:
        return self._ctx.controller_epoch

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
        self, partitions: Sequence[TopicPartition] | None = None, *, timeout_s: float = 30.0
    ) -> dict[TopicPartition, ErrorCode]:
        future: Future[dict[TopicPartition, ErrorCode]] = Future()
        parts = tuple(partitions) if partitions is not None else None
        self.enqueue(ev.PreferredReplicaElection(parts, result=future))
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
            wait = _IDLE_POLL_S
            if self.is_active and self._settings.auto_leader_rebalance_enable:
                wait = max(0.0, min(wait, self._next_rebalance - self._clock()))
            try:
                event: ev.ControllerEvent | None = self._queue.get(timeout=wait)
            except queue.Empty:
                event = None
            if isinstance(event, ev.Shutdown):
                self._shutdown()
                return
            if event is None:
                if self.is_active and self._clock() >= self._next_rebalance:
                    event = ev.AutoPreferredReplicaLeaderElection()
                else:
                    continue
            self._process(event)

    def _process(self, event: ev.ControllerEvent) -> None:
        try:
            self._dispatch(event)
        except errors.StaleControllerEpochError as e:
            log.warning("controller %d was deposed: %s", self.broker_id, e)
            self._fail(event, errors.NotControllerError(str(e)))
            self._resign()
            self.enqueue(ev.Reelect())
        except errors.HeadwaterError as e:
            self._fail(event, e)
        except KazooException as e:
            log.warning("controller %d: ZooKeeper error handling %s: %r", self.broker_id, event, e)
            self._fail(event, errors.NotControllerError(f"ZooKeeper unavailable: {e!r}"))
        except Exception as e:
            log.exception("controller %d: failed handling %s", self.broker_id, event)
            self._fail(event, errors.UnknownServerError(repr(e)))

    @staticmethod
    def _fail(event: ev.ControllerEvent, error: BaseException) -> None:
        result = getattr(event, "result", None)
        if result is not None and not result.done():
            result.set_exception(error)

    def _dispatch(self, event: ev.ControllerEvent) -> None:
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
            if not self.is_active:
                raise errors.NotControllerError(f"broker {self.broker_id} is not the controller")
            event.result.set_result(
                self._actions.controlled_shutdown(event.broker_id, event.broker_epoch)
            )
        elif isinstance(event, ev.PreferredReplicaElection):
            if not self.is_active:
                raise errors.NotControllerError(f"broker {self.broker_id} is not the controller")
            results = self._actions.preferred_election(event.partitions, from_zk=event.from_zk)
            if event.result is not None:
                event.result.set_result(results)
        elif not self.is_active:
            return  # a late watch from an earlier term
        elif isinstance(event, ev.BrokerChange):
            self._actions.on_broker_change()
        elif isinstance(event, ev.TopicChange):
            self._actions.on_topic_change()
        elif isinstance(event, ev.PartitionModifications):
            self._actions.on_partition_modifications(event.topic)
        elif isinstance(event, ev.TopicDeletion):
            self._actions.on_topic_deletion()
        elif isinstance(event, ev.IsrChangeNotification):
            self._actions.on_isr_change()
        elif isinstance(event, ev.AutoPreferredReplicaLeaderElection):
            self._schedule_rebalance()
            self._actions.auto_rebalance()

    # -- election and resignation --------------------------------------------

    def _elect(self) -> None:
        current = self._store.get_controller_id(watch=self._controller_watch)
        self._active_controller_id = current
        if current is not None:
            if current != self.broker_id and self.is_active:
                self._resign()
            return
        won = self._store.try_become_controller(self.broker_id, now_ms=self._now_ms())
        if won is None:
            self._active_controller_id = self._store.get_controller_id(watch=self._controller_watch)
            return
        log.info("broker %d is the controller, epoch %d", self.broker_id, won.epoch)
        self._active_controller_id = self.broker_id
        self._ctx.reset()
        self._ctx.epoch = won
        self._schedule_rebalance()
        self._actions.on_failover()

    def _on_controller_change(self) -> None:
        current = self._store.get_controller_id(watch=self._controller_watch)
        self._active_controller_id = current
        if self.is_active and current != self.broker_id:
            self._resign()
        if current is None:
            self._elect()

    def _resign(self, *, delete_znode: bool = False) -> None:
        if not self.is_active:
            return
        log.info("controller %d resigns (epoch %d)", self.broker_id, self._ctx.controller_epoch)
        if delete_znode:
            try:
                self._store.resign_controller(self.broker_id)
            except KazooException as e:
                log.warning("could not delete /controller: %r", e)
        self._ctx.reset()
        self._channels.shutdown()
        self._channels = ControllerChannelManager(self._channel)
        self._actions = self._new_actions()
        self._next_rebalance = float("inf")

    def _schedule_rebalance(self) -> None:
        self._next_rebalance = self._clock() + self._settings.leader_imbalance_check_interval_s

    def _shutdown(self) -> None:
        self._resign(delete_znode=True)
        while True:  # fail whatever is still queued
            try:
                self._fail(self._queue.get_nowait(), errors.NotControllerError("shutting down"))
            except queue.Empty:
                break
