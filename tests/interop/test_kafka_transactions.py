"""Exactly-once through the Kafka listener, with clients no one here wrote.

A two-broker cluster, each broker with a gRPC and a Kafka listener:

* confluent-kafka (librdkafka) transactional producer: a committed transaction is read
  by a ``read_committed`` consumer, an aborted one only by ``read_uncommitted``;
* consume-transform-produce: ``send_offsets_to_transaction`` commits a group's offsets
  with the output, and only when the transaction commits;
* ``require_stable`` (KIP-447): offsets a transaction holds answer UNSTABLE_OFFSET_COMMIT
  to OffsetFetch v7 until it commits, and librdkafka's ``read_committed`` consumer waits;
* zombie fencing: a second producer with the same ``transactional.id`` fences the first,
  whose commit fails with a fatal error, and the first's open transaction is aborted;
* both doors: a transaction committed over Kafka is read by Headwater's gRPC
  ``read_committed`` consumer, and one committed (and one aborted) over gRPC by
  librdkafka's ``read_committed`` consumer;
* kafka-python's transactional producer, when the installed version has one;
* on the wire: an open transaction holds back ListOffsets' and Fetch's last stable offset,
  and an aborted one is named in a READ_COMMITTED Fetch's ``aborted_transactions``;
* bad input, spoken with kio's message types: EndTxn with nothing open, a stale epoch, an
  unknown topic in AddPartitionsToTxn, a transaction timeout above
  ``transaction.max.timeout.ms`` and an empty transactional id each answer Kafka's error
  and change nothing; AddPartitionsToTxn v4 with ``verify_only`` adds nothing; a
  TxnOffsetCommit without AddOffsetsToTxn answers INVALID_TXN_STATE and commits nothing;
* fuzz: well-formed transaction requests with arbitrary values are each answered, and the
  listener serves on.
"""

from __future__ import annotations

import datetime
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from headwater.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from headwater.errors import ErrorCode
from headwater.testing import Cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_kafka_listener import _exchange

pytestmark = pytest.mark.e2e

TIMEOUT_S = 30


def two_broker_cluster(data_dir: Any, **overrides: str) -> Iterator[Cluster]:
    """Two brokers, each with a plaintext Kafka listener (``kafka_ports``: broker -> port),
    and a small replicated transaction log and offsets topic."""
    with Cluster(
        brokers=2,
        data_dir=data_dir,
        kafka_listener=True,
        overrides={
            "transaction.state.log.num.partitions": "3",
            "transaction.state.log.replication.factor": "2",
            "transaction.state.log.min.isr": "1",
            "offsets.topic.num.partitions": "3",
            "group.initial.rebalance.delay.ms": "0",
            **overrides,
        },
    ) as c:
        yield c


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from two_broker_cluster(
        tmp_path_factory.mktemp("kafka-txn"), **{"transaction.max.timeout.ms": "120000"}
    )


def kafka_bootstrap(cluster: Cluster) -> str:
    return cluster.kafka_bootstrap


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def new_topic(cluster: Cluster, partitions: int = 2) -> str:
    name = unique("kx")
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 2)], timeout_ms=15000)
    for p in range(partitions):
        cluster.wait_for(lambda p=p: cluster.leader_for(name, p) is not None, what="a leader")
    return name


def rd_producer(cluster: Cluster, tid: str) -> Any:
    ck = pytest.importorskip("confluent_kafka")
    return ck.Producer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "transactional.id": tid,
            "transaction.timeout.ms": 60000,
        }
    )


def rd_read(
    cluster: Cluster, topic: str, partitions: int, *, committed: bool, expect: int | None = None
) -> list[bytes]:
    """Every value a fresh librdkafka consumer reads from the start (until ``expect``
    arrive, or 3 s pass with nothing new)."""
    ck = pytest.importorskip("confluent_kafka")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": unique("g"),
            "enable.auto.commit": False,
            "isolation.level": "read_committed" if committed else "read_uncommitted",
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.assign(
            [ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)]
        )
        values: list[bytes] = []
        idle_since = time.monotonic()
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline and (expect is None or len(values) < expect):
            m = consumer.poll(0.2)
            if m is None or m.error():
                if time.monotonic() - idle_since > 3:
                    break
                continue
            idle_since = time.monotonic()
            values.append(m.value())
        return values
    finally:
        consumer.close()


def grpc_read(cluster: Cluster, topic: str, partitions: int, *, expect: int) -> list[bytes]:
    with Consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        fetch_max_wait_ms=200,
    ) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        values: list[bytes] = []
        idle = 0
        while idle < 15 and len(values) < expect:
            got = c.poll(200)
            idle = 0 if got else idle + 1
            values += [r.value or b"" for r in got]
        return values


# -- librdkafka -------------------------------------------------------------------------------


def test_librdkafka_commits_and_aborts(cluster: Cluster) -> None:
    topic = new_topic(cluster)
    p = rd_producer(cluster, unique("tx"))
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, f"kept-{i}".encode(), partition=i % 2)
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"dropped-{i}".encode(), partition=i % 2)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, b"last", partition=1)
    p.commit_transaction(TIMEOUT_S)

    kept = sorted([f"kept-{i}".encode() for i in range(6)] + [b"last"])
    assert sorted(rd_read(cluster, topic, 2, committed=True)) == kept
    everything = rd_read(cluster, topic, 2, committed=False, expect=11)
    assert sorted(everything) == sorted(kept + [f"dropped-{i}".encode() for i in range(4)])


def test_librdkafka_consume_transform_produce_commits_offsets_with_the_output(
    cluster: Cluster,
) -> None:
    ck = pytest.importorskip("confluent_kafka")
    source, sink = new_topic(cluster, 1), new_topic(cluster, 1)
    with Producer(cluster.bootstrap) as plain:
        for i in range(5):
            plain.send(source, f"in-{i}".encode(), partition=0)
        plain.flush(TIMEOUT_S)
    group = unique("ctp")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = rd_producer(cluster, unique("ctp-tx"))
    try:
        consumer.subscribe([source])
        producer.init_transactions(TIMEOUT_S)
        got: list[Any] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(got) < 5 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
        assert [m.value() for m in got] == [f"in-{i}".encode() for i in range(5)]

        def transform(batch: list[Any], *, commit: bool) -> None:
            producer.begin_transaction()
            for m in batch:
                producer.produce(sink, m.value().upper(), partition=0)
            position = [ck.TopicPartition(source, 0, batch[-1].offset() + 1)]
            producer.send_offsets_to_transaction(
                position, consumer.consumer_group_metadata(), TIMEOUT_S
            )
            if commit:
                producer.commit_transaction(TIMEOUT_S)
            else:
                producer.abort_transaction(TIMEOUT_S)

        transform(got[:3], commit=True)
        transform(got[3:], commit=False)  # neither the output nor the offset counts
        (committed,) = consumer.committed([ck.TopicPartition(source, 0)], TIMEOUT_S)
        assert committed.offset == 3
    finally:
        consumer.close()
    assert rd_read(cluster, sink, 1, committed=True) == [b"IN-0", b"IN-1", b"IN-2"]


def test_require_stable_waits_for_a_pending_transactional_offset_commit(
    cluster: Cluster,
) -> None:
    """KIP-447: while a transaction holds offsets for a group, OffsetFetch v7 with
    ``require_stable`` answers UNSTABLE_OFFSET_COMMIT for the partition (without it: the
    last stable offset), and librdkafka's ``read_committed`` consumer, which asks with it,
    waits for the transaction to end before it returns the offset."""
    ck = pytest.importorskip("confluent_kafka")
    from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic

    topic = new_topic(cluster, 1)
    group = unique("stable")
    consumer = ck.Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cluster),
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    producer = rd_producer(cluster, unique("stable-tx"))
    raw = coordinator_connection(cluster, group, key_type=0)

    def fetch(require_stable: bool) -> tuple[int, int]:
        r = raw(
            OffsetFetchRequest(
                group_id=group,
                topics=(OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),),
                require_stable=require_stable,
            )
        )
        assert r.error_code == 0, r
        ((part,),) = (t.partitions for t in r.topics)
        return part.committed_offset, int(part.error_code)

    try:
        producer.init_transactions(TIMEOUT_S)
        producer.begin_transaction()
        producer.produce(topic, b"out", partition=0)
        producer.send_offsets_to_transaction(
            [ck.TopicPartition(topic, 0, 7)], consumer.consumer_group_metadata(), TIMEOUT_S
        )
        assert fetch(require_stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
        assert fetch(require_stable=False) == (-1, 0)

        answered: list[Any] = []
        waiting = threading.Thread(
            target=lambda: answered.extend(
                consumer.committed([ck.TopicPartition(topic, 0)], TIMEOUT_S)
            )
        )
        waiting.start()
        waiting.join(2)
        assert waiting.is_alive(), answered  # librdkafka retries while the offset is unstable
        producer.commit_transaction(TIMEOUT_S)
        waiting.join(TIMEOUT_S)
        assert [(tp.offset, tp.error) for tp in answered] == [(7, None)]
        assert fetch(require_stable=True) == (7, 0)
    finally:
        raw.close()
        consumer.close()


def test_librdkafka_second_producer_fences_the_first(cluster: Cluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(cluster, 1)
    tid = unique("zombie")
    zombie = rd_producer(cluster, tid)
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce(topic, b"zombie", partition=0)
    zombie.flush(TIMEOUT_S)
    successor = rd_producer(cluster, tid)
    successor.init_transactions(TIMEOUT_S)  # aborts the zombie's open transaction
    with pytest.raises(ck.KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error = raised.value.args[0]
    assert error.fatal(), error
    assert error.code() in (ck.KafkaError._FENCED, ck.KafkaError.PRODUCER_FENCED), error
    successor.begin_transaction()
    successor.produce(topic, b"successor", partition=0)
    successor.commit_transaction(TIMEOUT_S)
    assert rd_read(cluster, topic, 1, committed=True) == [b"successor"]


# -- both doors -------------------------------------------------------------------------------


def test_a_kafka_transaction_is_read_committed_over_grpc_and_the_other_way(
    cluster: Cluster,
) -> None:
    topic = new_topic(cluster)
    p = rd_producer(cluster, unique("door"))
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, b"over-kafka-aborted", partition=0)
    p.flush(TIMEOUT_S)
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    p.produce(topic, b"over-kafka", partition=0)
    p.produce(topic, b"over-kafka", partition=1)
    p.commit_transaction(TIMEOUT_S)
    assert grpc_read(cluster, topic, 2, expect=2) == [b"over-kafka", b"over-kafka"]

    with Producer(cluster.bootstrap, transactional_id=unique("door-grpc")) as g:
        g.init_transactions()
        g.begin_transaction()
        g.send(topic, b"over-grpc-aborted", partition=1)
        g.flush(TIMEOUT_S)
        g.abort_transaction()
        g.begin_transaction()
        g.send(topic, b"over-grpc", partition=1)
        g.commit_transaction()
    assert sorted(rd_read(cluster, topic, 2, committed=True)) == [
        b"over-grpc",
        b"over-kafka",
        b"over-kafka",
    ]


# -- kafka-python -----------------------------------------------------------------------------


def test_kafka_python_transactional_producer(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    if not hasattr(kafka.KafkaProducer, "init_transactions"):
        pytest.skip(f"kafka-python {kafka.__version__} has no transactional producer")
    topic = new_topic(cluster)
    producer = kafka.KafkaProducer(
        bootstrap_servers=kafka_bootstrap(cluster), transactional_id=unique("kp")
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kp-aborted", partition=0)
        producer.flush(TIMEOUT_S)
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kp-committed", partition=1)
        producer.commit_transaction()
    finally:
        producer.close(TIMEOUT_S)
    assert rd_read(cluster, topic, 2, committed=True) == [b"kp-committed"]
    assert sorted(rd_read(cluster, topic, 2, committed=False, expect=2)) == [
        b"kp-aborted",
        b"kp-committed",
    ]


# -- bad input, spoken with kio's message types --------------------------------------------


class Raw:
    """One connection to a broker's Kafka listener, sending kio requests."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        self.correlation_id = 0

    def __call__(self, request: Any) -> Any:
        self.correlation_id += 1
        return _exchange(self.sock, self.correlation_id, request)

    def close(self) -> None:
        self.sock.close()


def coordinator_connection(cluster: Cluster, tid: str, key_type: int = 1) -> Raw:
    """A connection to the transaction coordinator of ``tid`` (key_type 0: the group
    coordinator of group ``tid``), found with FindCoordinator v4."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    first = Raw(next(iter(cluster.kafka_ports.values())))
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            answer = first(FindCoordinatorRequest(key_type=key_type, coordinator_keys=(tid,)))
            (c,) = answer.coordinators
            if c.error_code == 0:
                return Raw(c.port)
            assert c.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE, c
            assert time.monotonic() < deadline, c
            time.sleep(0.2)
    finally:
        first.close()


def _init(raw: Raw, tid: str, timeout_ms: int = 60000) -> Any:
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    return raw(
        InitProducerIdRequest(
            transactional_id=tid,
            transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
            producer_id=-1,
            producer_epoch=-1,
        )
    )


def _describe(raw: Raw, tid: str) -> Any:
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    (state,) = raw(DescribeTransactionsRequest(transactional_ids=(tid,))).transaction_states
    return state


def _held(cluster: Cluster, tid: str) -> tuple[str, int, int, tuple[Any, ...]]:
    """What the coordinator holds for ``tid``, read through the gRPC door (kio cannot
    read the -1 start time Kafka's DescribeTransactions gives an id with nothing open)."""
    with Admin(cluster.bootstrap) as admin:
        d = admin.describe_transactions([tid])[tid]
    return d.state, d.producer_id, d.producer_epoch, d.partitions


def test_bad_transaction_requests_answer_kafkas_errors_and_change_nothing(
    cluster: Cluster,
) -> None:
    from kio.schema.add_partitions_to_txn.v3.request import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from kio.schema.add_partitions_to_txn.v4.request import (
        AddPartitionsToTxnRequest as AddV4,
    )
    from kio.schema.add_partitions_to_txn.v4.request import (
        AddPartitionsToTxnTopic as TopicV4,
    )
    from kio.schema.add_partitions_to_txn.v4.request import AddPartitionsToTxnTransaction
    from kio.schema.end_txn.v3.request import EndTxnRequest
    from kio.schema.txn_offset_commit.v3.request import (
        TxnOffsetCommitRequest,
        TxnOffsetCommitRequestPartition,
        TxnOffsetCommitRequestTopic,
    )

    topic = new_topic(cluster, 1)
    tid = unique("bad")
    raw = coordinator_connection(cluster, tid)
    try:
        assert _init(raw, tid, timeout_ms=10**9).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert _describe(raw, tid).error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert _init(raw, "").error_code == ErrorCode.INVALID_REQUEST

        init = _init(raw, tid)
        assert init.error_code == 0
        pid, epoch = init.producer_id, init.producer_epoch

        def end(e: int) -> int:
            r = raw(
                EndTxnRequest(
                    transactional_id=tid, producer_id=pid, producer_epoch=e, committed=True
                )
            )
            return int(r.error_code)

        def add(name: str, e: int) -> list[tuple[str, int]]:
            r = raw(
                AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=tid,
                    v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=e,
                    v3_and_below_topics=(
                        AddPartitionsToTxnTopic(name=name, partitions=(0,)),
                        AddPartitionsToTxnTopic(name=topic, partitions=(0,)),
                    ),
                )
            )
            return sorted(
                (t.name, int(p.partition_error_code))
                for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition
            )

        assert end(epoch) == ErrorCode.INVALID_TXN_STATE  # nothing open
        missing = unique("missing")
        assert add(missing, epoch) == sorted(
            [
                (missing, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                (topic, ErrorCode.OPERATION_NOT_ATTEMPTED),
            ]
        )
        assert _held(cluster, tid) == ("Empty", pid, epoch, ())
        stale = add(topic, epoch - 1 if epoch > 0 else epoch + 5)
        assert {code for _, code in stale} <= {
            ErrorCode.PRODUCER_FENCED,
            ErrorCode.INVALID_PRODUCER_EPOCH,
        }, stale
        assert end(epoch + 5) in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        assert _held(cluster, tid) == ("Empty", pid, epoch, ())

        # v4 is the brokers' form (CLUSTER_ACTION; this cluster has no authorizer):
        # verify_only asks about the partition and adds nothing.
        r = raw(
            AddV4(
                transactions=(
                    AddPartitionsToTxnTransaction(
                        transactional_id=tid,
                        producer_id=pid,
                        producer_epoch=epoch,
                        verify_only=True,
                        topics=(TopicV4(name=topic, partitions=(0,)),),
                    ),
                )
            )
        )
        (result,) = r.results_by_transaction
        codes = [
            int(p.partition_error_code)
            for t in result.topic_results
            for p in t.results_by_partition
        ]
        assert codes and all(c != 0 for c in codes), codes
        assert _held(cluster, tid) == ("Empty", pid, epoch, ())

        # TxnOffsetCommit without AddOffsetsToTxn: the transaction coordinator has not
        # put the group in the transaction, so the group coordinator refuses (KIP-890).
        group = unique("no-add-offsets")
        assert add(topic, epoch) == [(topic, 0), (topic, 0)]  # opens a transaction
        groups = coordinator_connection(cluster, group, key_type=0)
        try:
            r = groups(
                TxnOffsetCommitRequest(
                    transactional_id=tid,
                    group_id=group,
                    producer_id=pid,
                    producer_epoch=epoch,
                    topics=(
                        TxnOffsetCommitRequestTopic(
                            name=topic,
                            partitions=(
                                TxnOffsetCommitRequestPartition(
                                    partition_index=0,
                                    committed_offset=7,
                                    committed_leader_epoch=-1,
                                    committed_metadata=None,
                                ),
                            ),
                        ),
                    ),
                )
            )
        finally:
            groups.close()
        assert [
            (t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions
        ] == [(topic, 0, ErrorCode.INVALID_TXN_STATE)]
        assert end(epoch) == 0  # the data partition's transaction commits; no offsets
        with Admin(cluster.bootstrap) as admin:
            committed = admin.list_consumer_group_offsets(group)
        assert not committed, committed
    finally:
        raw.close()


def test_read_committed_fetch_and_list_offsets_on_the_wire(cluster: Cluster) -> None:
    """An open transaction holds the last stable offset back (ListOffsets' latest, Fetch's
    ``last_stable_offset`` and records); once aborted, a READ_COMMITTED Fetch names it in
    ``aborted_transactions`` and a READ_UNCOMMITTED one does not."""
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.list_offsets.v7.request import (
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
    )

    topic = new_topic(cluster, 1)
    with Producer(cluster.bootstrap) as plain:
        plain.send(topic, b"before", partition=0)
        plain.flush(TIMEOUT_S)
    p = rd_producer(cluster, unique("wire"))
    p.init_transactions(TIMEOUT_S)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"open-{i}".encode(), partition=0)
    p.flush(TIMEOUT_S)
    leader = cluster.leader_for(topic, 0)
    raw = Raw(cluster.kafka_ports[leader])
    try:

        def latest(isolation: int) -> int:
            r = raw(
                ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=isolation,
                    topics=(
                        ListOffsetsTopic(
                            name=topic,
                            partitions=(ListOffsetsPartition(partition_index=0, timestamp=-1),),
                        ),
                    ),
                )
            )
            (part,) = r.topics[0].partitions
            assert part.error_code == 0, part
            return int(part.offset)

        def fetch(isolation: int) -> Any:
            r = raw(
                FetchRequest(
                    max_wait=datetime.timedelta(milliseconds=10),
                    min_bytes=1,
                    isolation_level=isolation,
                    topics=(
                        FetchTopic(
                            topic=topic,
                            partitions=(
                                FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                )
            )
            (part,) = r.responses[0].partitions
            assert part.error_code == 0, part
            return part

        assert (latest(0), latest(1)) == (4, 1)  # HW past the open batch, LSO at its start
        committed, uncommitted = fetch(1), fetch(0)
        assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
        assert len(uncommitted.records or b"") > len(committed.records or b"") > 0
        p.abort_transaction(TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while latest(1) < 5 and time.monotonic() < deadline:  # the ABORT marker is offset 4
            time.sleep(0.1)
        assert (latest(0), latest(1)) == (5, 5)
        aborted = fetch(1)
        assert [(a.first_offset,) for a in aborted.aborted_transactions or ()] == [(1,)]
        assert not fetch(0).aborted_transactions
    finally:
        raw.close()


# -- fuzz: well-formed transaction requests with arbitrary values ---------------------------


def _requests() -> st.SearchStrategy[Any]:
    from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
    from kio.schema.add_partitions_to_txn.v3.request import (
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnTopic,
    )
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.end_txn.v3.request import EndTxnRequest
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.list_transactions.v1.request import ListTransactionsRequest

    ids = st.text(max_size=12)
    pid = st.integers(-2, 1 << 40)
    epoch = st.integers(-2, 32767)
    topics = st.sampled_from(["t-fuzz", "", "no-such-topic", "__transaction_state"])
    parts = st.lists(st.integers(-2, 3), max_size=3).map(tuple)
    return st.one_of(
        st.builds(
            InitProducerIdRequest,
            transactional_id=st.one_of(st.none(), ids),
            transaction_timeout=st.integers(0, (1 << 31) - 1).map(
                lambda ms: datetime.timedelta(milliseconds=ms)
            ),
            producer_id=pid,
            producer_epoch=epoch,
        ),
        st.builds(
            FindCoordinatorRequest,
            key_type=st.integers(-1, 2),
            coordinator_keys=st.lists(ids, max_size=3).map(tuple),
        ),
        st.builds(
            AddPartitionsToTxnRequest,
            v3_and_below_transactional_id=ids,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=st.lists(
                st.builds(AddPartitionsToTxnTopic, name=topics, partitions=parts), max_size=2
            ).map(tuple),
        ),
        st.builds(
            AddOffsetsToTxnRequest,
            transactional_id=ids,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=ids,
        ),
        st.builds(
            EndTxnRequest,
            transactional_id=ids,
            producer_id=pid,
            producer_epoch=epoch,
            committed=st.booleans(),
        ),
        st.builds(DescribeTransactionsRequest, transactional_ids=st.lists(ids).map(tuple)),
        st.builds(
            ListTransactionsRequest,
            state_filters=st.lists(st.sampled_from(["Ongoing", "Empty", "x"])).map(tuple),
            producer_id_filters=st.lists(pid, max_size=2).map(tuple),
            duration_filter=st.integers(-2, 1 << 40),
        ),
        st.builds(
            DescribeProducersRequest,
            topics=st.lists(
                st.builds(TopicRequest, name=topics, partition_indexes=parts), max_size=2
            ).map(tuple),
        ),
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_requests(), min_size=1, max_size=4))
def test_fuzz_transaction_requests_are_answered_and_the_listener_serves_on(
    cluster: Cluster, requests: list[Any]
) -> None:
    raw = Raw(cluster.kafka_ports[1])
    try:
        for request in requests:
            answer = raw(request)  # a response at the request's version, nothing else
            assert type(answer).__name__ == type(request).__name__.replace("Request", "Response")
    finally:
        raw.close()
