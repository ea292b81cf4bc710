"""A throttled move under an acks=all idempotent producer and a consumer group, with one
process SIGKILLed mid-move: the leaving leader, the arriving broker, or the controller.
Afterwards the move is complete, every acknowledged record is in the log exactly once,
and the group has read all of them.  Each takes about 15-30 s, so all are in the default run."""

from __future__ import annotations

import headwater
import pytest
from headwater.testing import Cluster

from .conftest import (
    GroupReader,
    Load,
    Roles,
    assert_exactly_once,
    moving,
    read_log,
    replica_bytes,
    setup_topic,
    start_move,
    throttle,
    unthrottle,
    wait_moved,
    wait_until,
)

pytestmark = pytest.mark.e2e

PREFILL_MIB = 6.0
RATE = 1_000_000
"""Bytes/s: the pre-filled partition takes several seconds to copy."""


def _move_and_kill(
    quad: Cluster, admin: headwater.Admin, victim: str, *, restart: bool
) -> tuple[Roles, list[bytes], list[bytes]]:
    roles = setup_topic(quad, admin, prefill_mib=PREFILL_MIB)
    throttle(admin, roles, rate=RATE)
    reader = GroupReader(quad.bootstrap, "movers")
    load = Load(quad.bootstrap)
    try:
        wait_until(lambda: load.sent() > 50, timeout_s=30, what="the producer to start")
        start_move(admin, roles.target)
        wait_until(
            lambda: replica_bytes(quad, roles.arriving) > 512 * 1024,
            timeout_s=30,
            what="the arriving replica to copy some data",
        )
        assert moving(admin), "the move must still be in progress when the victim dies"
        killed = getattr(roles, victim)
        quad.kill(killed)
        if restart:
            quad.start_broker(killed)
        wait_moved(quad, admin, roles.target, timeout_s=90)
        acked = load.stop()
        unthrottle(admin)
        wait_until(
            lambda: reader.seen() >= set(acked), timeout_s=60, what="the group to read every record"
        )
    finally:
        reader.stop()
        if not load._stop.is_set():
            load.stop()
    assert reader.error is None, reader.error
    return roles, acked, read_log(quad.bootstrap)


def _assert_settled(quad: Cluster, roles: Roles) -> None:
    wait_until(
        lambda: set(quad.isr_for("moving", 0)) == set(roles.target),
        timeout_s=60,
        what="the ISR to be the target replicas",
    )
    assert quad.leader_for("moving", 0) in roles.target


def test_leaving_leader_killed_mid_move(quad: Cluster, admin: headwater.Admin) -> None:
    roles, acked, log = _move_and_kill(quad, admin, "leaving", restart=False)
    assert len(acked) > 50
    assert_exactly_once(log, acked)
    _assert_settled(quad, roles)


def test_arriving_broker_killed_mid_move(quad: Cluster, admin: headwater.Admin) -> None:
    roles, acked, log = _move_and_kill(quad, admin, "arriving", restart=True)
    assert_exactly_once(log, acked)
    _assert_settled(quad, roles)
    wait_until(
        lambda: replica_bytes(quad, roles.leaving) == 0,
        timeout_s=30,
        what="the leaving replica's log to be deleted",
    )


def test_controller_killed_mid_move(quad: Cluster, admin: headwater.Admin) -> None:
    roles, acked, log = _move_and_kill(quad, admin, "controller", restart=True)
    assert quad.controller_id() is not None
    assert_exactly_once(log, acked)
    _assert_settled(quad, roles)
    wait_until(
        lambda: replica_bytes(quad, roles.leaving) == 0,
        timeout_s=30,
        what="the leaving replica's log to be deleted",
    )
