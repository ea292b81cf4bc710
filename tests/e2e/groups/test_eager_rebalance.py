"""An eager rebalance restarts every partition at its committed offset, as Kafka's does.

Under the classic protocol with eager rebalancing Kafka's consumer revokes every partition
before it rejoins (``ConsumerCoordinator.onJoinPrepare``) and positions the partitions of
the new assignment at their committed offsets, even those it owned before.  Applications
drop the records they buffered in ``on_partitions_revoked`` and count on reading them
again: here consumer A commits offset 4 of each partition, reads past it, B joins, and A
must read its re-assigned partition again from offset 4.  The protocol is the highest one
every configured assignor supports, so ``["cooperative-sticky", "range"]`` (the first step
of Kafka's upgrade to cooperative rebalancing) is eager like ``range``;
``cooperative-sticky`` alone keeps the positions of the partitions a member retains
(KIP-429).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import headwater
import pytest

from tests.e2e.groups.conftest import (
    CONSUMER_SETTINGS,
    RecordingListener,
    produce,
    wait_until,
)

pytestmark = pytest.mark.e2e

PER_PARTITION = 10
COMMITTED = 4


def _read_all(consumer: headwater.Consumer, want: int) -> list[tuple[int, int]]:
    got: list[tuple[int, int]] = []

    def more() -> bool:
        got.extend((r.partition, r.offset) for r in consumer.poll(200))
        return len(got) >= want

    wait_until(more, timeout_s=60, what=f"{want} records")
    return got


@pytest.mark.parametrize(
    ("assignor", "read_again"),
    [
        (["range"], True),
        (["cooperative-sticky", "range"], True),
        (["cooperative-sticky"], False),
    ],
)
def test_rebalance_positions_of_retained_partitions(
    cluster: Any, topic: Callable[..., str], members: Any, assignor: list[str], read_again: bool
) -> None:
    name, group = topic(2), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 2 * PER_PARTITION, partitions=2)
    settings = {
        **CONSUMER_SETTINGS,
        "enable_auto_commit": False,
        "partition_assignment_strategy": assignor,
    }
    listener = RecordingListener()
    a = headwater.Consumer(bootstrap_servers=cluster.bootstrap, group_id=group, **settings)
    try:
        a.subscribe([name], listener=listener)
        first = _read_all(a, 2 * PER_PARTITION)
        assert sorted(first) == [(p, o) for p in range(2) for o in range(PER_PARTITION)]
        both = {headwater.TopicPartition(name, 0), headwater.TopicPartition(name, 1)}
        assert listener.assigned == [both]
        a.commit({tp: COMMITTED for tp in both})  # records from COMMITTED on are uncommitted

        b = members(
            cluster.bootstrap,
            group,
            name,
            enable_auto_commit=False,
            partition_assignment_strategy=assignor,
        )
        again: list[tuple[int, int]] = []

        def rebalanced() -> bool:
            again.extend((r.partition, r.offset) for r in a.poll(200))
            return len(a.assignment()) == 1 and len(b.assignment) == 1

        wait_until(rebalanced, timeout_s=60, what="A and B holding one partition each")
        (kept,) = a.assignment()
        if read_again:
            # Every partition was revoked, then the kept one restarted at its committed
            # offset: A reads its records again.
            assert listener.revoked[0] == both

            def read_again_from_committed() -> bool:
                again.extend((r.partition, r.offset) for r in a.poll(200))
                return len(again) >= PER_PARTITION - COMMITTED

            wait_until(read_again_from_committed, timeout_s=30, what=f"A reading {kept} again")
            assert sorted(again) == [(kept.partition, o) for o in range(COMMITTED, PER_PARTITION)]
        else:
            # Only the moved partition was revoked; the kept one goes on from its position.
            assert listener.revoked[0] == {headwater.TopicPartition(name, 1 - kept.partition)}
            for _ in range(5):
                again.extend((r.partition, r.offset) for r in a.poll(200))
            assert again == []
        assert a.position(kept) == PER_PARTITION
    finally:
        a.close()
