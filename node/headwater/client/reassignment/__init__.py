"""Partition reassignment tools: plans, rebalancing and draining, without I/O.

The pure half of ``kafka-reassign-partitions`` and of a Cruise-Control-like
rebalancer: :mod:`.plan` reads and checks Kafka's JSON plans, :mod:`.generate`
places topics over chosen brokers (``--generate``), :mod:`.rebalance` evens
replicas, bytes and preferred leaders, :mod:`.drain` empties brokers.  They
take the cluster's layout as values and return plans; the ``Admin`` methods
of :mod:`headwater.client.admin.rebalance` do the I/O.
"""

from headwater.client.reassignment.drain import plan_drain
from headwater.client.reassignment.generate import generate
from headwater.client.reassignment.model import (
    BrokerInfo,
    BrokerLoad,
    PartitionProgress,
    PartitionStatus,
    RebalancePlan,
    ReplicaMove,
    VerifyResult,
    classify,
)
from headwater.client.reassignment.plan import (
    PartitionTarget,
    ReassignmentPlan,
    check_plan,
    parse_plan,
    parse_topics_to_move,
)
from headwater.client.reassignment.rebalance import RebalanceGoals, plan_rebalance

__all__ = [
    "BrokerInfo",
    "BrokerLoad",
    "PartitionProgress",
    "PartitionStatus",
    "PartitionTarget",
    "ReassignmentPlan",
    "RebalanceGoals",
    "RebalancePlan",
    "ReplicaMove",
    "VerifyResult",
    "check_plan",
    "classify",
    "generate",
    "parse_plan",
    "parse_topics_to_move",
    "plan_drain",
    "plan_rebalance",
]
