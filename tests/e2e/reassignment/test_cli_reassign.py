"""``headwater partitions reassign`` on a real cluster: generate, execute with a throttle,
verify (which removes the throttle), cancel mid-move, and bad plans refused with nothing
changed.  Every acknowledged record is read back exactly once after each move."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.client import Admin, NewTopic
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.values import TopicPartition

from tests.e2e.reassignment.helpers import (
    headwater,
    headwater_json,
    plan_file_json,
    produce,
    read_all,
    replicas,
)

pytestmark = pytest.mark.e2e

THROTTLE_CONFIGS = (
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
)


@pytest.fixture
def quad(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(brokers=4, data_dir=tmp_path, zookeeper=zookeeper.connect_string) as cluster:
        yield cluster


def _topic_throttles(admin: Admin, topic: str) -> dict[str, str]:
    configs = admin.describe_configs([topic])[topic]
    return {k: configs[k].value for k in THROTTLE_CONFIGS if k in configs and configs[k].value}


def _broker_rate(admin: Admin, broker: int) -> str:
    entry = admin.describe_broker_configs(broker).get("leader.replication.throttled.rate")
    return entry.value if entry is not None and entry.source.startswith("DYNAMIC") else ""


def test_generate_execute_verify_with_a_throttle(quad: Cluster, tmp_path: Path) -> None:
    b = ("--bootstrap", quad.bootstrap)
    with Admin(quad.bootstrap) as admin:
        admin.create_topics(
            [NewTopic("orders", replica_assignment={p: (p % 2, 1 - p % 2) for p in range(4)})]
        )
        sent = produce(quad.bootstrap, "orders", 400)
        generated = headwater_json(
            "partitions", "reassign", "--generate", "--topics", "orders", "--brokers", "2,3", *b
        )
        assert {p["partition"]: p["replicas"] for p in generated["current"]["partitions"]} == {
            p: [p % 2, 1 - p % 2] for p in range(4)
        }
        proposed = {p["partition"]: p["replicas"] for p in generated["proposed"]["partitions"]}
        assert all(sorted(r) == [2, 3] for r in proposed.values())
        plan = tmp_path / "proposed.json"
        plan.write_text(json.dumps(generated["proposed"]))

        started = headwater_json(
            "partitions", "reassign", "--execute", str(plan), "--throttle", "50000000", *b
        )
        assert sorted(started["succeeded"]) == [f"orders-{p}" for p in range(4)]
        assert started["errors"] == {}
        # The throttle is set as kafka-reassign-partitions sets it, until --verify.
        assert set(_topic_throttles(admin, "orders")) == set(THROTTLE_CONFIGS)
        assert _broker_rate(admin, 2) == "50000000"

        for _ in range(120):
            verified = headwater_json("partitions", "reassign", "--verify", str(plan), *b)
            if verified["complete"]:
                break
            assert all(p["status"] != "failed" for p in verified["partitions"]), verified
            time.sleep(0.5)
        assert verified["complete"] and verified["throttles_removed"]
        assert {p: list(r) for p, r in replicas(admin, "orders").items()} == proposed
        assert _topic_throttles(admin, "orders") == {}
        assert all(_broker_rate(admin, broker) == "" for broker in range(4))
        text = headwater("partitions", "reassign", "--verify", str(plan), *b)
        assert text.returncode == 0
        assert "Reassignment of partition orders-0 is completed." in text.stdout
    got = read_all(quad.bootstrap, "orders", 4)
    assert len(got) == len(sent) and set(got) == sent


def test_cancel_mid_move_returns_to_the_original_replicas(quad: Cluster, tmp_path: Path) -> None:
    b = ("--bootstrap", quad.bootstrap)
    with Admin(quad.bootstrap) as admin:
        admin.create_topics([NewTopic("slow", replica_assignment={0: (0, 1), 1: (1, 0)})])
        sent = produce(quad.bootstrap, "slow", 600, size=1000)  # ~300 KB a partition
        plan = tmp_path / "plan.json"
        plan.write_text(plan_file_json({0: (2, 3), 1: (3, 2)}, "slow"))
        done = headwater("partitions", "reassign", "--execute", str(plan), "--throttle", "2000", *b)
        assert done.returncode == 0, done.stderr
        assert "Successfully started partition reassignments for slow-0,slow-1" in done.stdout
        moving = admin.list_partition_reassignments()
        assert set(moving) == {TopicPartition("slow", 0), TopicPartition("slow", 1)}
        cancel = headwater("partitions", "reassign", "--cancel", str(plan), *b)
        assert cancel.returncode == 0, cancel.stderr
        assert "Successfully cancelled reassignment for" in cancel.stdout
        quad.wait_for(
            lambda: (
                replicas(admin, "slow") == {0: (0, 1), 1: (1, 0)}
                and not admin.list_partition_reassignments()
            ),
            timeout_s=30,
            what="the original replicas back",
        )
        assert _topic_throttles(admin, "slow") == {}
        verify = headwater("partitions", "reassign", "--verify", str(plan), *b)
        assert verify.returncode == 1 and "rather than 2,3" in verify.stdout
    got = read_all(quad.bootstrap, "slow", 2)
    assert len(got) == len(sent) and set(got) == sent


@pytest.mark.parametrize(
    ("entries", "words"),
    [
        ([{"topic": "nope", "partition": 0, "replicas": [0, 1]}], "Topic nope not found"),
        ([{"topic": "t", "partition": 0, "replicas": [2, 2]}], "duplicate entries"),
        ([{"topic": "t", "partition": 2, "replicas": [0, 1]}], "t-2 (topic t has 2 partitions)"),
        ([{"topic": "t", "partition": 0, "replicas": [0, 9]}], "Unknown broker id(s): 9"),
        ([{"topic": "t", "partition": 0, "replicas": []}], "empty replica list"),
        (
            [
                {"topic": "t", "partition": 0, "replicas": [2, 3]},
                {"topic": "t", "partition": 1, "replicas": [2, 7]},
            ],
            "Unknown broker id(s): 7",
        ),
    ],
)
def test_bad_plans_are_refused_with_nothing_changed(
    quad: Cluster, tmp_path: Path, entries: list[dict[str, object]], words: str
) -> None:
    with Admin(quad.bootstrap) as admin:
        admin.create_topics([NewTopic("t", replica_assignment={0: (0, 1), 1: (1, 0)})])
        before = replicas(admin, "t")
        plan = tmp_path / "bad.json"
        plan.write_text(json.dumps({"version": 1, "partitions": entries}))
        done = headwater(
            "partitions", "reassign", "--execute", str(plan), "--throttle", "1000000",
            "--bootstrap", quad.bootstrap,
        )  # fmt: skip
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert words in done.stderr
        assert replicas(admin, "t") == before
        assert admin.list_partition_reassignments() == {}
        assert _topic_throttles(admin, "t") == {}
        assert all(_broker_rate(admin, broker) == "" for broker in range(4))
