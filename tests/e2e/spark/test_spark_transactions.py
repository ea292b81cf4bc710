"""The data source and transactions end to end: real local Spark, a real broker.

- ``kafka.isolation.level=read_committed``: a batch read of a topic holding committed,
  aborted and still open transactions ends at the last stable offset and skips the
  aborted records (also when ranges are split inside an aborted transaction);
  ``read_uncommitted``, the default, reads everything below the high watermark.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import headwater
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from headwater.testing.cluster import Cluster

    data_dir: Path = tmp_path_factory.mktemp("spark-txn-cluster")
    with Cluster(brokers=1, data_dir=data_dir, overrides=TXN_OVERRIDES) as c:
        yield c


def transactional(cluster: Any, **settings: Any) -> headwater.Producer:
    return headwater.Producer(
        cluster.bootstrap,
        transactional_id=f"tx-{uuid.uuid4().hex[:8]}",
        max_block_ms=30000,
        **settings,
    )


def values(spark: Any, cluster: Any, topic: str, **options: str) -> list[str]:
    r = spark.read.format("headwater").option("bootstrap.servers", cluster.bootstrap)
    r = r.option("subscribe", topic)
    for k, v in options.items():
        r = r.option(k, v)
    return sorted(bytes(row["value"]).decode() for row in r.load().select("value").collect())


def test_read_committed_ends_at_the_last_stable_offset_and_skips_aborted_records(
    spark: Any, cluster: Any, make_topic: Callable[..., str]
) -> None:
    topic = make_topic(2)
    with (
        transactional(cluster) as committer,
        transactional(cluster) as aborter,
        transactional(cluster) as opener,
        headwater.Producer(cluster.bootstrap) as plain,
    ):
        for p in (committer, aborter, opener):
            p.init_transactions()
        committer.begin_transaction()
        aborter.begin_transaction()
        for i in range(6):  # the two transactions interleave in both partitions
            committer.send(topic, f"committed-{i}".encode(), partition=i % 2)
            aborter.send(topic, f"aborted-{i}".encode(), partition=i % 2)
        committer.flush(30)
        aborter.flush(30)
        aborter.abort_transaction()
        committer.commit_transaction()
        plain.send(topic, b"plain-0", partition=0).result(30)
        opener.begin_transaction()
        opener.send(topic, b"open-0", partition=0)
        opener.flush(30)
        plain.send(topic, b"plain-1", partition=0).result(30)  # behind the open transaction
        plain.send(topic, b"plain-2", partition=1).result(30)

        stable = sorted([f"committed-{i}" for i in range(6)] + ["plain-0", "plain-2"])
        everything = sorted(stable + [f"aborted-{i}" for i in range(6)] + ["open-0", "plain-1"])
        assert values(spark, cluster, topic, **{"kafka.isolation.level": "read_committed"}) == (
            stable
        )
        # Ranges of one record each start inside the aborted transaction too.
        split = {"isolation.level": "read_committed", "maxRecordsPerPartition": "1"}
        assert values(spark, cluster, topic, **split) == stable
        assert values(spark, cluster, topic) == everything
        assert (
            values(spark, cluster, topic, **{"kafka.isolation.level": "read_uncommitted"})
            == everything
        )
        opener.commit_transaction()
    after = sorted([*stable, "open-0", "plain-1"])
    assert values(spark, cluster, topic, **{"kafka.isolation.level": "read_committed"}) == after
