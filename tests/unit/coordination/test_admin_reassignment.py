"""Admin calls during a move: CreatePartitions is refused with REASSIGNMENT_IN_PROGRESS and
writes nothing (Kafka refuses it while a partition of the topic is being reassigned)."""

from __future__ import annotations

import random

import pytest
from headwater import errors
from headwater.coordination.admin import NewTopic, TopicAdmin
from headwater.coordination.model import ReplicaReassignment
from headwater.coordination.settings import CoordinationSettings

from .fakes import FakeAdminZk
from .helpers import reg


def test_create_partitions_refused_while_a_partition_moves() -> None:
    zk = FakeAdminZk()
    zk.brokers = {b: reg(b) for b in (1, 2, 3, 4)}
    admin = TopicAdmin(zk, CoordinationSettings(zookeeper_connect="x"), rng=random.Random(1))
    admin.create_topic(NewTopic("t", assignments={0: [4, 2, 1]}))
    zk.reassignments[("t", 0)] = ReplicaReassignment(adding=(4,), removing=(1,))
    writes = list(zk.writes)
    with pytest.raises(errors.ReassignmentInProgressError):
        admin.create_partitions("t", 2)
    assert zk.writes == writes
    del zk.reassignments[("t", 0)]
    assert admin.create_partitions("t", 2).num_partitions == 2
