"""Everything a broker does with ZooKeeper, behind one object.

:class:`BrokerCoordinator` connects with ``zookeeper.session.timeout.ms``,
registers the broker (ephemeral ``/brokers/ids/<id>``), runs this broker's
:class:`~headwater.coordination.controller.Controller` (which takes part in
the election), and offers the reads, ISR writes and admin operations the
broker server needs.

Session expiry: a kazoo state listener (kazoo's thread) tells the controller;
on the new session the controller's event thread registers the broker again
(the broker epoch changes; ``on_broker_epoch`` is called) and re-runs the
election, as Kafka's ``RegisterBrokerAndReelect`` does.

Threads: ``start``/``stop`` from the owner; every other method is a
synchronous ZooKeeper call that may be made from any thread except kazoo's
callback thread (an asyncio server calls them through ``run_in_executor``).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import DataWatch

from headwater import errors
from headwater.clock import Clock, monotonic_ms
from headwater.coordination import model, session
from headwater.coordination.admin import ConfigValidator, CreateTopicResult, NewTopic, TopicAdmin
from headwater.coordination.channel import ControllerChannel
from headwater.coordination.controller import Controller
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, TopicAssignment
from headwater.coordination.settings import CoordinationSettings
from headwater.coordination.store import ZkStore
from headwater.errors import ErrorCode
from headwater.values import TopicPartition

log = logging.getLogger(__name__)

STALE_REGISTRATION_MARGIN_S = 5.0
"""How long past ``zookeeper.session.timeout.ms`` to wait for a stale registration to go."""
STALE_REGISTRATION_POLL_S = 0.25


@dataclasses.dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int | None
    brokers: tuple[BrokerRegistration, ...]


class BrokerCoordinator:
    """A broker's ZooKeeper session, registration, controller and admin operations."""

    def __init__(
        self,
        settings: CoordinationSettings,
        *,
        broker: BrokerRegistration,
        channel: ControllerChannel,
        config_validator: ConfigValidator | None = None,
        rng: random.Random | None = None,
        clock: Clock = monotonic_ms,
        sleep: Callable[[float], None] = time.sleep,
        on_broker_epoch: Callable[[int], None] | None = None,
    ) -> None:
        self.settings = settings
        self._registration = broker
        self._channel = channel
        self._config_validator = config_validator
        self._rng = rng or random.Random()
        self._clock = clock
        self._sleep = sleep
        self._on_broker_epoch = on_broker_epoch
        self._lock = threading.Lock()
        self._lost = False
        self._store: ZkStore | None = None
        self._controller: Controller | None = None
        self._admin: TopicAdmin | None = None
        self.cluster_id = ""
        self.broker_epoch = -1

    @property
    def broker_id(self) -> int:
        return self._registration.broker_id

    @property
    def store(self) -> ZkStore:
        if self._store is None:
            raise errors.BrokerNotAvailableError("the coordinator is not started")
        return self._store

    @property
    def controller(self) -> Controller:
        if self._controller is None:
            raise errors.BrokerNotAvailableError("the coordinator is not started")
        return self._controller

    @property
    def admin(self) -> TopicAdmin:
        if self._admin is None:
            raise errors.BrokerNotAvailableError("the coordinator is not started")
        return self._admin

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        client = session.connect(
            self.settings.zookeeper_connect,
            session_timeout_ms=self.settings.zookeeper_session_timeout_ms,
            connection_timeout_ms=self.settings.zookeeper_connection_timeout_ms,
            auth=self.settings.zk_auth,
        )
        store = ZkStore(client)
        self._store = store
        try:
            store.ensure_paths()
            self.cluster_id = store.get_or_create_cluster_id(_new_cluster_id(self._rng))
            self._register_when_free()
            self._admin = TopicAdmin(
                store, self.settings, rng=self._rng, config_validator=self._config_validator
            )
            self._controller = Controller(
                store,
                broker_id=self.broker_id,
                channel=self._channel,
                settings=self.settings,
                clock=self._clock,
                on_reconnect=self._register,
            )
            client.add_listener(self._state_listener)
            self._controller.start()
        except BaseException:
            session.close(client)
            self._store = None
            raise

    def stop(self) -> None:
        """Resign as controller, deregister and close the session (idempotent)."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
        if self._store is not None:
            client = self._store.client
            client.remove_listener(self._state_listener)
            try:
                if client.connected:  # else it would wait for ZooKeeper; close removes it
                    self._store.deregister_broker(self.broker_id)
            except Exception as e:  # closing the session removes it anyway
                log.debug("deregistering broker %d: %r", self.broker_id, e)
            session.close(client)
            self._store = None

    def __enter__(self) -> BrokerCoordinator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _register_when_free(self) -> None:
        """Register, first waiting out a previous session's ephemeral ``/brokers/ids/<id>``.

        A broker killed and restarted at once finds its old registration still
        held by the dead session until ZooKeeper expires it (Kafka waits too).
        The wait is bounded by ``zookeeper.session.timeout.ms`` plus a margin;
        a registration still held after that belongs to a live duplicate broker.
        """
        timeout_ms = self.settings.zookeeper_session_timeout_ms + STALE_REGISTRATION_MARGIN_S * 1000
        deadline = self._clock() + timeout_ms
        next_note = self._clock()
        while True:
            try:
                self._register()
                return
            except (errors.InvalidConfigError, NoNodeError):
                now = self._clock()
                if now >= deadline:
                    raise
                if now >= next_note:
                    log.info(
                        "broker.id %d is still registered by another session (this broker's "
                        "previous run?); waiting up to %.0f s for that session to expire",
                        self.broker_id,
                        (deadline - now) / 1000.0,
                    )
                    next_note = now + 2000.0
                self._sleep(STALE_REGISTRATION_POLL_S)

    def _register(self) -> None:
        epoch = self.store.register_broker(self._registration)
        self.broker_epoch = epoch
        log.info("broker %d registered, epoch %d", self.broker_id, epoch)
        if self._on_broker_epoch is not None:
            self._on_broker_epoch(epoch)

    def _state_listener(self, state: str) -> None:
        """Kazoo's thread: only tell the controller."""
        controller = self._controller
        if controller is None:
            return
        if state == KazooState.LOST:
            with self._lock:
                self._lost = True
            controller.session_expired()
        elif state == KazooState.CONNECTED:
            with self._lock:
                was_lost, self._lost = self._lost, False
            if was_lost:
                controller.session_reestablished()

    # -- reads -----------------------------------------------------------------

    @property
    def is_controller(self) -> bool:
        return self._controller is not None and self._controller.is_active

    def controller_id(self) -> int | None:
        return self.store.get_controller_id()

    def get_topics(self) -> list[str]:
        return self.store.get_topics()

    def get_assignment(self, topic: str) -> TopicAssignment | None:
        return self.store.get_assignment(topic)

    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        return self.store.get_partition_state(topic, partition)

    def get_partition_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        return self.store.get_partition_states(topic)

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return self.store.get_topic_config(topic)

    def watch_topic_config(
        self, topic: str, callback: Callable[[str, dict[str, str]], None]
    ) -> Callable[[], None]:
        """Call ``callback(topic, config)`` now and on every change; returns a cancel function.

        The callback runs on kazoo's thread: it must be quick and must not call
        ZooKeeper (hand the new config to your own loop).
        """
        cancelled = threading.Event()

        def on_change(data: bytes | None, _stat: object) -> bool | None:
            if cancelled.is_set():
                return False
            callback(topic, model.decode_config(data) if data else {})
            return None

        DataWatch(self.store.client, f"/config/topics/{topic}", on_change)
        return cancelled.set

    def describe_cluster(self) -> ClusterDescription:
        brokers = tuple(self.store.get_brokers().values())
        return ClusterDescription(self.cluster_id, self.store.get_controller_id(), brokers)

    # -- leader-side writes ----------------------------------------------------

    def update_isr(
        self,
        topic: str,
        partition: int,
        leader_and_isr: LeaderAndIsr,
        expected_zk_version: int,
    ) -> int | None:
        """Leader ISR write: the new zk_version, or None on a version conflict (re-read)."""
        return self.store.update_isr(
            topic, partition, leader_and_isr, expected_zk_version=expected_zk_version
        )

    # -- admin -------------------------------------------------------------------

    def create_topics(
        self, topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        return self.admin.create_topics(topics, validate_only=validate_only)

    def create_topic(self, topic: NewTopic, *, validate_only: bool = False) -> TopicAssignment:
        return self.admin.create_topic(topic, validate_only=validate_only)

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topic(name)

    def create_partitions(
        self,
        name: str,
        new_total: int,
        *,
        assignments: Mapping[int, Sequence[int]] | None = None,
        validate_only: bool = False,
    ) -> TopicAssignment:
        return self.admin.create_partitions(
            name, new_total, assignments=assignments, validate_only=validate_only
        )

    def alter_topic_config(
        self,
        name: str,
        set_: Mapping[str, str],
        delete: Sequence[str] = (),
        *,
        validate_only: bool = False,
    ) -> dict[str, str]:
        return self.admin.alter_topic_config(
            name, set_=set_, delete=delete, validate_only=validate_only
        )

    def elect_preferred_leaders(
        self, partitions: Sequence[TopicPartition] | None = None, *, timeout_s: float = 30.0
    ) -> dict[TopicPartition, ErrorCode]:
        """Preferred leader election: directly if this broker is the controller, else via ZK."""
        if self.is_controller:
            try:
                elected = self.controller.elect_preferred_leaders(partitions, timeout_s=timeout_s)
                return {TopicPartition(*tp): code for tp, code in elected.items()}
            except errors.NotControllerError:
                pass
        requested = list(partitions or [])
        deadline = self._clock() + timeout_s * 1000.0
        while not self.store.request_preferred_election(requested):
            if self._clock() >= deadline:
                raise errors.RequestTimedOutError("a preferred leader election is in progress")
            self._sleep(0.05)
        while self.store.preferred_election_pending():
            if self._clock() >= deadline:
                raise errors.RequestTimedOutError("the controller did not run the election")
            self._sleep(0.05)
        return self._preferred_results(requested)

    def _preferred_results(
        self, requested: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        out: dict[TopicPartition, ErrorCode] = {}
        if not requested:
            for topic in self.store.get_topics():
                a = self.store.get_assignment(topic)
                if a is not None:
                    requested.extend(TopicPartition(topic, p) for p in a.partitions)
        for tp in requested:
            topic, p = tp
            a = self.store.get_assignment(topic)
            state = self.store.get_partition_state(topic, p)
            if a is None or state is None or p not in a.partitions:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state.leader == a.partitions[p][0]:
                out[tp] = ErrorCode.NONE
            else:
                out[tp] = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        return out

    def wait_for_leaders(self, topics: Sequence[str], *, timeout_s: float) -> bool:
        """Wait (bounded) until every partition of ``topics`` has a state with a leader."""
        deadline = self._clock() + timeout_s * 1000.0
        while True:
            if all(self._has_leaders(t) for t in topics):
                return True
            if self._clock() >= deadline:
                return False
            self._sleep(0.05)

    def _has_leaders(self, topic: str) -> bool:
        a = self.store.get_assignment(topic)
        if a is None:
            return False
        states = self.store.get_partition_states(topic)
        return all(p in states and states[p].leader >= 0 for p in a.partitions)


def _new_cluster_id(rng: random.Random) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(16)).decode("ascii").rstrip("=")
