"""The Spark connector's ``groupId`` against groups of both protocols (issue 15).

The driver commits "from outside the group" (generation -1, no member id), what
Kafka's ``alterConsumerGroupOffsets`` sends; Kafka takes that only while the
group has no members, whatever its type:

- a group left empty by ``group_protocol="consumer"`` or ``"classic"`` consumers
  takes the job's offsets, keeps its type (``headwater groups describe``), and a
  new consumer-protocol consumer resumes exactly from them;
- while a consumer-protocol member is active, the commit is refused and the
  query stops with an error naming the group and Kafka's error, leaving the
  member's offsets alone.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import headwater
import pytest
from headwater.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

TP = headwater.TopicPartition


def produce(bootstrap: str, topic: str, per_partition: int) -> None:
    """``per_partition`` records to each of partitions 0 and 1."""
    with headwater.Producer(bootstrap, linger_ms=5) as p:
        for i in range(per_partition):
            for partition in (0, 1):
                p.send(topic, f"v{partition}-{i}".encode(), partition=partition)
        p.flush()


def consumer(bootstrap: str, group: str, topic: str, protocol: str) -> headwater.Consumer:
    return headwater.Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_protocol=protocol,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )


def poll_until(c: headwater.Consumer, count: int) -> set[tuple[int, int]]:
    """``(partition, offset)`` of the first ``count`` records polled (within 60 s)."""
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 60
    while len(seen) < count and time.monotonic() < deadline:
        seen |= {(r.partition, r.offset) for r in c.poll(timeout_ms=200)}
    assert len(seen) >= count, f"only {sorted(seen)} within 60 s"
    return seen


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with headwater.Admin(bootstrap) as admin:
        offsets = admin.list_consumer_group_offsets(group)
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}


def run_job(spark: Any, bootstrap: str, topic: str, group: str, cp: Path) -> None:
    """An availableNow query from earliest that commits to ``group``, run to its end."""
    q = (
        spark.readStream.format("headwater")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("groupId", group)
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)


def describe(capsys: pytest.CaptureFixture[str], bootstrap: str, group: str) -> Any:
    code = main.main(["groups", "describe", group, "--bootstrap", bootstrap, "--output", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    return json.loads(out)


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_spark_commits_to_an_emptied_group_and_consumers_resume_there(
    protocol: str,
    spark: Any,
    cluster: Any,
    make_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic, group = make_topic(2), f"spark-{protocol}-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, topic, 20)
    with consumer(cluster.bootstrap, group, topic, protocol) as c:
        poll_until(c, 2)
        c.commit({TP(topic, 0): 5, TP(topic, 1): 7})
    d = describe(capsys, cluster.bootstrap, group)
    assert (d["group_type"], d["state"], d["members"]) == (protocol, "Empty", [])

    run_job(spark, cluster.bootstrap, topic, group, tmp_path / "cp")
    assert committed(cluster.bootstrap, group, topic) == {0: 20, 1: 20}
    d = describe(capsys, cluster.bootstrap, group)
    assert (d["group_type"], d["state"]) == (protocol, "Empty")
    rows = {(o["topic"], o["partition"]): o for o in d["offsets"]}
    for p in (0, 1):
        assert (rows[topic, p]["committed_offset"], rows[topic, p]["lag"]) == (20, 0)

    # A consumer-protocol consumer (converting an empty classic group) resumes at 20, not
    # at the consumers' 5 and 7 nor at earliest.
    produce(cluster.bootstrap, topic, 5)
    with consumer(cluster.bootstrap, group, topic, "consumer") as c:
        seen = poll_until(c, 10)
    assert seen == {(p, o) for p in (0, 1) for o in range(20, 25)}


def test_spark_commit_refused_while_a_consumer_protocol_member_is_active(
    spark: Any, cluster: Any, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    topic, group = make_topic(2), f"spark-active-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, topic, 20)
    with consumer(cluster.bootstrap, group, topic, "consumer") as c:
        poll_until(c, 2)
        c.commit({TP(topic, 0): 5, TP(topic, 1): 7})
        with headwater.Admin(cluster.bootstrap) as admin:
            d = admin.describe_groups([group])[group]
        assert (d.group_type, len(d.members)) == ("consumer", 1)
        with pytest.raises(Exception, match=rf"groupId '{group}': UNKNOWN_MEMBER_ID") as info:
            run_job(spark, cluster.bootstrap, topic, group, tmp_path / "cp")
        assert "stop its consumers or give the query a groupId of its own" in str(info.value)
        assert committed(cluster.bootstrap, group, topic) == {0: 5, 1: 7}
