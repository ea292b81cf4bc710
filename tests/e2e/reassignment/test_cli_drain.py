"""``headwater cluster drain`` then decommission on a real cluster: the drained broker can
be stopped for good with every partition keeping its full replica set and every
acknowledged record; a drain that cannot keep the replication factor is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.client import Admin, NewTopic
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.reassignment.helpers import (
    headwater,
    headwater_json,
    isrs,
    produce,
    read_all,
    replicas,
)

pytestmark = pytest.mark.e2e


@pytest.fixture
def quad(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    overrides = {"min.insync.replicas": "2"}
    with Cluster(
        brokers=4, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as cluster:
        yield cluster


def test_drain_then_decommission(quad: Cluster) -> None:
    with Admin(quad.bootstrap) as admin:
        admin.create_topics([NewTopic("events", 8, 3)])
        sent = produce(quad.bootstrap, "events", 500)
        held = sorted(p for p, r in replicas(admin, "events").items() if 3 in r)
        assert held  # 8 partitions x 3 replicas over 4 brokers: broker 3 holds some

        dry = headwater_json("cluster", "drain", "3", "--dry-run", "--bootstrap", quad.bootstrap)
        assert dry["executed"] is False
        assert sorted(m["partition"] for m in dry["moves"]) == held
        assert all(m["from"] == 3 and m["to"] != 3 for m in dry["moves"])
        assert dry["bytes_to_move"] > 0
        assert any(3 in r for r in replicas(admin, "events").values())  # dry run moved nothing

        drained = headwater_json(
            "cluster", "drain", "3", "--throttle", "50000000", "--timeout", "60",
            "--bootstrap", quad.bootstrap,
        )  # fmt: skip
        assert drained["state"] == "complete" and drained["throttles_removed"]
        after = replicas(admin, "events")
        assert all(3 not in r and len(r) == 3 for r in after.values())

        quad.remove_broker(3)
        assert [b.broker_id for b in admin.describe_cluster().brokers] == [0, 1, 2]
        quad.wait_for(
            lambda: all(sorted(i) == sorted(after[p]) for p, i in isrs(admin, "events").items()),
            timeout_s=30,
            what="every partition's full ISR without broker 3",
        )
        assert replicas(admin, "events") == after
        more = produce(quad.bootstrap, "events", 50)  # acks=all still works
    got = read_all(quad.bootstrap, "events", 8)
    assert len(got) == len(sent) + len(more) and set(got) == sent | more


def test_a_drain_that_would_lose_replicas_is_refused(quad: Cluster) -> None:
    with Admin(quad.bootstrap) as admin:
        admin.create_topics([NewTopic("wide", 2, 4)])
        before = replicas(admin, "wide")
        done = headwater("cluster", "drain", "1", "--bootstrap", quad.bootstrap)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert "only 3 brokers would remain" in done.stderr
        assert replicas(admin, "wide") == before
        assert admin.list_partition_reassignments() == {}
