"""Controller events (Kafka's ``ControllerEvent`` family).

ZooKeeper watches, session listeners, RPC handlers and the periodic rebalance
timer do nothing but put one of these on the controller's queue; the
controller thread processes them one at a time.  Events that an RPC waits on
carry a ``concurrent.futures.Future`` for the answer.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future

from headwater.errors import ErrorCode, HeadwaterError
from headwater.values import TopicPartition


@dataclasses.dataclass(frozen=True)
class Startup:
    pass


@dataclasses.dataclass(frozen=True)
class Shutdown:
    pass


@dataclasses.dataclass(frozen=True)
class ControllerChange:
    """``/controller`` was created, changed or deleted."""


@dataclasses.dataclass(frozen=True)
class Reelect:
    pass


@dataclasses.dataclass(frozen=True)
class Expire:
    """This broker's ZooKeeper session expired: resign at once."""


@dataclasses.dataclass(frozen=True)
class RegisterBrokerAndReelect:
    """A new session after an expiry: register the broker again, then take part in the election."""


@dataclasses.dataclass(frozen=True)
class BrokerChange:
    pass


@dataclasses.dataclass(frozen=True)
class TopicChange:
    pass


@dataclasses.dataclass(frozen=True)
class PartitionModifications:
    topic: str


@dataclasses.dataclass(frozen=True)
class TopicDeletion:
    pass


@dataclasses.dataclass(frozen=True)
class IsrChangeNotification:
    pass


@dataclasses.dataclass(frozen=True)
class ControlledShutdown:
    broker_id: int
    broker_epoch: int
    result: Future[list[TopicPartition]] = dataclasses.field(compare=False)


@dataclasses.dataclass(frozen=True)
class PreferredReplicaElection:
    """Elect preferred leaders for ``partitions`` (None: all partitions).

    ``from_zk``: the request came from ``/admin/preferred_replica_election``,
    which is read (and deleted) by the handler.
    """

    partitions: tuple[TopicPartition, ...] | None = None
    from_zk: bool = False
    result: Future[dict[TopicPartition, ErrorCode]] | None = dataclasses.field(
        default=None, compare=False
    )


@dataclasses.dataclass(frozen=True)
class AutoPreferredReplicaLeaderElection:
    pass


@dataclasses.dataclass(frozen=True)
class AlterPartitionReassignments:
    """Move (target replicas) or cancel (None) the reassignment of each partition (KIP-455)."""

    reassignments: tuple[tuple[TopicPartition, tuple[int, ...] | None], ...]
    result: Future[dict[TopicPartition, HeadwaterError | None]] = dataclasses.field(compare=False)


ControllerEvent = (
    Startup
    | Shutdown
    | ControllerChange
    | Reelect
    | Expire
    | RegisterBrokerAndReelect
    | BrokerChange
    | TopicChange
    | PartitionModifications
    | TopicDeletion
    | IsrChangeNotification
    | ControlledShutdown
    | PreferredReplicaElection
    | AutoPreferredReplicaLeaderElection
    | AlterPartitionReassignments
)
