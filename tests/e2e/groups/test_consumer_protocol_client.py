"""Real consumers with ``group_protocol="consumer"`` (KIP-848) on a real 3-broker cluster:
three members read a topic once; one leaves and the others take its partitions over
without revoking their own; the coordinator broker is killed and the group keeps
consuming, losing nothing and reading again only what was not committed yet.
(Its own module, so its own cluster: the test kills a broker.)"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import headwater
import pytest
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.groups.conftest import BROKER_OVERRIDES, Member, produce, wait_until

pytestmark = pytest.mark.e2e

TP = headwater.TopicPartition
PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """The groups cluster, with consumer-protocol heartbeats and sessions in seconds."""
    data_dir: Path = tmp_path_factory.mktemp("consumer-protocol-cluster")
    overrides = {
        **BROKER_OVERRIDES,
        "group.consumer.min.heartbeat.interval.ms": "100",
        "group.consumer.heartbeat.interval.ms": "500",
        "group.consumer.min.session.timeout.ms": "1000",
        "group.consumer.session.timeout.ms": "6000",
    }
    with Cluster(
        brokers=3, data_dir=data_dir, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as c:
        yield c


def seen(ms: list[Member]) -> collections.Counter[tuple[int, int]]:
    return collections.Counter((r.partition, r.offset) for m in ms for r in list(m.records))


def everything(total_per_partition: int) -> set[tuple[int, int]]:
    return {(p, o) for p in range(PARTITIONS) for o in range(total_per_partition)}


def test_consumer_protocol_members_share_hand_over_and_survive_a_coordinator_kill(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(PARTITIONS), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 60, partitions=PARTITIONS)
    settings = {"group_protocol": "consumer", "auto_commit_interval_ms": 200}
    ms = [members(cluster.bootstrap, group, name, **settings) for _ in range(3)]

    def owned_by(group_members: list[Member]) -> bool:
        owned = [tp for m in group_members for tp in m.assignment]
        sizes = [len(m.assignment) for m in group_members]  # even once reconciled
        return len(owned) == PARTITIONS == len(set(owned)) and max(sizes) == min(sizes)

    wait_until(lambda: owned_by(ms), timeout_s=60, what="3 members owning 2 partitions each")
    wait_until(lambda: set(seen(ms)) == everything(10), timeout_s=60, what="60 records")
    assert max(seen(ms).values()) == 1, "a record was read twice"
    d = admin.describe_groups([group])[group]
    assert (d.group_type, d.state, len(d.members)) == ("consumer", "Stable", 3)

    # One member leaves (revoking and committing first): the others take its partitions
    # over, and revoke none of their own.
    stayers, leaver = ms[:2], ms[2]
    kept = {id(m): m.assignment for m in stayers}
    for m in stayers:
        del m.listener.revoked[:]
    leaver.stop()
    wait_until(lambda: owned_by(stayers), timeout_s=60, what="2 members owning everything")
    for m in stayers:
        assert m.listener.revoked == [] and kept[id(m)] <= m.assignment
    produce(cluster.bootstrap, name, 60, partitions=PARTITIONS)
    wait_until(lambda: set(seen(ms)) == everything(20), timeout_s=60, what="120 records")
    assert max(seen(ms).values()) == 1, "a record was read twice across the handover"
    tps = [TP(name, p) for p in range(PARTITIONS)]
    wait_until(
        lambda: (
            {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
            == dict.fromkeys(tps, 20)
        ),
        timeout_s=30,
        what="offsets 20 committed on every partition",
    )

    # The coordinator broker dies: the group goes on on the new one.
    old = admin.describe_groups([group])[group].coordinator
    cluster.kill(next(b for b, p in cluster.brokers.items() if p.address == old))
    produce(cluster.bootstrap, name, 60, partitions=PARTITIONS)
    wait_until(lambda: set(seen(ms)) >= everything(30), timeout_s=90, what="180 records")
    twice = {po for po, n in seen(ms).items() if n > 1}
    assert all(o >= 20 for _, o in twice), f"committed records read again: {sorted(twice)}"
    wait_until(
        lambda: (
            {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
            == dict.fromkeys(tps, 30)
        ),
        timeout_s=60,
        what="the group to commit on the new coordinator",
    )
    assert admin.describe_groups([group])[group].coordinator != old
    assert all(m.error is None for m in ms), [m.error for m in ms]
