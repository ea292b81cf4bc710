"""Transactions survive a broker's restart from its files (gRPC path, real processes).

Also, since a one-broker cluster's group coordinator is known: OffsetFetch with
``require_stable`` (KIP-447) answers UNSTABLE_OFFSET_COMMIT while a transactional offset
commit is pending, and a read_committed consumer waits for it.

A one-broker cluster, so the partition's state after a restart can only come from that
broker's own ``.txnindex``, ``.snapshot`` and ``.log`` files: after ``kill -9`` mid-
transactions a READ_COMMITTED consumer reads exactly what it read before (no aborted
record, the last stable offset still at the open transaction); a damaged ``.txnindex``
is rebuilt from the log; retention deletes a segment's ``.txnindex`` with it, and what
remains is still read without any aborted record; a retried marker is never appended
twice (one control batch per transaction and partition).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import grpc
import headwater
import pytest
from headwater.client.types import ConsumerGroupMetadata
from headwater.errors import ErrorCode
from headwater.records import read_batches
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.v1 import common_pb2, group_pb2, group_pb2_grpc

from tests.e2e.groups.conftest import wait_until

TP = headwater.TopicPartition

OVERRIDES = {
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "log.retention.check.interval.ms": "500",
}


@pytest.fixture
def one_broker(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(
        brokers=1, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=OVERRIDES
    ) as c:
        yield c


def make_topic(cluster: Cluster, **configs: str) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with headwater.Admin(cluster.bootstrap, default_api_timeout_ms=30000) as admin:
        admin.create_topic(name, 1, 1, configs={"segment.bytes": "2048", **configs})

        def ready() -> bool:
            desc = admin.describe_topics([name]).get(name)
            return desc is not None and all(p.leader >= 0 for p in desc.partitions)

        wait_until(ready, timeout_s=30, what=f"leader of {name}")
    return name


def producer(cluster: Cluster, tid: str) -> headwater.Producer:
    return headwater.Producer(
        cluster.bootstrap, transactional_id=tid, max_block_ms=60000, request_timeout_ms=15000
    )


def read(cluster: Cluster, topic: str, *, committed: bool) -> tuple[list[bytes], int]:
    """Every value a fresh consumer reads (until idle for 2 s) and its end offset (the LSO
    for READ_COMMITTED)."""
    with headwater.Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed else "read_uncommitted",
        fetch_max_wait_ms=200,
        default_api_timeout_ms=30000,
    ) as c:
        tp = TP(topic, 0)
        c.assign([tp])
        values: list[bytes] = []
        idle = 0
        while idle < 10:
            got = c.poll(200)
            idle = 0 if got else idle + 1
            values += [r.value or b"" for r in got]
        return values, c.end_offsets([tp])[tp]


def partition_dir(cluster: Cluster, topic: str) -> Path:
    [found] = cluster.data_dir.glob(f"broker-*/logs/**/{topic}-0")
    return found


def transactions(cluster: Cluster, topic: str, rounds: int) -> list[bytes]:
    """``rounds`` transactions of 5 records each, every other one aborted; the committed
    values."""
    committed: list[bytes] = []
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions()
        for r in range(rounds):
            values = [f"r{r}-{i}-".encode() + b"x" * 100 for i in range(5)]
            p.begin_transaction()
            for v in values:
                p.send(topic, v, partition=0)
            if r % 2:
                p.abort_transaction()
            else:
                p.commit_transaction()
                committed += values
    return committed


def test_kill_9_mid_transactions_then_restart_reads_the_same(one_broker: Cluster) -> None:
    cluster = one_broker
    topic = make_topic(cluster)
    committed = transactions(cluster, topic, 12)
    hanging = producer(cluster, f"open-{uuid.uuid4().hex[:8]}")
    hanging.init_transactions()
    hanging.begin_transaction()
    hanging.send(topic, b"open", partition=0)
    hanging.flush(30)
    before, lso_before = read(cluster, topic, committed=True)
    assert before == committed
    _, end = read(cluster, topic, committed=False)
    assert lso_before < end  # the open transaction holds the LSO back
    pdir = partition_dir(cluster, topic)
    assert list(pdir.glob("*.txnindex"))
    assert list(pdir.glob("*.snapshot"))  # written as the log rolled

    cluster.kill(0)
    cluster.start_broker(0)
    after, lso_after = read(cluster, topic, committed=True)
    assert (after, lso_after) == (before, lso_before)
    broker_log = cluster.brokers[0].log_path.read_text(errors="replace")
    assert f"{topic}-0: producer state from the snapshot at" in broker_log
    hanging.close(0)

    # A damaged .txnindex: the broker rebuilds it from the log at its next start.
    indexes = {p: p.read_bytes() for p in pdir.glob("*.txnindex")}
    cluster.stop(0)
    damaged = sorted(indexes)[0]
    damaged.write_bytes(indexes[damaged][:-5])
    cluster.start_broker(0)
    again, _ = read(cluster, topic, committed=True)
    assert again == before
    assert {p: p.read_bytes() for p in pdir.glob("*.txnindex")} == indexes
    broker_log = cluster.brokers[0].log_path.read_text(errors="replace")
    assert f"{topic}-0: producer state from the whole log" in broker_log
    assert not any(b"r1-" in v for v in again)  # an aborted transaction's records


def test_retention_takes_the_txnindex_along_and_leaves_nothing_aborted_visible(
    one_broker: Cluster,
) -> None:
    cluster = one_broker
    topic = make_topic(cluster, **{"retention.bytes": "5000"})
    committed = transactions(cluster, topic, 16)
    pdir = partition_dir(cluster, topic)

    def segments_deleted() -> bool:
        return not (pdir / f"{0:020d}.log").exists()

    wait_until(segments_deleted, timeout_s=30, what="retention to delete the oldest segments")

    def every_txnindex_has_its_segment() -> bool:
        # Retention may be deleting a segment right now (its .log goes first): a
        # .txnindex left behind for good never satisfies this.
        indexes = {p.name.split(".")[0] for p in pdir.glob("*.txnindex")}
        return bool(indexes) and indexes <= {p.name.split(".")[0] for p in pdir.glob("*.log")}

    wait_until(every_txnindex_has_its_segment, timeout_s=30, what="no .txnindex without its log")
    remaining, _ = read(cluster, topic, committed=True)
    everything, _ = read(cluster, topic, committed=False)
    assert remaining  # something committed is left
    assert set(remaining) <= set(committed)  # and no aborted record
    assert set(everything) - set(committed)  # though aborted records remain in the log


def test_one_marker_per_transaction_and_partition(one_broker: Cluster) -> None:
    cluster = one_broker
    topic = make_topic(cluster)
    transactions(cluster, topic, 6)
    cluster.stop(0)  # closed cleanly: the segments are whole on disk
    markers = 0
    for path in sorted(partition_dir(cluster, topic).glob("*.log")):
        markers += sum(1 for b in read_batches(path.read_bytes()) if b.is_control)
    assert markers == 6


def test_require_stable_waits_for_a_pending_transactional_offset_commit(
    one_broker: Cluster,
) -> None:
    cluster = one_broker
    topic = make_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tp = TP(topic, 0)

    def offset_fetch(require_stable: bool) -> group_pb2.OffsetFetchResponsePartition:
        with grpc.insecure_channel(cluster.brokers[0].address) as channel:
            resp = group_pb2_grpc.GroupStub(channel).OffsetFetch(
                group_pb2.OffsetFetchRequest(
                    group_id=group,
                    partitions=[common_pb2.TopicPartition(topic=topic, partition=0)],
                    require_stable=require_stable,
                ),
                timeout=10,
            )
        assert resp.error_code == 0
        [p] = resp.partitions
        return p

    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"out", partition=0)
        p.send_offsets_to_transaction({tp: 7}, ConsumerGroupMetadata(group))
        assert ErrorCode(offset_fetch(True).error_code) is ErrorCode.UNSTABLE_OFFSET_COMMIT
        plain = offset_fetch(False)  # without require_stable: the last committed (none)
        assert (ErrorCode(plain.error_code), plain.committed_offset) == (ErrorCode.NONE, -1)
        with headwater.Consumer(
            bootstrap_servers=cluster.bootstrap,
            group_id=group,
            isolation_level="read_committed",
            default_api_timeout_ms=30000,
        ) as consumer:
            timer = threading.Timer(2.0, p.commit_transaction)
            started = time.monotonic()
            timer.start()
            try:
                assert consumer.committed(tp) == 7  # waits for the commit, never None
            finally:
                timer.join()
            assert time.monotonic() - started >= 1.5
    stable = offset_fetch(True)
    assert (ErrorCode(stable.error_code), stable.committed_offset) == (ErrorCode.NONE, 7)


def cli(cluster: Cluster, *args: str) -> object:
    out = subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", "transactions", *args,
         "--bootstrap-server", cluster.bootstrap, "--output", "json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_find_hanging_leaves_out_a_transaction_its_coordinator_holds(
    one_broker: Cluster,
) -> None:
    cluster = one_broker
    topic = make_topic(cluster)
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"open", partition=0)
        p.flush(30)
        time.sleep(0.1)
        producers = cli(cluster, "describe-producers", "--topic", topic, "--partition", "0")
        assert isinstance(producers, list)
        [state] = producers
        assert state["current_transaction_start_offset"] == 0
        assert 0 < state["last_timestamp"] <= time.time() * 1000
        # Older than a 0-minute timeout, but Ongoing at its coordinator: not hanging.
        found = cli(cluster, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
        assert found == []
        found = cli(cluster, "find-hanging", "--broker-id", "0", "--max-transaction-timeout", "0")
        assert found == []
        p.abort_transaction()
