"""Online upgrade on a real 3-broker cluster: three classic consumers read a topic and
commit, then restart one by one with ``group_protocol="consumer"``; the group converts
at the first one and ends a consumer-protocol group.  Every record is read, and no
committed offset ever goes backwards.  (Its own module, so its own cluster.)"""

from __future__ import annotations

import json
import subprocess
import sys
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
    data_dir: Path = tmp_path_factory.mktemp("online-upgrade-cluster")
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


def test_classic_consumers_restarted_with_the_consumer_protocol_convert_the_group(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(PARTITIONS), f"grp-{uuid.uuid4().hex[:8]}"
    tps = [TP(name, p) for p in range(PARTITIONS)]
    highest: dict[TP, int] = {}

    def committed() -> dict[TP, int]:
        """The group's committed offsets, checked never to go backwards."""
        now = {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
        for tp, off in now.items():
            assert off >= highest.get(tp, -1), f"{tp} committed {off} after {highest[tp]}"
            highest[tp] = off
        return now

    def seen(ms: list[Member]) -> set[tuple[int, int]]:
        return {(r.partition, r.offset) for m in ms for r in list(m.records)}

    def everything(per_partition: int) -> set[tuple[int, int]]:
        return {(p, o) for p in range(PARTITIONS) for o in range(per_partition)}

    def settled(group_members: list[Member], per_partition: int, kind: str = "classic") -> bool:
        owned = [tp for m in group_members for tp in m.assignment]
        return (
            sorted(owned) == sorted(tps)
            and all(m.assignment for m in group_members)
            and admin.describe_groups([group])[group].group_type == kind
            and seen(ms) >= everything(per_partition)
            and committed() == dict.fromkeys(tps, per_partition)
        )

    produce(cluster.bootstrap, name, 60, partitions=PARTITIONS)
    classic = {"auto_commit_interval_ms": 200, "partition_assignment_strategy": "range"}
    ms = [members(cluster.bootstrap, group, name, **classic) for _ in range(3)]
    live = list(ms)
    wait_until(lambda: settled(live, 10), timeout_s=90, what="the classic group to read 60")
    assert admin.describe_groups([group])[group].group_type == "classic"

    upgraded = {"auto_commit_interval_ms": 200, "group_protocol": "consumer"}
    for i in range(3):
        live[i].stop()
        live[i] = members(cluster.bootstrap, group, name, **upgraded)
        ms.append(live[i])
        produce(cluster.bootstrap, name, 30, partitions=PARTITIONS)
        per_partition = 10 + 5 * (i + 1)
        wait_until(
            lambda n=per_partition: settled(live, n, "consumer"),  # type: ignore[misc]
            timeout_s=120,
            what=f"restart {i + 1}: every partition owned, read and committed to {per_partition}",
        )

    assert all(m.error is None for m in ms), [m.error for m in ms]
    cli = [sys.executable, "-m", "headwater.cli.main", "groups", "describe", group]
    out = subprocess.run(
        [*cli, "--bootstrap", cluster.bootstrap, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    described = json.loads(out.stdout)
    assert described["group_type"] == "consumer", described
    assert len(described["members"]) == 3


def test_a_mixed_group_whose_consumer_member_leaves_goes_back_to_classic(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str], members: Any
) -> None:
    name, group = topic(PARTITIONS), f"grp-{uuid.uuid4().hex[:8]}"
    tps = [TP(name, p) for p in range(PARTITIONS)]
    produce(cluster.bootstrap, name, 60, partitions=PARTITIONS)
    classic = {"auto_commit_interval_ms": 200, "partition_assignment_strategy": "range"}
    ms = [members(cluster.bootstrap, group, name, **classic) for _ in range(2)]

    def state(kind: str, live: list[Member], per_partition: int) -> bool:
        owned = [tp for m in live for tp in m.assignment]
        offsets = {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}
        return (
            admin.describe_groups([group])[group].group_type == kind
            and sorted(owned) == sorted(tps)
            and all(m.assignment for m in live)
            and offsets == dict.fromkeys(tps, per_partition)
        )

    wait_until(lambda: state("classic", ms, 10), timeout_s=90, what="2 classic members")
    upgraded = members(cluster.bootstrap, group, name, group_protocol="consumer")
    wait_until(lambda: state("consumer", [*ms, upgraded], 10), timeout_s=90, what="mixed group")
    upgraded.stop()  # the last consumer-protocol member leaves: back to classic
    produce(cluster.bootstrap, name, 30, partitions=PARTITIONS)
    wait_until(lambda: state("classic", ms, 15), timeout_s=90, what="the classic group again")
    read = {(r.partition, r.offset) for m in [*ms, upgraded] for r in list(m.records)}
    assert read >= {(p, o) for p in range(PARTITIONS) for o in range(15)}
    assert all(m.error is None for m in [*ms, upgraded]), [m.error for m in ms]
