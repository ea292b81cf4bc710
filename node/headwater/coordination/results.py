"""What the active controller decides, as values (Kafka's ``ControllerResult``).

Each controller event handler in :mod:`headwater.coordination.decisions` is a
pure function of the event and the controller's view of the cluster
(:class:`~headwater.coordination.context.ControllerContext`).  It returns a
:class:`ControllerResult`: an ordered tuple of effects that the controller's
event thread executes one at a time (:mod:`headwater.coordination.executor`).
Four kinds of effect:

* **view updates** (:data:`ViewUpdate`): the controller's own memory of the
  cluster, applied with :meth:`ControllerContext.apply
  <headwater.coordination.context.ControllerContext.apply>`;
* **ZooKeeper writes** (:data:`ZkWrite`): each fenced by the controller epoch
  (a deposed controller's write fails as a whole); a partition state write is
  also conditional on the znode version it was decided from;
* **sender changes** (:class:`AddBroker`, :class:`RemoveBroker`): open or close
  the per-broker request queue of :mod:`headwater.coordination.channel`;
* **broker requests** (:data:`BrokerRequest`): LeaderAndIsr, UpdateMetadata,
  StopReplica.

Why a request names partitions rather than carrying their states: a
partition leader may change the ISR between the controller's read and its
write, so a conditional write can lose; the executor then re-reads the state
and decides that partition again with the write's :class:`Election` (Kafka's
``updateLeaderAndIsr`` retries the same way).  A request therefore takes the
states from the view when the executor reaches it, i.e. after the writes
before it landed, and :class:`Announce` sends exactly the states written since
the previous announcement.  When every write lands as decided, the view the
executor ends with is the one the decision predicted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Protocol, TypeVar

from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, ReplicaReassignment
from headwater.values import TopicPartition


class Election(Protocol):
    """Decides a partition's next state from its replicas and current state (pure).

    Returns None when this election does not change the partition (nothing to
    do, or no replica may lead).  Implementations live in
    :mod:`headwater.coordination.partitions`.
    """

    def decide(self, replicas: tuple[int, ...], current: LeaderAndIsr) -> LeaderAndIsr | None: ...


# -- view updates ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SetLiveBrokers:
    """The registered brokers the controller talks to (replaces the previous set)."""

    brokers: tuple[BrokerRegistration, ...]


@dataclasses.dataclass(frozen=True)
class SetShuttingDown:
    """Brokers in controlled shutdown: live, but they may no longer lead."""

    broker_ids: frozenset[int]


@dataclasses.dataclass(frozen=True)
class AddPartitions:
    """Replica assignments of a new topic, or of partitions added to a known one.

    ``topic_id``: the new topic's id ("" for partitions added to a known topic).
    """

    topic: str
    partitions: Mapping[int, tuple[int, ...]]
    topic_id: str = ""


@dataclasses.dataclass(frozen=True)
class LoadStates:
    """Partition states read from ZooKeeper (they replace the cached ones)."""

    states: Mapping[TopicPartition, LeaderAndIsr]


@dataclasses.dataclass(frozen=True)
class MarkTopicDeleting:
    """The topic is being deleted: no more elections for its partitions."""

    topic: str


@dataclasses.dataclass(frozen=True)
class ForgetTopic:
    """Drop a topic's assignment and partition states from the view."""

    topic: str


@dataclasses.dataclass(frozen=True)
class SetReassignment:
    """A partition's replica set and its move in progress (None: not moving)."""

    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    reassignment: ReplicaReassignment | None


ViewUpdate = (
    SetLiveBrokers
    | SetShuttingDown
    | AddPartitions
    | LoadStates
    | MarkTopicDeleting
    | ForgetTopic
    | SetReassignment
)


# -- ZooKeeper writes (all fenced by the controller epoch) ---------------------------


@dataclasses.dataclass(frozen=True)
class CreatePartitionState:
    """Create a new partition's state znode (it then has znode version 0).

    If the znode exists already (an earlier controller created it), the
    executor adopts what is there.
    """

    topic_partition: TopicPartition
    state: LeaderAndIsr


@dataclasses.dataclass(frozen=True)
class UpdatePartitionState:
    """Replace a partition's state, conditional on ``base.zk_version``.

    ``state`` was decided by ``election`` from ``base``.  If the view no longer
    holds ``base`` when the write is reached, or ZooKeeper refuses the version,
    the executor re-reads the state and decides again with ``election``.
    """

    topic_partition: TopicPartition
    base: LeaderAndIsr
    state: LeaderAndIsr
    election: Election = dataclasses.field(compare=False)


@dataclasses.dataclass(frozen=True)
class DeleteTopicZnodes:
    """Remove a topic's assignment, partition states, config and deletion marker."""

    topic: str


@dataclasses.dataclass(frozen=True)
class RemoveDeletionMarker:
    """Drop ``/admin/delete_topics/<topic>`` for a topic that no longer exists."""

    topic: str


@dataclasses.dataclass(frozen=True)
class DeleteIsrChangeNotifications:
    names: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class DeletePreferredElection:
    """Drop ``/admin/preferred_replica_election`` once the election has run."""


@dataclasses.dataclass(frozen=True)
class WriteReassignment:
    """Write one partition's replicas and ``adding``/``removing`` into the topic's znode.

    The other partitions of the znode are kept as ZooKeeper holds them
    (read-modify-write on the znode version, fenced by the controller epoch).
    """

    topic_partition: TopicPartition
    replicas: tuple[int, ...]
    reassignment: ReplicaReassignment | None


ZkWrite = (
    WriteReassignment
    | CreatePartitionState
    | UpdatePartitionState
    | DeleteTopicZnodes
    | RemoveDeletionMarker
    | DeleteIsrChangeNotifications
    | DeletePreferredElection
)


# -- per-broker senders -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AddBroker:
    """Start (or restart, if the registration changed) the sender to a broker."""

    registration: BrokerRegistration


@dataclasses.dataclass(frozen=True)
class RemoveBroker:
    broker_id: int


SenderChange = AddBroker | RemoveBroker


# -- requests to brokers ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SendLeaderAndIsr:
    """LeaderAndIsr with the current states of ``partitions`` to their live replicas.

    ``to``, when set, limits the recipients to those brokers.
    """

    partitions: tuple[TopicPartition, ...]
    to: frozenset[int] | None = None


@dataclasses.dataclass(frozen=True)
class SendUpdateMetadata:
    """UpdateMetadata with the current states of ``partitions`` to every live broker."""

    partitions: tuple[TopicPartition, ...]
    deleted_topics: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Announce:
    """Tell brokers about the partition states written since the previous ``Announce``.

    LeaderAndIsr to the live replicas of each written partition, then
    UpdateMetadata to every live broker.  ``partitions`` are the ones the
    decision expects to have written; one whose write was given up is left out.
    """

    partitions: tuple[TopicPartition, ...]


@dataclasses.dataclass(frozen=True)
class SendStopReplica:
    broker_id: int
    partitions: tuple[TopicPartition, ...]
    delete: bool


BrokerRequest = SendLeaderAndIsr | SendUpdateMetadata | Announce | SendStopReplica

Effect = ViewUpdate | ZkWrite | SenderChange | BrokerRequest

_E = TypeVar("_E")


@dataclasses.dataclass(frozen=True)
class ControllerResult:
    """The effects of one decision, in the order the executor must carry them out."""

    effects: tuple[Effect, ...] = ()

    def __add__(self, other: ControllerResult) -> ControllerResult:
        return ControllerResult(self.effects + other.effects)

    def __bool__(self) -> bool:
        return bool(self.effects)

    def of(self, kind: type[_E]) -> list[_E]:
        """The effects of one type, in order (for callers and tests that look at one kind)."""
        return [e for e in self.effects if isinstance(e, kind)]


EMPTY = ControllerResult()
