"""``headwater dev add-broker``, ``cluster rebalance`` and ``dev remove-broker`` on a
``headwater dev`` cluster: a new broker gets its share of replicas, a second rebalance
has nothing to do, and removing a broker drains it first and loses nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from headwater.client import Admin
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.reassignment.helpers import headwater, headwater_json, produce, read_all, replicas

pytestmark = pytest.mark.e2e


def test_add_broker_rebalance_remove_broker(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    d = ("--data-dir", str(tmp_path / "dev"))
    up = headwater_json("dev", "up", "--brokers", "3", "--zookeeper", zookeeper.connect_string, *d)
    try:
        b = ("--bootstrap", up["bootstrap"])
        made = headwater(
            "topics", "create", "t", "--partitions", "6", "--replication-factor", "2", *b
        )
        assert made.returncode == 0, made.stderr
        sent = produce(up["bootstrap"], "t", 300)

        added = headwater_json("dev", "add-broker", *d)
        assert added["id"] == 3
        status = headwater_json("dev", "status", *d)
        assert [x["id"] for x in status["brokers"]] == [0, 1, 2, 3]
        bootstrap = status["bootstrap"]
        b = ("--bootstrap", bootstrap)

        dry = headwater_json("cluster", "rebalance", "--dry-run", *b)
        assert dry["executed"] is False and dry["moves"]
        assert {m["to"] for m in dry["moves"]} == {3}
        with Admin(bootstrap) as admin:
            assert all(3 not in r for r in replicas(admin, "t").values())

            done = headwater_json("cluster", "rebalance", "--throttle", "50000000", *b)
            assert done["state"] == "complete"
            counts = {x["id"]: x["replicas"][1] for x in done["brokers"]}
            assert counts[3] >= 1 and max(counts.values()) - min(counts.values()) <= 1
            assert sum(3 in r for r in replicas(admin, "t").values()) >= 1
            again = headwater_json("cluster", "rebalance", "--dry-run", *b)
            assert again["moves"] == [] and again["leader_changes"] == []

            removed = headwater_json("dev", "remove-broker", "3", *d, timeout_s=240)
            assert removed["removed"] is True and removed["drain"] == "complete"
            assert [x.broker_id for x in admin.describe_cluster().brokers] == [0, 1, 2]
            after = replicas(admin, "t")
            assert all(3 not in r and len(r) == 2 for r in after.values())
        assert [x["id"] for x in headwater_json("dev", "status", *d)["brokers"]] == [0, 1, 2]
        assert not (tmp_path / "dev" / "broker-3").exists()
        got = read_all(up["bootstrap"].split(",")[0], "t", 6)
        assert len(got) == len(sent) and set(got) == sent
    finally:
        down = headwater("dev", "down", *d)
        assert down.returncode == 0, down.stderr
