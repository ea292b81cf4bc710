"""Replication state machines: leader/follower roles, ISR, high watermark, leader epochs.

Pure logic (docs/design.md, "Layers"): events in, decisions out, the clock passed
as a parameter.  :mod:`headwater.server` runs them against real logs, gRPC and
ZooKeeper.
"""

from headwater.replication.longpoll import FetchWait
from headwater.replication.partition import Partition
from headwater.replication.state import (
    ISR_TRANSITIONS,
    ROLE_TRANSITIONS,
    IllegalStateTransition,
    IsrState,
    PartitionRole,
)
from headwater.replication.values import (
    NO_EPOCH,
    FollowerFetchResult,
    FollowerState,
    IsrChange,
    ProduceCompletion,
)
from headwater.values import TopicPartition

__all__ = [
    "ISR_TRANSITIONS",
    "NO_EPOCH",
    "ROLE_TRANSITIONS",
    "FetchWait",
    "FollowerFetchResult",
    "FollowerState",
    "IllegalStateTransition",
    "IsrChange",
    "IsrState",
    "Partition",
    "PartitionRole",
    "ProduceCompletion",
    "TopicPartition",
]
