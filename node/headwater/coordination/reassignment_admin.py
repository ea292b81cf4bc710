"""The broker's side of the reassignment and dynamic broker config Admin calls.

* AlterPartitionReassignments goes to the controller, as in Kafka's
  ZooKeeper mode: on the active controller it is an event on the controller
  thread (:class:`~headwater.coordination.events.AlterPartitionReassignments`);
  any other broker raises NotControllerError and the client asks again.
* ListPartitionReassignments reads the assignment znodes, where ``adding_replicas``
  and ``removing_replicas`` are kept, so any broker answers.
* Dynamic broker configs live in ``/config/brokers/<id>`` and
  ``/config/brokers/<default>`` (Kafka's layout); brokers watch them.

Thread safety: synchronous ZooKeeper calls, for worker threads (never kazoo's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kazoo.recipe.watchers import DataWatch

from headwater import errors
from headwater.coordination import model
from headwater.coordination.decisions import reassignment
from headwater.coordination.store import CONFIG_BROKERS, ZkStore
from headwater.values import TopicPartition

if TYPE_CHECKING:
    from headwater.coordination.broker import BrokerCoordinator


def alter_partition_reassignments(
    coordinator: BrokerCoordinator,
    reassignments: Mapping[TopicPartition, tuple[int, ...] | None],
    *,
    timeout_s: float = 30.0,
) -> dict[TopicPartition, errors.HeadwaterError | None]:
    """Start, replace or cancel (None) moves on the controller; each partition's refusal."""
    if not coordinator.is_controller:
        raise errors.NotControllerError(f"broker {coordinator.broker_id} is not the controller")
    return coordinator.controller.alter_partition_reassignments(reassignments, timeout_s=timeout_s)


def list_partition_reassignments(
    store: ZkStore, wanted: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, reassignment.PartitionReassignment]:
    """The moves in progress (of ``wanted``, if given), from the assignment znodes."""
    topics = sorted({tp.topic for tp in wanted}) if wanted else store.get_topics()
    assignments: dict[str, dict[int, tuple[int, ...]]] = {}
    moving: dict[TopicPartition, model.ReplicaReassignment] = {}
    for topic in topics:
        a = store.get_assignment(topic)
        if a is None:
            continue
        assignments[topic] = dict(a.partitions)
        moving.update({TopicPartition(topic, p): m for p, m in a.reassignments.items()})
    return reassignment.list_reassignments(assignments, moving, set(wanted) if wanted else None)


def alter_broker_config(
    store: ZkStore, entity: str, *, set_: Mapping[str, str], delete: Sequence[str] = ()
) -> dict[str, str]:
    """Kafka's incremental alter of ``/config/brokers/<entity>``; returns the new overrides."""
    config = store.get_broker_config(entity)
    config.update(set_)
    for key in delete:
        config.pop(key, None)
    store.set_broker_config(entity, config)
    return config


def watch_broker_config(
    store: ZkStore, entity: str, callback: Callable[[str, dict[str, str]], None]
) -> Callable[[], None]:
    """Call ``callback(entity, config)`` now and on every change; returns a cancel function.

    The callback runs on kazoo's thread: it must only hand the config on.
    """
    cancelled = threading.Event()
    path = f"{CONFIG_BROKERS}/{entity}"
    store.client.ensure_path(path)

    def on_change(data: bytes | None, _stat: object) -> bool | None:
        if cancelled.is_set():
            return False
        callback(entity, model.decode_config(data) if data else {})
        return None

    DataWatch(store.client, path, on_change)
    return cancelled.set
