"""Replication throttles with Kafka's names: at a tiny leader/follower rate a throttled move
is still copying long after an unthrottled one would have finished, while a partition whose
replicas are not listed moves at full speed; raising the rate with AlterConfigs (no restart)
lets the move finish, and the dynamic rates show in DescribeConfigs with their source."""

from __future__ import annotations

import time

import headwater
import pytest
from headwater.client import NewTopic, TopicPartition
from headwater.testing import Cluster

from .conftest import (
    TP,
    moving,
    replica_bytes,
    setup_topic,
    start_move,
    throttle,
    wait_moved,
    wait_until,
)

pytestmark = pytest.mark.e2e

TINY = 64 * 1024
"""Bytes/s: 4 MiB would take about a minute."""


def test_throttle_slows_only_the_listed_replicas(quad: Cluster, admin: headwater.Admin) -> None:
    roles = setup_topic(quad, admin, prefill_mib=4.0)
    throttle(admin, roles, rate=TINY)
    # Not listed in any throttled-replicas config: moves at full speed.
    other = TopicPartition("unlisted", 0)
    admin.create_topics([NewTopic("unlisted", replica_assignment={0: roles.origin})])
    with headwater.Producer(quad.bootstrap) as p:
        for i in range(4096):
            p.send("unlisted", b"u%07d" % i + b"." * 1016, partition=0)
        p.flush(120)
    wait_until(lambda: len(quad.isr_for("unlisted", 0)) == 3, timeout_s=60, what="unlisted in sync")
    described = admin.describe_broker_configs(roles.arriving)
    assert described["follower.replication.throttled.rate"].value == str(TINY)
    assert described["follower.replication.throttled.rate"].source == (
        "DYNAMIC_DEFAULT_BROKER_CONFIG"
    )

    start_move(admin, roles.target)
    assert admin.alter_partition_reassignments({other: roles.target}) == {other: None}
    wait_until(
        lambda: other not in admin.list_partition_reassignments(),
        timeout_s=60,
        what="the unlisted partition's move",
    )
    assert TP in admin.list_partition_reassignments()
    # Give the throttled move time enough to finish many times over were it unthrottled.
    time.sleep(5.0)
    copied = replica_bytes(quad, roles.arriving)
    assert moving(admin)
    assert 0 < copied < replica_bytes(quad, roles.staying)

    admin.alter_broker_configs(roles.arriving, {"follower.replication.throttled.rate": "1"})
    described = admin.describe_broker_configs(roles.arriving)
    assert described["follower.replication.throttled.rate"].source == "DYNAMIC_BROKER_CONFIG"
    # Lift every throttle without a restart: the move finishes.
    admin.alter_broker_configs(roles.arriving, {"follower.replication.throttled.rate": None})
    admin.alter_broker_configs(
        None,
        {"leader.replication.throttled.rate": None, "follower.replication.throttled.rate": None},
    )
    wait_moved(quad, admin, roles.target, timeout_s=60)
