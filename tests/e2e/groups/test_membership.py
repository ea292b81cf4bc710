"""Membership against real brokers: 3 consumers on 6 partitions get 2 each, a leave and
a join rebalance the group, no partition is owned twice in one generation,
cooperative-sticky never revokes partitions that stay, static members come back to
their assignment without a rebalance, and a duplicate instance id is fenced."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import headwater
import pytest
from headwater import errors
from headwater.client.group.admin import ConsumerGroupDescription

from tests.e2e.groups.conftest import Member, wait_until

pytestmark = pytest.mark.e2e


def group_name() -> str:
    return f"grp-{uuid.uuid4().hex[:8]}"


def stable(admin: headwater.Admin, group: str, size: int) -> ConsumerGroupDescription | None:
    d = admin.describe_groups([group])[group]
    if d.state != "Stable" or len(d.members) != size:
        return None
    return d


def check_exclusive(d: ConsumerGroupDescription, partitions: int) -> bool:
    """No partition owned by two members of this generation (asserted); True when all are owned.

    A cooperative rebalance is Stable between its two rounds with the moved
    partitions owned by nobody, so completeness is waited for, not asserted.
    """
    owned = [tp for m in d.members for tp in m.assignment]
    assert len(owned) == len(set(owned)), f"generation {d.generation_id}: {d.members}"
    assert {tp.partition for tp in owned} <= set(range(partitions))
    return len(owned) == partitions


def settle(
    admin: headwater.Admin, group: str, ms: list[Member], partitions: int, timeout_s: float = 30
) -> ConsumerGroupDescription:
    """Wait until the group is Stable with ``ms`` and their consumers hold what it says."""
    found: list[ConsumerGroupDescription] = []

    def done() -> bool:
        d = stable(admin, group, len(ms))
        if d is None:
            return False
        if not check_exclusive(d, partitions):
            return False
        by_consumer = sorted(sorted(m.assignment) for m in ms)
        by_group = sorted(sorted(m.assignment) for m in d.members)
        if by_consumer != by_group:
            return False
        found.append(d)
        return True

    wait_until(done, timeout_s=timeout_s, what=f"group {group} stable with {len(ms)} members")
    return found[-1]


def test_three_members_leave_and_join(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(6), group_name()
    ms = [members(cluster.bootstrap, group, name) for _ in range(3)]
    d1 = settle(admin, group, ms, 6)
    assert sorted(len(m.assignment) for m in ms) == [2, 2, 2]

    ms[0].stop()  # leaves the group
    d2 = settle(admin, group, ms[1:], 6)
    assert sorted(len(m.assignment) for m in ms[1:]) == [3, 3]
    assert d2.generation_id > d1.generation_id

    ms.append(members(cluster.bootstrap, group, name))
    d3 = settle(admin, group, ms[1:], 6)
    assert sorted(len(m.assignment) for m in ms[1:]) == [2, 2, 2]
    assert d3.generation_id > d2.generation_id
    assert all(m.error is None for m in ms)


def test_cooperative_sticky_never_revokes_partitions_that_stay(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(6), group_name()
    coop = {"partition_assignment_strategy": "cooperative-sticky"}
    first = [members(cluster.bootstrap, group, name, **coop) for _ in range(2)]
    settle(admin, group, first, 6)
    before = {id(m): m.assignment for m in first}
    # The first two members may have gone through a cooperative round of their own
    # (one joined before the other): only revocations after this point count.
    seen = {id(m): len(m.listener.revoked) for m in first}
    third = members(cluster.bootstrap, group, name, **coop)
    settle(admin, group, [*first, third], 6)
    assert len(third.assignment) == 2
    for m in first:
        kept = m.assignment
        assert len(kept) == 2 and kept <= before[id(m)]
        later = m.listener.revoked[seen[id(m)] :]
        revoked = set().union(*later) if later else set()
        assert revoked == before[id(m)] - kept, "only moved partitions are revoked"
        assert not (revoked & kept)


def test_static_member_restart_keeps_assignment_and_generation(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(4), group_name()
    a = members(cluster.bootstrap, group, name, group_instance_id="a")
    b = members(cluster.bootstrap, group, name, group_instance_id="b")
    d1 = settle(admin, group, [a, b], 4)
    a_before = a.assignment
    a.stop()  # a static member does not leave: its place waits session.timeout.ms
    a2 = members(cluster.bootstrap, group, name, group_instance_id="a")
    d2 = settle(admin, group, [a2, b], 4)
    assert a2.assignment == a_before
    assert d2.generation_id == d1.generation_id
    assert {m.group_instance_id for m in d2.members} == {"a", "b"}


def test_duplicate_instance_id_is_fenced(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(2), group_name()
    first = members(cluster.bootstrap, group, name, group_instance_id="dup")
    settle(admin, group, [first], 2)
    second = members(cluster.bootstrap, group, name, group_instance_id="dup")
    wait_until(
        lambda: first.error is not None or second.error is not None,
        timeout_s=30,
        what="one of the two members to be fenced",
    )
    fenced = first if first.error is not None else second
    assert isinstance(fenced.error, errors.FencedInstanceIdError)
