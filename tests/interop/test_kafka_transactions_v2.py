"""Transaction version 2 (KIP-890 part 2) through the Kafka listener.

A two-broker cluster, each broker with a gRPC and a Kafka listener, whose ApiVersions
finalizes ``transaction.version`` 2:

* Apache Kafka's 4.x transactional producer (kafka-clients 4.3, ``KafkaTransactions.java``)
  commits, aborts and commits again, with its group's offsets sent in each transaction:
  the coordinator's epoch for the id rises at every transaction end and the next
  transaction runs at it; ``read_committed`` reads exactly the committed records and the
  group's offset is the last committed transaction's;
* a late produce of the first transaction, replayed on a raw Kafka-protocol connection
  with its old epoch (Produce v12 and v11), is refused and never becomes visible;
* a raw transaction version 2 client (Produce v12 with no AddPartitionsToTxn, EndTxn v5):
  the leader adds the partition itself, EndTxn answers the bumped epoch, a replay of the
  first transaction's batch while the second is open is refused, a retried EndTxn of the
  first answers the current epoch, and only the committed records are read;
* Kafka's 3.9.1 producer (transaction version 1) on the same broker keeps its epoch and
  commits and aborts as before.

Without Java or the 4.x jars the Java tests skip, saying how to fetch them, unless ``CI``
is set (then ``scripts/fetch-kafka-clients-4.sh`` runs).
"""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.records.control import set_batch_flags
from headwater.testing import Cluster

from .test_kafka_interop import kafka_classpath  # noqa: F401 (a fixture: the 3.9.1 jars)
from .test_kafka_listener import _exchange
from .test_kafka_transactions import grpc_read, new_topic, rd_read, two_broker_cluster, unique

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
CLIENTS_4 = Path(os.environ.get("KAFKA_CLIENTS_4_DIR", ROOT / ".tools" / "kafka-clients-4"))
FETCH_4 = ROOT / "scripts" / "fetch-kafka-clients-4.sh"
PROGRAM = Path(__file__).with_name("KafkaTransactions.java")
JVM_TIMEOUT_S = 180
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from two_broker_cluster(tmp_path_factory.mktemp("kafka-txn-v2"))


def _clients_4_ready() -> bool:
    return any(CLIENTS_4.glob(".complete-*")) and any(CLIENTS_4.glob("kafka-clients-4*.jar"))


@pytest.fixture(scope="module")
def kafka4_classpath() -> str:
    """kafka-clients 4.x and its jars, fetched first under CI."""
    if shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but `java` is not on PATH (run scripts/install-system-deps.sh)")
        pytest.skip("java is not installed")
    if not _clients_4_ready():
        if not os.environ.get("CI"):
            pytest.skip(f"{CLIENTS_4} is missing; run `bash {FETCH_4.relative_to(ROOT)}`")
        done = subprocess.run(
            ["bash", str(FETCH_4)], capture_output=True, text=True, timeout=900, check=False
        )
        if done.returncode != 0 or not _clients_4_ready():
            pytest.fail(f"{FETCH_4.name} failed:\n{done.stdout}\n{done.stderr}")
    return os.pathsep.join(str(p) for p in sorted(CLIENTS_4.glob("*.jar")))


def kafka_bootstrap(cluster: Cluster) -> str:
    return cluster.kafka_bootstrap


class JavaRun:
    """What KafkaTransactions.java printed: each step's (state, producer id, epoch)."""

    def __init__(self, stdout: str) -> None:
        self.steps: dict[str, tuple[str, int, int]] = {}
        self.group_offset = -2
        for line in stdout.splitlines():
            words = line.split()
            if words[:1] == ["txn"]:
                self.steps[words[1]] = (words[2], int(words[3]), int(words[4]))
            elif words[:1] == ["group-offset"]:
                self.group_offset = int(words[1])

    def epoch(self, step: str) -> int:
        return self.steps[step][2]


def run_java(classpath: str, cluster: Cluster, topic: str, tid: str, group: str) -> JavaRun:
    done = subprocess.run(
        ["java", "-cp", classpath, str(PROGRAM), kafka_bootstrap(cluster), topic, tid, group],
        capture_output=True,
        text=True,
        timeout=JVM_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"KafkaTransactions.java failed ({done.returncode}):\n{done.stderr[-4000:]}")
    run = JavaRun(done.stdout)
    assert set(run.steps) == {
        "init",
        *(f"{n}-{s}" for n in ("c1", "a2", "c3") for s in ("open", "ended")),
    }, done.stdout
    return run


COMMITTED = [b"c1-0", b"c1-1", b"c3-0", b"c3-1"]
EVERYTHING = [b"a2-0", b"a2-1", *COMMITTED]


def _check_reads(cluster: Cluster, topic: str) -> None:
    assert sorted(rd_read(cluster, topic, 2, committed=True)) == COMMITTED
    assert sorted(grpc_read(cluster, topic, 2, expect=len(COMMITTED))) == COMMITTED
    assert sorted(rd_read(cluster, topic, 2, committed=False, expect=6)) == EVERYTHING


# -- a raw Kafka-protocol connection ----------------------------------------------------------


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    sock.settimeout(TIMEOUT_S)
    return sock


def _leader_port(cluster: Cluster, topic: str, partition: int) -> int:
    leader = cluster.leader_for(topic, partition)
    assert leader is not None
    return int(cluster.kafka_ports[leader])


def _txn_batch(value: bytes, pid: int, epoch: int, seq: int) -> bytes:
    batch = build_batch(
        [Record(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    return set_batch_flags(batch, transactional=True)


def _produce(port: int, tid: str, topic: str, batch: bytes, *, version: int = 12) -> int:
    """One transactional batch to ``topic``'s partition 0 at Produce ``version``; its error."""
    from kio.index import load_payload_module
    from kio.static.constants import EntityType

    m = load_payload_module(0, version, EntityType.request)
    request = m.ProduceRequest(
        transactional_id=tid,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            m.TopicProduceData(
                name=topic, partition_data=(m.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    with _connect(port) as sock:
        r = _exchange(sock, 1, request)
    [t] = r.responses
    [p] = t.partition_responses
    return int(p.error_code)


def _produce_retrying(port: int, tid: str, topic: str, batch: bytes) -> int:
    """:func:`_produce` at v12, retried while the coordinator answers CONCURRENT_TRANSACTIONS
    (the last transaction's markers are still being written), as Kafka's producer retries."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        code = _produce(port, tid, topic, batch)
        if code != ErrorCode.CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return code
        time.sleep(0.05)


def _coordinator_port(cluster: Cluster, tid: str) -> int:
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    deadline = time.monotonic() + TIMEOUT_S
    while True:
        with _connect(next(iter(cluster.kafka_ports.values()))) as sock:
            r = _exchange(sock, 1, FindCoordinatorRequest(key=tid, key_type=1))
        if r.error_code == 0:
            return int(r.port)
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def _until_no(code: ErrorCode, call: Any) -> Any:
    """``call()``'s answer once it is no longer ``code`` (a transaction still completing)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        r = call()
        if r.error_code != code or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def _init(port: int, tid: str) -> tuple[int, int]:
    from kio.schema.init_producer_id.v5.request import InitProducerIdRequest

    request = InitProducerIdRequest(
        transactional_id=tid,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )

    def call() -> Any:
        with _connect(port) as sock:
            return _exchange(sock, 1, request)

    r = _until_no(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, call)
    assert r.error_code == 0, r
    return int(r.producer_id), int(r.producer_epoch)


def _end(port: int, tid: str, pid: int, epoch: int, *, commit: bool) -> Any:
    from kio.schema.end_txn.v5.request import EndTxnRequest

    request = EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    )

    def call() -> Any:
        with _connect(port) as sock:
            return _exchange(sock, 1, request)

    return _until_no(ErrorCode.CONCURRENT_TRANSACTIONS, call)


# -- the tests --------------------------------------------------------------------------------


def test_kafka_4_producer_bumps_the_epoch_at_every_end_and_a_replay_is_fenced(
    cluster: Cluster, kafka4_classpath: str
) -> None:
    topic, tid, group = new_topic(cluster), unique("tv2"), unique("g")
    run = run_java(kafka4_classpath, cluster, topic, tid, group)
    init = run.epoch("init")
    pid = run.steps["init"][1]
    # Each transaction runs at the epoch the previous end gave; every end bumps it.
    assert [run.epoch(f"{n}-open") for n in ("c1", "a2", "c3")] == [init, init + 1, init + 2]
    assert [run.epoch(f"{n}-ended") for n in ("c1", "a2", "c3")] == [init + 1, init + 2, init + 3]
    assert {run.steps[s][1] for s in run.steps} == {pid}
    assert run.steps["c1-open"][0] == "Ongoing"
    assert run.steps["c3-ended"][0] in ("PrepareCommit", "CompleteCommit")
    assert run.steps["a2-ended"][0] in ("PrepareAbort", "CompleteAbort")
    assert run.group_offset == 11
    _check_reads(cluster, topic)

    # A late produce of c1 (its epoch), on a raw connection, in either version's form.
    port = _leader_port(cluster, topic, 0)
    for version, seq in ((12, 0), (12, 1), (11, 1)):
        code = _produce(port, tid, topic, _txn_batch(b"late", pid, init, seq), version=version)
        assert code != 0, (version, seq)
    _check_reads(cluster, topic)


def test_raw_transaction_version_2_client_and_a_replay_during_the_next_transaction(
    cluster: Cluster,
) -> None:
    topic, tid = new_topic(cluster, 1), unique("raw")
    coordinator = _coordinator_port(cluster, tid)
    leader = _leader_port(cluster, topic, 0)
    pid, epoch = _init(coordinator, tid)
    first = _txn_batch(b"t1", pid, epoch, 0)
    # No AddPartitionsToTxn: Produce v12 has the leader add the partition.
    assert _produce(leader, tid, topic, first) == 0
    r = _end(coordinator, tid, pid, epoch, commit=True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 1)
    assert _produce_retrying(leader, tid, topic, _txn_batch(b"t2", pid, epoch + 1, 0)) == 0
    # The first transaction's batch, replayed while the second is open, is refused.
    assert _produce(leader, tid, topic, first) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _produce(leader, tid, topic, _txn_batch(b"x", pid, epoch, 1)) != 0
    # Its EndTxn, retried now, cannot end the second transaction.
    r = _end(coordinator, tid, pid, epoch, commit=False)
    assert r.error_code != 0 and (r.producer_id, r.producer_epoch) == (-1, -1)
    r = _end(coordinator, tid, pid, epoch + 1, commit=True)
    assert (r.error_code, r.producer_epoch) == (0, epoch + 2)
    # A retry of that EndTxn (its answer lost) gets the result and the current epoch.
    r = _end(coordinator, tid, pid, epoch + 1, commit=True)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (0, pid, epoch + 2)
    assert sorted(rd_read(cluster, topic, 1, committed=True, expect=2)) == [b"t1", b"t2"]
    assert sorted(rd_read(cluster, topic, 1, committed=False, expect=2)) == [b"t1", b"t2"]


def test_kafka_3_9_producer_keeps_transaction_version_1_on_the_same_broker(
    cluster: Cluster,
    kafka_classpath: str,  # noqa: F811 (the fixture imported above)
) -> None:
    topic, tid, group = new_topic(cluster), unique("tv1"), unique("g")
    run = run_java(kafka_classpath, cluster, topic, tid, group)
    assert {run.epoch(s) for s in run.steps} == {run.epoch("init")}
    assert run.group_offset == 11
    _check_reads(cluster, topic)
