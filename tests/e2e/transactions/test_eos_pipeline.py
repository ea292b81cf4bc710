"""Exactly-once consume-transform-produce under crashes, with real processes.

An application process (``eos_app.py``: subscribe in a group with ``read_committed``,
transform, produce in a transaction, ``send_offsets_to_transaction``, commit) is
kill -9'd and restarted again and again while the broker that is its transaction
coordinator and a partition leader are killed and restarted too.  At the end a
``read_committed`` consumer sees every input record exactly once in the output, and
the group's committed offsets equal the input's end offsets.
"""

from __future__ import annotations

import collections
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import headwater
import pytest
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC, partition_for

from tests.e2e.transactions.test_transactions import BROKER_OVERRIDES, make_topic, read_all

pytestmark = pytest.mark.slow

TP = headwater.TopicPartition
APP = Path(__file__).with_name("eos_app.py")
PARTITIONS = 3
RECORDS = 600
ROUNDS = 8
"""App crashes; every second one also kills a broker (alternately the coordinator's and
a sink partition's leader).  The input arrives in ROUNDS slices, one before each round,
so every round has input to crash into however fast the app runs."""
SLICE = RECORDS // ROUNDS


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(
        brokers=3,
        data_dir=tmp_path / "cluster",
        zookeeper=zookeeper.connect_string,
        overrides=BROKER_OVERRIDES,
    ) as c:
        yield c


class App:
    """The application's processes, one at a time; each one's output goes to a file."""

    def __init__(self, cluster: Cluster, logs: Path, *args: str) -> None:
        self.cluster, self.logs, self.args = cluster, logs, args
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        with open(self.logs / f"app-{self.runs}.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, str(APP), self.cluster.bootstrap, *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def ensure_running(self) -> None:
        """Start a new process if the last one ended by itself (an error it gave up on)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def tail(self) -> str:
        return "".join(
            f"--- app-{i}.log\n" + (self.logs / f"app-{i}.log").read_text()[-3000:]
            for i in range(max(1, self.runs - 2), self.runs + 1)
        )


def committed_offsets(cluster: Cluster, group: str, source: str) -> dict[int, int | None]:
    with headwater.Consumer(
        bootstrap_servers=cluster.bootstrap, group_id=group, request_timeout_ms=10000
    ) as c:
        return {p: c.committed(TP(source, p), timeout_ms=15000) for p in range(PARTITIONS)}


def progress(cluster: Cluster, group: str, source: str) -> int:
    """How many input records the group has committed (0 while the answer is unavailable)."""
    try:
        return sum(o or 0 for o in committed_offsets(cluster, group, source).values())
    except headwater.errors.HeadwaterError:
        return 0


def test_exactly_once_through_app_and_broker_crashes(cluster: Cluster, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    source, sink = make_topic(cluster, PARTITIONS), make_topic(cluster, PARTITIONS)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    tid = f"eos-app-{group}"
    expected = [f"out-{i}".encode() for i in range(RECORDS)]
    ends = {p: len(range(p, RECORDS, PARTITIONS)) for p in range(PARTITIONS)}

    app = App(cluster, tmp_path, group, source, sink, tid)
    deadline = time.monotonic() + 420
    plain = headwater.Producer(cluster.bootstrap, max_block_ms=60000)
    try:
        for round_ in range(ROUNDS):
            assert time.monotonic() < deadline, f"chaos rounds took too long\n{app.tail()}"
            for i in range(round_ * SLICE, (round_ + 1) * SLICE):
                plain.send(
                    source, f"in-{i}".encode(), key=str(i).encode(), partition=i % PARTITIONS
                )
            plain.flush(60)
            before = progress(cluster, group, source)
            app.ensure_running()
            # Crash only after the app has made progress, so every round counts.
            wait_end = time.monotonic() + 45
            while progress(cluster, group, source) <= before and time.monotonic() < wait_end:
                app.ensure_running()
                time.sleep(0.3)
            victim = None
            if round_ % 2 == 1:
                coordinator = cluster.leader_for(TRANSACTION_STATE_TOPIC, partition_for(tid, 3))
                leader = cluster.leader_for(sink, rng.randrange(PARTITIONS))
                victim = coordinator if round_ % 4 == 1 else leader
                if victim is not None:
                    cluster.kill(victim)
            time.sleep(rng.uniform(0.2, 1.5))
            app.kill()
            if victim is not None:
                time.sleep(rng.uniform(0.0, 1.0))
                cluster.start_broker(victim)
        # The last run: let it finish the input.
        app.ensure_running()
        while progress(cluster, group, source) < RECORDS:
            assert time.monotonic() < deadline, f"the app never finished\n{app.tail()}"
            app.ensure_running()
            time.sleep(0.5)
    finally:
        app.kill()
        plain.close()
    assert committed_offsets(cluster, group, source) == ends, app.tail()
    # One more than expected: reads until 3 s pass with nothing new, duplicates included.
    out = read_all(cluster, sink, PARTITIONS, committed=True, expect=RECORDS + 1)
    counts = collections.Counter(out)
    duplicated = {v: n for v, n in counts.items() if n > 1}
    missing = [v for v in expected if v not in counts]
    assert not duplicated and not missing and len(out) == RECORDS, (
        f"seed {seed}: {len(duplicated)} duplicated (e.g. {list(duplicated.items())[:5]}), "
        f"{len(missing)} missing (e.g. {missing[:5]}), {app.runs} app runs\n{app.tail()}"
    )
    assert app.runs > ROUNDS  # each round started an app and killed it, and the last ran
