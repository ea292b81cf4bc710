"""Transactions end to end on a real 3-broker cluster (gRPC path).

A committed transaction over two partitions becomes visible to ``read_committed``
consumers at once; an aborted one never does (``read_uncommitted`` sees it); a second
producer with the same ``transactional_id`` fences the first (PRODUCER_FENCED); killing
the transaction coordinator's broker mid-transaction leaves nothing aborted readable and
lets the producer go on after the failover; a late write of an ended transaction is
refused by the partition leader (KIP-890).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import headwater
import pytest
from headwater import errors
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.records.control import set_batch_flags
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer
from headwater.transactions.placement import TRANSACTION_STATE_TOPIC, partition_for
from headwater.v1 import broker_pb2

from tests.e2e.client.raw import stub_for, wait_leader
from tests.e2e.groups.conftest import wait_until

TP = headwater.TopicPartition

BROKER_OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    data_dir: Path = tmp_path_factory.mktemp("txn-cluster")
    with Cluster(
        brokers=3, data_dir=data_dir, zookeeper=zookeeper.connect_string, overrides=BROKER_OVERRIDES
    ) as c:
        yield c


def make_topic(cluster: Cluster, partitions: int = 2) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    with headwater.Admin(cluster.bootstrap, default_api_timeout_ms=30000) as admin:
        admin.create_topic(name, partitions, 3)

        def ready() -> bool:
            desc = admin.describe_topics([name]).get(name)
            return desc is not None and all(p.leader >= 0 for p in desc.partitions)

        wait_until(ready, timeout_s=30, what=f"leaders of {name}")
    return name


@pytest.fixture
def topic(cluster: Cluster) -> Callable[..., str]:
    return lambda partitions=2: make_topic(cluster, partitions)


@pytest.fixture
def own_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """A cluster of the test's own, for a test that kills a broker."""
    with Cluster(
        brokers=3, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=BROKER_OVERRIDES
    ) as c:
        yield c


def producer(cluster: Cluster, tid: str, **settings: object) -> headwater.Producer:
    return headwater.Producer(
        cluster.bootstrap,
        transactional_id=tid,
        max_block_ms=60000,
        request_timeout_ms=15000,
        **settings,  # type: ignore[arg-type]
    )


def read_all(
    cluster: Cluster, topic: str, partitions: int, *, committed: bool, expect: int | None = None
) -> list[bytes | None]:
    """Every record a fresh consumer reads from the start (until ``expect`` arrive, or
    3 s pass with nothing new)."""
    with headwater.Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed else "read_uncommitted",
        fetch_max_wait_ms=200,
    ) as c:
        c.assign([TP(topic, p) for p in range(partitions)])
        values: list[bytes | None] = []
        idle = 0
        while idle < 15 and (expect is None or len(values) < expect):
            got = c.poll(200)
            idle = 0 if got else idle + 1
            values += [r.value for r in got]
        return values


def test_commit_across_two_partitions_is_visible_to_read_committed(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    name = topic(2)
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions()
        p.begin_transaction()
        futures = [p.send(name, f"c{i}".encode(), partition=i % 2) for i in range(10)]
        p.flush(30)
        # Open: written and replicated, but not visible to read_committed.
        assert read_all(cluster, name, 2, committed=True) == []
        assert len(read_all(cluster, name, 2, committed=False, expect=10)) == 10
        p.commit_transaction()
        for f in futures:
            f.result(0)
        # The next transaction works with the bumped epoch.
        p.begin_transaction()
        p.send(name, b"second", partition=0)
        p.commit_transaction()
    seen = read_all(cluster, name, 2, committed=True, expect=11)
    assert sorted(v or b"" for v in seen) == sorted(
        [f"c{i}".encode() for i in range(10)] + [b"second"]
    )


def test_abort_is_never_visible_to_read_committed(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    name = topic(2)
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(6):
            p.send(name, f"a{i}".encode(), partition=i % 2)
        p.flush(30)
        p.abort_transaction()
        p.begin_transaction()
        p.send(name, b"kept", partition=1)
        p.commit_transaction()
    assert read_all(cluster, name, 2, committed=True) == [b"kept"]  # read until idle
    uncommitted = read_all(cluster, name, 2, committed=False, expect=7)
    assert sorted(v or b"" for v in uncommitted) == sorted(
        [f"a{i}".encode() for i in range(6)] + [b"kept"]
    )


def test_a_second_producer_with_the_same_id_fences_the_first(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    name = topic(1)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with producer(cluster, tid) as zombie, producer(cluster, tid) as successor:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(name, b"zombie", partition=0)
        zombie.flush(30)
        # The successor's InitProducerId aborts the zombie's open transaction.
        successor.init_transactions()
        with pytest.raises((errors.ProducerFencedError, errors.InvalidProducerEpochError)):
            zombie.commit_transaction()
        with pytest.raises((errors.ProducerFencedError, errors.InvalidProducerEpochError)):
            zombie.begin_transaction()
        successor.begin_transaction()
        successor.send(name, b"successor", partition=0)
        successor.commit_transaction()
    assert read_all(cluster, name, 1, committed=True, expect=1) == [b"successor"]


def test_coordinator_failover_mid_transaction(own_cluster: Cluster) -> None:
    cluster = own_cluster
    name = make_topic(cluster, 2)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with producer(cluster, tid) as p:
        p.init_transactions()
        p.begin_transaction()
        for i in range(4):
            p.send(name, f"lost{i}".encode(), partition=i % 2)
        p.flush(30)
        coordinator = cluster.leader_for(TRANSACTION_STATE_TOPIC, partition_for(tid, 3))
        assert coordinator is not None
        cluster.kill(coordinator)
        # The new coordinator loads the id from the replicated log; the transaction
        # either commits whole or is aborted -- never half.
        try:
            p.commit_transaction()
            committed = True
        except errors.HeadwaterError:
            p.abort_transaction()
            committed = False
        p.begin_transaction()
        p.send(name, b"after", partition=0)
        p.commit_transaction()
    seen = read_all(cluster, name, 2, committed=True)  # read until idle
    expected = [b"after"] + ([f"lost{i}".encode() for i in range(4)] if committed else [])
    assert sorted(v or b"" for v in seen) == sorted(expected)


def test_an_expired_transaction_is_aborted_by_the_coordinator(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    name = topic(1)
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}", transaction_timeout_ms=1500) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"expired", partition=0)
        p.flush(30)
        time.sleep(4)  # the timeout, plus the coordinator's 500 ms abort pass, passes
        # The coordinator bumped the epoch when it aborted: this producer is fenced.
        with pytest.raises(errors.ProducerFencedError):
            p.commit_transaction()
    assert read_all(cluster, name, 1, committed=True) == []
    assert read_all(cluster, name, 1, committed=False, expect=1) == [b"expired"]


def test_bad_inputs_are_refused(cluster: Cluster, topic: Callable[..., str]) -> None:
    with (
        pytest.raises(errors.InvalidTransactionTimeoutError),
        producer(cluster, f"tx-{uuid.uuid4().hex[:8]}", transaction_timeout_ms=10**9) as p,
    ):
        p.init_transactions()
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        with pytest.raises(errors.InvalidTxnStateError):
            p.send("anything", b"x")  # not in a transaction
        p.init_transactions()
        with pytest.raises(errors.InvalidTxnStateError):
            p.commit_transaction()  # nothing open
        p.begin_transaction()
        p.abort_transaction()  # nothing sent: nothing to end on the coordinator
        p.begin_transaction()


def test_consume_transform_produce_commits_output_and_offsets_together(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    source, sink = topic(1), topic(1)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with headwater.Producer(cluster.bootstrap) as plain:
        for i in range(10):
            plain.send(source, f"in{i}".encode(), partition=0)
        plain.flush(30)

    def run_once(*, commit: bool, batch: int) -> None:
        with (
            headwater.Consumer(
                bootstrap_servers=cluster.bootstrap,
                group_id=group,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            ) as consumer,
            producer(cluster, f"ctp-{group}") as p,
        ):
            consumer.subscribe([source])
            p.init_transactions()
            got: list[headwater.ConsumerRecord] = []
            deadline = time.monotonic() + 30
            while len(got) < batch and time.monotonic() < deadline:
                got += consumer.poll(200, max_records=batch - len(got))
            assert len(got) == batch
            p.begin_transaction()
            for r in got:
                p.send(sink, (r.value or b"").replace(b"in", b"out"), partition=0)
            p.send_offsets_to_transaction(
                {TP(source, 0): got[-1].offset + 1}, consumer.group_metadata()
            )
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()

    run_once(commit=False, batch=4)  # aborted: neither the output nor the offsets count
    run_once(commit=True, batch=4)  # starts again from offset 0
    run_once(commit=True, batch=6)  # continues after the committed offsets
    out = read_all(cluster, sink, 1, committed=True, expect=10)
    assert out == [f"out{i}".encode() for i in range(4)] + [
        f"out{i}".encode() for i in range(4, 10)
    ]
    with headwater.Consumer(bootstrap_servers=cluster.bootstrap, group_id=group) as c:
        assert c.committed(TP(source, 0)) == 10


def test_admin_and_cli_describe_and_list_transactions(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    name = topic(1)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with producer(cluster, tid) as p, headwater.Admin(cluster.bootstrap) as admin:
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"open", partition=0)
        p.flush(30)
        d = admin.describe_transactions([tid])[tid]
        assert d.state == "Ongoing" and d.partitions == (TP(name, 0),)
        listed = admin.list_transactions(states=["Ongoing"])
        assert tid in {t.transactional_id for t in listed}
        out = subprocess.run(
            [sys.executable, "-m", "headwater.cli.main", "transactions", "describe", tid,
             "--bootstrap-server", cluster.bootstrap],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "Ongoing" in out.stdout and tid in out.stdout
        [active] = admin.describe_producers([TP(name, 0)])[TP(name, 0)]
        assert active.producer_id == d.producer_id and active.current_transaction_start_offset == 0
        p.commit_transaction()
        assert admin.describe_transactions([tid])[tid].state in ("PrepareCommit", "CompleteCommit")
        with pytest.raises(errors.TransactionalIdNotFoundError):
            admin.describe_transactions([f"unknown-{tid}"])


def test_a_late_produce_of_an_ended_transaction_is_refused_by_the_leader(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    """KIP-890 on real brokers: after the commit (epoch bumped by the markers), a
    delayed or replayed produce of the ended transaction cannot reopen it, and one for
    a partition the coordinator never added is refused too."""
    name = topic(2)
    tid = f"tx-{uuid.uuid4().hex[:8]}"
    with producer(cluster, tid) as p, headwater.Admin(cluster.bootstrap) as admin:
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"on-time", partition=0)
        p.flush(30)
        d = admin.describe_transactions([tid])[tid]
        pid, epoch = d.producer_id, d.producer_epoch
        p.commit_transaction()
        # EndTxn answers once PrepareCommit is logged; the markers (which end the
        # transaction in each partition) follow: before them a batch of the old epoch
        # still belongs to the open transaction there.
        wait_until(
            lambda: admin.describe_transactions([tid])[tid].state == "CompleteCommit",
            timeout_s=30,
            what="the markers of the committed transaction",
        )

        def late(partition: int, value: bytes, seq: int) -> int:
            batch = set_batch_flags(
                build_batch(
                    [Record(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
                ),
                transactional=True,
            )
            leader = wait_leader(cluster, name, partition)
            with stub_for(cluster, leader) as stub:
                resp = stub.Produce(
                    broker_pb2.ProduceRequest(
                        acks=-1,
                        timeout_ms=10000,
                        transactional_id=tid,
                        partitions=[
                            broker_pb2.ProducePartitionData(
                                topic=name, partition=partition, records=batch
                            )
                        ],
                    ),
                    timeout=20,
                )
            return int(resp.partitions[0].error)

        assert late(0, b"late-replay", 1) == ErrorCode.INVALID_PRODUCER_EPOCH
        # Partition 1 was never added: the coordinator says no to the leader.
        assert late(1, b"never-added", 0) in (
            ErrorCode.INVALID_PRODUCER_EPOCH,
            ErrorCode.INVALID_TXN_STATE,
        )
    assert read_all(cluster, name, 2, committed=True, expect=1) == [b"on-time"]
    assert sorted(read_all(cluster, name, 2, committed=False, expect=1)) == [b"on-time"]


def test_a_hanging_transaction_is_aborted_by_the_cli(
    cluster: Cluster, topic: Callable[..., str]
) -> None:
    """A producer that goes away without ending its transaction holds the partition's
    LSO (until its 60 s timeout here); 'headwater transactions abort' writes the ABORT
    marker at once, found by the start offset DescribeProducers shows."""
    name = topic(1)
    with headwater.Producer(cluster.bootstrap) as plain:
        plain.send(name, b"before", partition=0).result(30)
    with producer(cluster, f"tx-{uuid.uuid4().hex[:8]}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(name, b"hanging", partition=0)
        p.flush(30)
    with headwater.Admin(cluster.bootstrap) as admin:
        [hanging] = [
            s
            for s in admin.describe_producers([TP(name, 0)])[TP(name, 0)]
            if s.current_transaction_start_offset >= 0
        ]
        assert hanging.current_transaction_start_offset == 1
    with headwater.Producer(cluster.bootstrap) as plain:
        plain.send(name, b"after", partition=0).result(30)
    assert read_all(cluster, name, 1, committed=True, expect=1) == [b"before"]  # LSO held
    out = subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", "transactions", "abort", "--topic", name,
         "--partition", "0", "--start-offset", "1", "--bootstrap-server", cluster.bootstrap],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert read_all(cluster, name, 1, committed=True, expect=2) == [b"before", b"after"]
