"""Cancelling a move in mid-copy (Kafka's KIP-455 cancel, a None target) under an acks=all
producer: the partition goes back to its original replicas, the replica that was being added
is stopped and its log deleted, no acknowledged record is lost or duplicated, and a second
cancel is refused with NO_REASSIGNMENT_IN_PROGRESS."""

from __future__ import annotations

import headwater
import pytest
from headwater import errors
from headwater.testing import Cluster

from .conftest import (
    TP,
    Load,
    assert_exactly_once,
    moving,
    read_log,
    replica_bytes,
    setup_topic,
    start_move,
    throttle,
    unthrottle,
    wait_until,
)

pytestmark = pytest.mark.e2e


def test_cancel_mid_move_returns_to_the_original_replicas(
    quad: Cluster, admin: headwater.Admin
) -> None:
    roles = setup_topic(quad, admin, prefill_mib=4.0)
    throttle(admin, roles, rate=500_000)
    load = Load(quad.bootstrap)
    try:
        start_move(admin, roles.target)
        wait_until(
            lambda: replica_bytes(quad, roles.arriving) > 256 * 1024,
            timeout_s=30,
            what="the arriving replica to copy some data",
        )
        assert moving(admin)
        assert admin.alter_partition_reassignments({TP: None}) == {TP: None}
        wait_until(lambda: not moving(admin), timeout_s=30, what="the cancel to finish")
        acked = load.stop()
    finally:
        if not load._stop.is_set():
            load.stop()
    unthrottle(admin)
    assignment = quad.zk.get_assignment("moving")
    assert assignment is not None
    assert sorted(assignment.partitions[0]) == sorted(roles.origin)
    assert assignment.reassignments == {}
    wait_until(
        lambda: replica_bytes(quad, roles.arriving) == 0,
        timeout_s=30,
        what="the added replica's log to be deleted",
    )
    wait_until(
        lambda: set(quad.isr_for("moving", 0)) == set(roles.origin),
        timeout_s=30,
        what="the original replicas in sync",
    )
    assert quad.leader_for("moving", 0) in roles.origin
    assert_exactly_once(read_log(quad.bootstrap), acked)
    again = admin.alter_partition_reassignments({TP: None})[TP]
    assert isinstance(again, errors.NoReassignmentInProgressError)
