"""Typed access to Headwater's ZooKeeper layout (Kafka ZK mode's ``KafkaZkClient``).

Layout under the chroot (default ``/headwater``)::

    /cluster/id                                   {"version":"1","id":...}
    /controller                                   ephemeral {"brokerid":N,...}
    /controller_epoch                             "N"; its znode version fences controllers
    /brokers/ids/<id>                             ephemeral broker registration; epoch = czxid
    /brokers/topics/<topic>                       {"partitions":{"0":[1,2,3]},"topic_id":...}
    /brokers/topics/<topic>/partitions/<p>/state  {"leader","leader_epoch","isr","controller_epoch"}
    /config/topics/<topic>, /config/brokers/<id>  {"config":{...}}
    /admin/delete_topics/<topic>                  deletion marker
    /admin/preferred_replica_election             {"partitions":[...]}
    /isr_change_notification/isr_change_NNNN      sequential, {"partitions":[...]}

Fencing: every write the controller makes goes in a multi-op that first checks
``/controller_epoch``'s znode version (:class:`ControllerEpochZk`), so a
deposed controller's writes fail atomically with
:class:`~headwater.errors.StaleControllerEpochError`.  Partition states are
also conditional on their own znode version, as both the controller and the
partition leader (ISR changes) write them.

Threads: a :class:`ZkStore` is a thin wrapper over one ``KazooClient``; its
methods are synchronous kazoo calls and may be called from any thread except
kazoo's own callback thread (watch callbacks must only enqueue work).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from headwater import errors
from headwater.coordination import model
from headwater.coordination.model import (
    BrokerRegistration,
    LeaderAndIsr,
    ReplicaReassignment,
    TopicAssignment,
)
from headwater.coordination.model import ControllerEpochZk as ControllerEpochZk

Watch = Callable[[Any], None]
"""A kazoo watcher: called once, on kazoo's thread, with a ``WatchedEvent``."""

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"

PERSISTENT_PATHS = (
    BROKER_IDS,
    TOPICS,
    CONFIG_TOPICS,
    CONFIG_BROKERS,
    DELETE_TOPICS,
    ISR_CHANGES,
    "/cluster",
)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _first_failure(results: Sequence[Any]) -> Exception | None:
    for r in results:
        if isinstance(r, Exception):
            return r
    return None


class ControllerStore(Protocol):
    """The ZooKeeper calls the controller makes: its seam, implemented by :class:`ZkStore`.

    Writes that take a ``fence`` raise StaleControllerEpochError when
    ``/controller_epoch`` moved on (another controller was elected).
    """

    def get_cluster_id(self) -> str | None: ...
    def get_brokers(self, watch: Watch | None = None) -> dict[int, BrokerRegistration]: ...
    def get_controller_id(self, watch: Watch | None = None) -> int | None: ...
    def try_become_controller(self, broker_id: int, *, now_ms: int) -> ControllerEpochZk | None: ...
    def resign_controller(self, broker_id: int) -> None: ...
    def get_topics(self, watch: Watch | None = None) -> list[str]: ...
    def get_assignment(self, topic: str, watch: Watch | None = None) -> TopicAssignment | None: ...
    def ensure_topic_id(self, topic: str, fence: ControllerEpochZk) -> str | None: ...
    def write_partition_reassignment(
        self,
        topic: str,
        partition: int,
        replicas: Sequence[int],
        reassignment: ReplicaReassignment | None,
        fence: ControllerEpochZk,
    ) -> None: ...
    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None: ...
    def get_partition_states(self, topic: str) -> dict[int, LeaderAndIsr]: ...
    def create_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: ControllerEpochZk
    ) -> LeaderAndIsr | None: ...
    def update_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: ControllerEpochZk
    ) -> LeaderAndIsr | None: ...
    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]: ...
    def read_isr_change_notifications(self, names: Iterable[str]) -> set[tuple[str, int]]: ...
    def delete_isr_change_notifications(
        self, names: Iterable[str], fence: ControllerEpochZk
    ) -> None: ...
    def get_topics_to_delete(self, watch: Watch | None = None) -> list[str]: ...
    def delete_topic_znodes(self, topic: str, fence: ControllerEpochZk) -> None: ...
    def remove_deletion_marker(self, topic: str, fence: ControllerEpochZk) -> None: ...
    def get_preferred_election(
        self, watch: Watch | None = None
    ) -> list[tuple[str, int]] | None: ...
    def delete_preferred_election(self, fence: ControllerEpochZk) -> None: ...


class ZkStore:
    """Typed reads and writes of the layout above over one connected, chrooted KazooClient."""

    def __init__(self, client: KazooClient) -> None:
        self.client = client

    # -- setup ---------------------------------------------------------------

    def ensure_paths(self) -> None:
        for path in PERSISTENT_PATHS:
            self.client.ensure_path(path)

    def get_or_create_cluster_id(self, candidate: str) -> str:
        try:
            self.client.create(CLUSTER_ID, model.encode_cluster_id(candidate), makepath=True)
            return candidate
        except NodeExistsError:
            data, _ = self.client.get(CLUSTER_ID)
            return model.decode_cluster_id(data)

    def get_cluster_id(self) -> str | None:
        try:
            data, _ = self.client.get(CLUSTER_ID)
        except NoNodeError:
            return None
        return model.decode_cluster_id(data)

    # -- brokers -------------------------------------------------------------

    def register_broker(self, reg: BrokerRegistration) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral) and return the broker epoch (its czxid).

        If the znode exists and belongs to this session (a retried create), its
        epoch is returned; if another live session holds it, the id is taken.
        """
        path = broker_path(reg.broker_id)
        with contextlib.suppress(NodeExistsError):
            self.client.create(path, model.encode_broker(reg), ephemeral=True, makepath=True)
        _, stat = self.client.get(path)
        if stat.ephemeralOwner != self.client.client_id[0]:
            raise errors.InvalidConfigError(
                f"broker.id {reg.broker_id} is already registered by another live session"
            )
        return int(stat.czxid)

    def deregister_broker(self, broker_id: int) -> None:
        try:
            _, stat = self.client.get(broker_path(broker_id))
            if stat.ephemeralOwner == self.client.client_id[0]:
                self.client.delete(broker_path(broker_id), version=stat.version)
        except (NoNodeError, BadVersionError):
            pass

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        try:
            data, stat = self.client.get(broker_path(broker_id))
        except NoNodeError:
            return None
        return model.decode_broker(broker_id, data, epoch=int(stat.czxid))

    def get_brokers(self, watch: Watch | None = None) -> dict[int, BrokerRegistration]:
        ids = self.client.get_children(BROKER_IDS, watch=watch)
        out: dict[int, BrokerRegistration] = {}
        for name in ids:
            reg = self.get_broker(int(name))
            if reg is not None:
                out[reg.broker_id] = reg
        return dict(sorted(out.items()))

    # -- controller ----------------------------------------------------------

    def get_controller_id(self, watch: Watch | None = None) -> int | None:
        stat = self.client.exists(CONTROLLER, watch=watch)
        if stat is None:
            return None
        try:
            data, _ = self.client.get(CONTROLLER)
        except NoNodeError:
            return None
        return model.decode_controller(data)

    def get_controller_epoch(self) -> ControllerEpochZk | None:
        try:
            data, stat = self.client.get(CONTROLLER_EPOCH)
        except NoNodeError:
            return None
        return ControllerEpochZk(model.decode_int(data), int(stat.version))

    def try_become_controller(self, broker_id: int, *, now_ms: int) -> ControllerEpochZk | None:
        """Create ``/controller`` and bump ``/controller_epoch`` atomically; None if we lost.

        Kafka's ``registerControllerAndIncrementControllerEpoch``: the multi-op's
        conditional set on the epoch znode guarantees epochs are unique even if
        two brokers race.
        """
        for _ in range(5):
            current = self.get_controller_epoch()
            if current is None:
                with contextlib.suppress(NodeExistsError):
                    self.client.create(
                        CONTROLLER_EPOCH, model.encode_int(model.INITIAL_CONTROLLER_EPOCH)
                    )
                continue
            tx = self.client.transaction()
            tx.create(CONTROLLER, model.encode_controller(broker_id, now_ms), ephemeral=True)
            tx.set_data(
                CONTROLLER_EPOCH, model.encode_int(current.epoch + 1), version=current.zk_version
            )
            results = tx.commit()
            failure = _first_failure(results)
            if failure is None:
                return ControllerEpochZk(current.epoch + 1, int(results[1].version))
            if isinstance(results[0], NodeExistsError):
                return None
            if isinstance(results[1], BadVersionError):
                continue
            raise errors.UnknownServerError(f"controller election failed: {failure!r}")
        return None

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if this session holds it."""
        try:
            data, stat = self.client.get(CONTROLLER)
        except NoNodeError:
            return
        if (
            model.decode_controller(data) == broker_id
            and stat.ephemeralOwner == self.client.client_id[0]
        ):
            with contextlib.suppress(NoNodeError, BadVersionError):
                self.client.delete(CONTROLLER, version=stat.version)

    def _fenced(self, fence: ControllerEpochZk) -> Any:
        tx = self.client.transaction()
        tx.check(CONTROLLER_EPOCH, fence.zk_version)
        return tx

    @staticmethod
    def _raise_if_fenced(results: Sequence[Any], fence: ControllerEpochZk) -> None:
        if results and isinstance(results[0], (BadVersionError, NoNodeError)):
            raise errors.StaleControllerEpochError(
                f"controller epoch {fence.epoch} is stale: another controller was elected"
            )

    # -- topics --------------------------------------------------------------

    def get_topics(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.client.get_children(TOPICS, watch=watch))

    def get_assignment(self, topic: str, watch: Watch | None = None) -> TopicAssignment | None:
        try:
            data, _ = self.client.get(topic_path(topic), watch=watch)
        except NoNodeError:
            return None
        return model.decode_assignment(topic, data)

    def get_assignment_versioned(self, topic: str) -> tuple[TopicAssignment, int] | None:
        try:
            data, stat = self.client.get(topic_path(topic))
        except NoNodeError:
            return None
        return model.decode_assignment(topic, data), int(stat.version)

    def create_topic(
        self,
        topic: str,
        partitions: Mapping[int, Sequence[int]],
        config: Mapping[str, str],
        *,
        topic_id: str,
    ) -> None:
        """Write the config then the assignment (the controller reacts to the latter) atomically.

        ``topic_id`` is the id drawn for this creation (:func:`model.new_topic_id`).
        """
        tx = self.client.transaction()
        tx.create(topic_config_path(topic), model.encode_config(config))
        tx.create(topic_path(topic), model.encode_assignment(partitions, topic_id=topic_id))
        failure = _first_failure(tx.commit())
        if failure is None:
            return
        if self.client.exists(topic_path(topic)) is not None:
            raise errors.TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        if self.client.exists(topic_config_path(topic)) is not None:
            # A stale config left by an interrupted deletion: replace it and retry once.
            self.client.delete(topic_config_path(topic))
            self.create_topic(topic, partitions, config, topic_id=topic_id)
            return
        raise errors.UnknownServerError(f"creating topic '{topic}' failed: {failure!r}")

    def set_assignment(
        self,
        topic: str,
        partitions: Mapping[int, Sequence[int]],
        *,
        expected_version: int,
        topic_id: str,
    ) -> bool:
        """Replace a topic's assignment if its znode is still at ``expected_version``.

        ``topic_id`` is the one read with that version (kept: an id never changes).
        """
        try:
            self.client.set(
                topic_path(topic),
                model.encode_assignment(partitions, topic_id=topic_id),
                version=expected_version,
            )
        except BadVersionError:
            return False
        except NoNodeError as e:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist") from e
        return True

    def ensure_topic_id(self, topic: str, fence: ControllerEpochZk) -> str | None:
        """The topic's id, drawn and written now (fenced) if its znode has none; None: gone.

        Kafka's controller does this for topics created before 2.8 (``setTopicIds``):
        read-modify-write on the assignment znode's version, so a concurrent
        CreatePartitions is kept and a racing writer's id wins.
        """
        for _ in range(5):
            current = self.get_assignment_versioned(topic)
            if current is None:
                return None
            assignment, version = current
            if assignment.topic_id:
                return assignment.topic_id
            tid = model.new_topic_id()
            tx = self._fenced(fence)
            tx.set_data(
                topic_path(topic),
                model.encode_assignment(
                    assignment.partitions, assignment.reassignments, topic_id=tid
                ),
                version=version,
            )
            results = tx.commit()
            self._raise_if_fenced(results, fence)
            if isinstance(results[1], NoNodeError):
                return None
            if isinstance(results[1], BadVersionError):
                continue
            failure = _first_failure(results)
            if failure is not None:
                raise errors.UnknownServerError(f"writing the id of {topic}: {failure!r}")
            return tid
        raise errors.UnknownServerError(f"assignment of {topic} kept changing")

    def write_partition_reassignment(
        self,
        topic: str,
        partition: int,
        replicas: Sequence[int],
        reassignment: ReplicaReassignment | None,
        fence: ControllerEpochZk,
    ) -> None:
        """The controller's write of one partition's replicas and move (fenced).

        Read-modify-write on the assignment znode's version, so a concurrent
        CreatePartitions is kept; a topic gone meanwhile is left alone.
        """
        for _ in range(5):
            current = self.get_assignment_versioned(topic)
            if current is None:
                return
            assignment, version = current
            partitions = dict(assignment.partitions)
            partitions[partition] = tuple(replicas)
            moving = dict(assignment.reassignments)
            if reassignment is None:
                moving.pop(partition, None)
            else:
                moving[partition] = reassignment
            tx = self._fenced(fence)
            tx.set_data(
                topic_path(topic),
                model.encode_assignment(partitions, moving, topic_id=assignment.topic_id),
                version=version,
            )
            results = tx.commit()
            self._raise_if_fenced(results, fence)
            if isinstance(results[1], NoNodeError):
                return
            if isinstance(results[1], BadVersionError):
                continue
            failure = _first_failure(results)
            if failure is not None:
                raise errors.UnknownServerError(f"writing assignment of {topic}: {failure!r}")
            return
        raise errors.UnknownServerError(f"assignment of {topic} kept changing")

    # -- partition states ----------------------------------------------------

    def get_partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        try:
            data, stat = self.client.get(state_path(topic, partition))
        except NoNodeError:
            return None
        return model.decode_leader_and_isr(data, zk_version=int(stat.version))

    def get_partition_states(self, topic: str) -> dict[int, LeaderAndIsr]:
        try:
            names = self.client.get_children(partitions_path(topic))
        except NoNodeError:
            return {}
        out: dict[int, LeaderAndIsr] = {}
        for name in names:
            state = self.get_partition_state(topic, int(name))
            if state is not None:
                out[int(name)] = state
        return dict(sorted(out.items()))

    def create_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: ControllerEpochZk
    ) -> LeaderAndIsr | None:
        """Create a new partition's state znode (fenced); None if it already exists."""
        self.client.ensure_path(partition_path(topic, partition))
        tx = self._fenced(fence)
        tx.create(state_path(topic, partition), model.encode_leader_and_isr(state))
        results = tx.commit()
        self._raise_if_fenced(results, fence)
        if isinstance(results[1], NodeExistsError):
            return None
        if isinstance(results[1], Exception):
            raise errors.UnknownServerError(
                f"creating state of {topic}-{partition}: {results[1]!r}"
            )
        return dataclasses.replace(state, zk_version=0)

    def update_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, fence: ControllerEpochZk
    ) -> LeaderAndIsr | None:
        """Controller write of a state, conditional on ``state.zk_version`` and fenced.

        Returns the state with its new ``zk_version``, or None on a version
        conflict (a leader changed the ISR meanwhile: re-read and retry).
        """
        tx = self._fenced(fence)
        tx.set_data(
            state_path(topic, partition),
            model.encode_leader_and_isr(state),
            version=state.zk_version,
        )
        results = tx.commit()
        self._raise_if_fenced(results, fence)
        if isinstance(results[1], (BadVersionError, NoNodeError)):
            return None
        if isinstance(results[1], Exception):
            raise errors.UnknownServerError(
                f"updating state of {topic}-{partition}: {results[1]!r}"
            )
        return dataclasses.replace(state, zk_version=int(results[1].version))

    def update_isr(
        self, topic: str, partition: int, state: LeaderAndIsr, *, expected_zk_version: int
    ) -> int | None:
        """A partition leader's ISR change: conditional write plus an ISR change notification.

        Both go in one multi-op.  Returns the new znode version, or None on a
        version conflict (the controller or another leader wrote first).
        """
        tx = self.client.transaction()
        tx.set_data(
            state_path(topic, partition),
            model.encode_leader_and_isr(state),
            version=expected_zk_version,
        )
        tx.create(
            f"{ISR_CHANGES}/{ISR_CHANGE_PREFIX}",
            model.encode_partitions_list([(topic, partition)]),
            sequence=True,
        )
        results = tx.commit()
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            return None
        failure = _first_failure(results)
        if failure is not None:
            raise errors.UnknownServerError(f"ISR update of {topic}-{partition}: {failure!r}")
        return int(results[0].version)

    # -- ISR change notifications ---------------------------------------------

    def get_isr_change_notifications(self, watch: Watch | None = None) -> list[str]:
        names = self.client.get_children(ISR_CHANGES, watch=watch)
        return sorted(n for n in names if n.startswith(ISR_CHANGE_PREFIX))

    def read_isr_change_notifications(self, names: Iterable[str]) -> set[tuple[str, int]]:
        out: set[tuple[str, int]] = set()
        for name in names:
            try:
                data, _ = self.client.get(f"{ISR_CHANGES}/{name}")
            except NoNodeError:
                continue
            out.update(model.decode_partitions_list(data))
        return out

    def delete_isr_change_notifications(
        self, names: Iterable[str], fence: ControllerEpochZk
    ) -> None:
        for name in names:
            tx = self._fenced(fence)
            tx.delete(f"{ISR_CHANGES}/{name}")
            results = tx.commit()
            self._raise_if_fenced(results, fence)

    # -- deletion ------------------------------------------------------------

    def mark_topic_for_deletion(self, topic: str) -> None:
        if self.client.exists(topic_path(topic)) is None:
            raise errors.UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        with contextlib.suppress(NodeExistsError):
            self.client.create(f"{DELETE_TOPICS}/{topic}", b"", makepath=True)

    def get_topics_to_delete(self, watch: Watch | None = None) -> list[str]:
        return sorted(self.client.get_children(DELETE_TOPICS, watch=watch))

    def delete_topic_znodes(self, topic: str, fence: ControllerEpochZk) -> None:
        """Remove a topic's znodes, its config and its deletion marker in one fenced multi-op."""
        paths: list[str] = []
        try:
            for name in self.client.get_children(partitions_path(topic)):
                ppath = partition_path(topic, int(name))
                paths.extend(f"{ppath}/{child}" for child in self.client.get_children(ppath))
                paths.append(ppath)
            paths.append(partitions_path(topic))
        except NoNodeError:
            pass
        tx = self._fenced(fence)
        for path in paths:
            tx.delete(path)
        existing = [
            p
            for p in (topic_path(topic), topic_config_path(topic), f"{DELETE_TOPICS}/{topic}")
            if self.client.exists(p) is not None
        ]
        for path in existing:
            tx.delete(path)
        results = tx.commit()
        self._raise_if_fenced(results, fence)
        failure = _first_failure(results)
        if failure is not None:
            raise errors.UnknownServerError(f"deleting topic '{topic}': {failure!r}")

    def remove_deletion_marker(self, topic: str, fence: ControllerEpochZk) -> None:
        tx = self._fenced(fence)
        tx.delete(f"{DELETE_TOPICS}/{topic}")
        results = tx.commit()
        self._raise_if_fenced(results, fence)

    # -- configs -------------------------------------------------------------

    def get_topic_config(self, topic: str, watch: Watch | None = None) -> dict[str, str]:
        try:
            data, _ = self.client.get(topic_config_path(topic), watch=watch)
        except NoNodeError:
            return {}
        return model.decode_config(data)

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        data = model.encode_config(config)
        try:
            self.client.set(topic_config_path(topic), data)
        except NoNodeError:
            self.client.create(topic_config_path(topic), data, makepath=True)

    def get_broker_config(self, entity: str) -> dict[str, str]:
        """``entity`` is a broker id or ``<default>`` (cluster-wide dynamic defaults)."""
        try:
            data, _ = self.client.get(f"{CONFIG_BROKERS}/{entity}")
        except NoNodeError:
            return {}
        return model.decode_config(data)

    def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None:
        data = model.encode_config(config)
        try:
            self.client.set(f"{CONFIG_BROKERS}/{entity}", data)
        except NoNodeError:
            self.client.create(f"{CONFIG_BROKERS}/{entity}", data, makepath=True)

    # -- preferred replica election -------------------------------------------

    def request_preferred_election(self, partitions: Sequence[tuple[str, int]]) -> bool:
        """Write the election request for the controller; False if one is pending."""
        try:
            self.client.create(
                PREFERRED_ELECTION, model.encode_partitions_list(partitions), makepath=True
            )
        except NodeExistsError:
            return False
        return True

    def get_preferred_election(self, watch: Watch | None = None) -> list[tuple[str, int]] | None:
        if self.client.exists(PREFERRED_ELECTION, watch=watch) is None:
            return None
        try:
            data, _ = self.client.get(PREFERRED_ELECTION)
        except NoNodeError:
            return None
        return model.decode_partitions_list(data)

    def preferred_election_pending(self) -> bool:
        return self.client.exists(PREFERRED_ELECTION) is not None

    def delete_preferred_election(self, fence: ControllerEpochZk) -> None:
        tx = self._fenced(fence)
        tx.delete(PREFERRED_ELECTION)
        results = tx.commit()
        self._raise_if_fenced(results, fence)
