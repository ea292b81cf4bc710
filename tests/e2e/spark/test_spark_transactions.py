"""The data source and transactions end to end: real local Spark, a real broker.

- ``kafka.isolation.level=read_committed``: a batch read of a topic holding committed,
  aborted and still open transactions ends at the last stable offset and skips the
  aborted records (also when ranges are split inside an aborted transaction);
  ``read_uncommitted``, the default, reads everything below the high watermark.
- ``exactly.once=true`` streaming sink (slow): a driver process running a checkpointed
  query is kill -9'd mid-stream twice, each time also losing its newest commit-log
  entry (as if killed between the sink's commit and Spark's), and restarted from the
  checkpoint; ``read_committed`` readers of the output find every input once.
"""

from __future__ import annotations

import collections
import contextlib
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import headwater
import pytest

from tests.e2e.transactions.test_transactions import read_all

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


EOS_APP = Path(__file__).with_name("eos_stream_app.py")


class Driver:
    """The streaming query's driver process (and its JVM, in its process group)."""

    def __init__(self, logs: Path, *args: str) -> None:
        self.logs, self.args = logs, args
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        with open(self.logs / f"driver-{self.runs}.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(EOS_APP), *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self) -> str:
        return "".join(
            f"--- driver-{i}.log\n" + (self.logs / f"driver-{i}.log").read_text()[-3000:]
            for i in range(max(1, self.runs - 1), self.runs + 1)
        )


def _batch_ids(checkpoint: Path, log: str) -> list[int]:
    d = checkpoint / log
    return sorted(int(f.name) for f in d.glob("[0-9]*")) if d.exists() else []


def forget_last_commit(checkpoint: Path) -> int | None:
    """Roll the checkpoint back to just before Spark recorded its newest done batch: that
    commit-log entry and any later planned batch go, as if the driver had died after the
    sink committed the batch but before Spark did.  The restarted query runs the batch
    again (the sink must notice); returns its id (None: no batch was done yet)."""
    done = _batch_ids(checkpoint, "commits")
    if not done:
        return None
    last = done[-1]
    gone = [("commits", last)] + [
        ("offsets", b) for b in _batch_ids(checkpoint, "offsets") if b > last
    ]
    for log, batch in gone:
        (checkpoint / log / str(batch)).unlink()
        (checkpoint / log / f".{batch}.crc").unlink(missing_ok=True)
    return last


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_exactly_once_sink_through_driver_kills_and_replayed_batches(
    cluster: Any, make_topic: Callable[..., str], tmp_path: Path
) -> None:
    records, kills = 200, 2
    source, sink = make_topic(2), make_topic(2)
    with headwater.Producer(cluster.bootstrap) as plain:
        for i in range(records):
            plain.send(source, f"in-{i}".encode(), key=str(i).encode(), partition=i % 2)
        plain.flush(60)
    expected = sorted(f"out-in-{i}".encode() for i in range(records))
    checkpoint = tmp_path / "checkpoint"
    driver = Driver(
        tmp_path, cluster.bootstrap, source, sink, str(checkpoint), f"eos-{uuid.uuid4().hex[:8]}"
    )
    rng = random.Random()
    replayed: list[int] = []
    deadline = time.monotonic() + 840

    try:
        for _ in range(kills):
            done = len(_batch_ids(checkpoint, "commits"))
            driver.start()
            # Kill once the query has done one more batch (the replay of a rolled-back one
            # counts: when every input was consumed before the last kill, it is all that is
            # left to do), at a random moment after.
            while len(_batch_ids(checkpoint, "commits")) <= done:
                assert driver.alive(), f"the driver died\n{driver.tail()}"
                assert time.monotonic() < deadline, f"no batch done\n{driver.tail()}"
                time.sleep(0.2)
            time.sleep(rng.uniform(0.0, 1.0))
            driver.kill()
            last = forget_last_commit(checkpoint)
            if last is not None:
                replayed.append(last)
        driver.start()
        while len(read_all(cluster, sink, 2, committed=True, expect=records)) < records:
            assert driver.alive(), f"the driver died\n{driver.tail()}"
            assert time.monotonic() < deadline, f"the query never finished\n{driver.tail()}"
            time.sleep(1)
    finally:
        driver.kill()
    out = read_all(cluster, sink, 2, committed=True, expect=records + 1)
    counts = collections.Counter(out)
    duplicated = sorted(v or b"" for v, n in counts.items() if n > 1)
    assert sorted(v or b"" for v in out) == expected, (
        f"{len(out)} records, {len(duplicated)} duplicated (e.g. {duplicated[:5]}); "
        f"batches replayed: {replayed}\n{driver.tail()}"
    )
    assert replayed, "no batch was replayed: the test did not test the sink"
