"""ReplicaManager as a transactional partition's leader: KIP-890 verification before a
transaction's first write, markers appended as control batches, the last stable offset,
READ_COMMITTED fetches naming the aborted transactions, and the state rebuilt from the
log by a new leader."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch, read_batches
from headwater.records.control import ControlRecordType, EndTransactionMarker, set_batch_flags
from headwater.server.runtime.hosted import FetchResult, FetchSpec
from headwater.server.runtime.replica_manager import READ_COMMITTED, ReplicaManager
from headwater.values import TopicPartition

from .conftest import TP, Harness

PID = 4000


def txn_batch(*values: bytes, epoch: int = 0, seq: int = 0, pid: int = PID) -> bytes:
    batch = build_batch(
        [Record(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    return set_batch_flags(batch, transactional=True)


class Coordinator:
    """The verifier the broker would ask: the partitions it has added, per producer."""

    def __init__(self) -> None:
        self.added: set[tuple[int, int, TopicPartition]] = set()
        self.asked: list[tuple[str, int, int, TopicPartition]] = []

    def __call__(self, tid: str, pid: int, epoch: int, tp: TopicPartition) -> Awaitable[ErrorCode]:
        self.asked.append((tid, pid, epoch, tp))

        async def answer() -> ErrorCode:
            if (pid, epoch, tp) in self.added:
                return ErrorCode.NONE
            return ErrorCode.INVALID_TXN_STATE

        return answer()


async def lead(harness: Harness) -> ReplicaManager:
    m = harness.manager
    await m.prepare_topics([TP.topic])
    m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))])
    return m


async def follow_to_end(m: ReplicaManager) -> None:
    """The follower fetches up to the leader's end: the high watermark follows."""
    for _ in range(2):
        end = m.partitions[TP].log.log_end_offset
        await m.fetch(
            replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            specs=[FetchSpec(TP, end, 1, 1 << 20)],
        )  # fmt: skip


async def produce(m: ReplicaManager, data: bytes, tid: str = "tx") -> ErrorCode:
    [r] = await m.append_records(acks=1, timeout_ms=100, entries=[(TP, data)], transactional_id=tid)
    return r.error


async def marker(m: ReplicaManager, kind: ControlRecordType, epoch: int) -> ErrorCode:
    task = asyncio.ensure_future(
        m.write_txn_markers([(TP, EndTransactionMarker(kind, PID, epoch, 1))], timeout_ms=5000)
    )
    await asyncio.sleep(0)
    await follow_to_end(m)
    [r] = await asyncio.wait_for(task, 5)
    return r.error


async def fetch(m: ReplicaManager, *, committed: bool) -> FetchResult:
    [r] = await m.fetch(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        specs=[FetchSpec(TP, 0, -1, 1 << 20)],
        isolation_level=READ_COMMITTED if committed else 0,
    )
    assert r.error is ErrorCode.NONE, r
    return r


def test_a_transactional_write_is_verified_with_the_coordinator_first(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        assert await produce(m, txn_batch(b"a")) is ErrorCode.INVALID_TXN_STATE
        assert m.partitions[TP].log.log_end_offset == 0  # refused: nothing appended
        coordinator.added.add((PID, 0, TP))
        assert await produce(m, txn_batch(b"a")) is ErrorCode.NONE
        # The transaction is open here now: the next batch is not asked about.
        assert await produce(m, txn_batch(b"b", seq=1)) is ErrorCode.NONE
        assert len(coordinator.asked) == 2
        # Without its transactional id a transactional batch cannot open a transaction.
        other = txn_batch(b"c", pid=PID + 1)
        assert await produce(m, other, tid="") is ErrorCode.INVALID_TXN_STATE

    asyncio.run(scenario())


def test_a_client_may_not_write_a_control_batch(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        forged = set_batch_flags(txn_batch(b"x"), transactional=True, control=True)
        assert await produce(m, forged) is ErrorCode.INVALID_RECORD

    asyncio.run(scenario())


def test_read_committed_stops_at_the_lso_and_names_the_aborted(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        coordinator.added.add((PID, 0, TP))
        assert await produce(m, txn_batch(b"a", b"b")) is ErrorCode.NONE
        await follow_to_end(m)
        open_ = await fetch(m, committed=True)
        assert open_.records == b"" and open_.last_stable_offset == 0
        assert (await fetch(m, committed=False)).records != b""  # READ_UNCOMMITTED unchanged
        assert await marker(m, ControlRecordType.ABORT, 1) is ErrorCode.NONE
        done = await fetch(m, committed=True)
        assert done.last_stable_offset == 3 == done.high_watermark
        assert done.aborted == ((PID, 0),)
        batches = list(read_batches(done.records))
        assert [b.is_control for b in batches] == [False, True]
        # A late write of the aborted transaction (epoch 0) is fenced by the marker's epoch.
        late = await produce(m, txn_batch(b"late", seq=2))
        assert late is ErrorCode.INVALID_PRODUCER_EPOCH
        # The next transaction at the bumped epoch commits; nothing new is aborted.
        coordinator.added.add((PID, 1, TP))
        assert await produce(m, txn_batch(b"c", epoch=1, seq=0)) is ErrorCode.NONE
        assert await marker(m, ControlRecordType.COMMIT, 2) is ErrorCode.NONE
        after = await fetch(m, committed=True)
        assert after.last_stable_offset == 5 and after.aborted == ((PID, 0),)

    asyncio.run(scenario())


def test_a_marker_older_than_the_producers_epoch_is_refused(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        coordinator.added.add((PID, 3, TP))
        assert await produce(m, txn_batch(b"a", epoch=3)) is ErrorCode.NONE
        stale = await marker(m, ControlRecordType.COMMIT, 2)
        assert stale is ErrorCode.INVALID_PRODUCER_EPOCH
        assert m.partitions[TP].transactions.open == {PID: 0}

    asyncio.run(scenario())


def test_a_retried_marker_is_answered_without_appending_it_again(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        coordinator.added.add((PID, 0, TP))
        assert await produce(m, txn_batch(b"a")) is ErrorCode.NONE
        for _ in range(3):  # the coordinator's retries of one WriteTxnMarkers
            assert await marker(m, ControlRecordType.COMMIT, 1) is ErrorCode.NONE
        log = m.partitions[TP].log
        assert log.log_end_offset == 2  # one data record, one marker
        controls = [b for b in read_batches(log.read(0, 1 << 20).records) if b.is_control]
        assert len(controls) == 1

    asyncio.run(scenario())


def test_a_new_leader_rebuilds_open_and_aborted_transactions_from_the_log(
    harness: Harness,
) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        coordinator.added.update({(PID, 0, TP), (PID, 1, TP)})
        assert await produce(m, txn_batch(b"a")) is ErrorCode.NONE
        assert await marker(m, ControlRecordType.ABORT, 1) is ErrorCode.NONE
        assert await produce(m, txn_batch(b"b", epoch=1)) is ErrorCode.NONE  # left open
        await follow_to_end(m)
        hosted = m.partitions[TP]
        before = (dict(hosted.transactions.open), hosted.log.collect_aborted(0, 100))
        # Become follower, then leader again: the state is rebuilt from the log alone.
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=1, isr=(0, 1), epoch=2)]
        )
        hosted.transactions.open.clear()
        hosted.log.reset_aborted_from(0)
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1), epoch=3)]
        )
        hosted = m.partitions[TP]
        assert (dict(hosted.transactions.open), hosted.log.collect_aborted(0, 100)) == before
        assert before[0] == {PID: 2}
        assert [(e.producer_id, e.first_offset, e.last_offset) for e in before[1]] == [(PID, 0, 1)]

    asyncio.run(scenario())


def test_read_committed_list_offsets_latest_is_the_lso(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        [plain] = await m.append_records(
            acks=1, timeout_ms=100, entries=[(TP, build_batch([Record(None, b"p")]))]
        )
        assert plain.error is ErrorCode.NONE
        coordinator.added.add((PID, 0, TP))
        assert await produce(m, txn_batch(b"a")) is ErrorCode.NONE
        await follow_to_end(m)

        def latest(level: int) -> int:
            return m.list_offset(
                TP, timestamp=-1, current_leader_epoch=-1, replica_id=-1, isolation_level=level
            ).offset

        assert latest(0) == 2  # the high watermark
        assert latest(READ_COMMITTED) == 1  # stops at the open transaction

    asyncio.run(scenario())


def test_delete_records_past_an_open_transactions_start_raises_the_lso(
    harness: Harness,
) -> None:
    """Kafka: the LSO is never below the log start offset, so READ_COMMITTED offsets
    stay inside the log; the rest of the transaction stays unreadable until it ends."""

    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        coordinator.added.add((PID, 0, TP))
        assert await produce(m, txn_batch(b"a", b"b")) is ErrorCode.NONE
        assert await produce(m, txn_batch(b"c", seq=2)) is ErrorCode.NONE
        await follow_to_end(m)
        code, low, _ = await m.delete_records(TP, 2)
        assert (code, low) == (ErrorCode.NONE, 2)
        latest = m.list_offset(
            TP, timestamp=-1, current_leader_epoch=-1, replica_id=-1, isolation_level=READ_COMMITTED
        )
        assert latest.offset == 2  # not 0, below the log start
        [r] = await m.fetch(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            specs=[FetchSpec(TP, 2, -1, 1 << 20)], isolation_level=READ_COMMITTED,
        )  # fmt: skip
        assert r.error is ErrorCode.NONE
        assert (r.records, r.last_stable_offset) == (b"", 2)  # still open: nothing served
        assert await marker(m, ControlRecordType.ABORT, 1) is ErrorCode.NONE
        [done] = await m.fetch(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            specs=[FetchSpec(TP, 2, -1, 1 << 20)], isolation_level=READ_COMMITTED,
        )  # fmt: skip
        assert done.last_stable_offset == 4
        assert done.aborted == ((PID, 0),)  # the remaining record is named aborted

    asyncio.run(scenario())


def test_active_producers_name_the_open_transaction(harness: Harness) -> None:
    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        coordinator.added.add((PID, 0, TP))
        assert await produce(m, txn_batch(b"a", b"b")) is ErrorCode.NONE
        code, _, producers = m.active_producers(TP)
        assert code is ErrorCode.NONE
        assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
                for p in producers] == [(PID, 0, 1, 0)]  # fmt: skip
        assert await marker(m, ControlRecordType.COMMIT, 1) is ErrorCode.NONE
        [after] = m.active_producers(TP)[2]
        assert (after.producer_epoch, after.current_txn_start_offset) == (1, -1)
        missing = m.active_producers(TopicPartition("nope", 0))
        assert missing[0] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    asyncio.run(scenario())


class Adder:
    """The coordinator's implicit add (transaction version 2): adds the partition for the
    producer's current epoch, fences an older one."""

    def __init__(self, coordinator: Coordinator, *, epoch: int = 0) -> None:
        self.coordinator = coordinator
        self.epoch = epoch
        self.asked: list[tuple[str, int, int, TopicPartition]] = []

    def __call__(self, tid: str, pid: int, epoch: int, tp: TopicPartition) -> Awaitable[ErrorCode]:
        self.asked.append((tid, pid, epoch, tp))

        async def answer() -> ErrorCode:
            if epoch < self.epoch:
                return ErrorCode.PRODUCER_FENCED
            self.coordinator.added.add((pid, epoch, tp))
            return ErrorCode.NONE

        return answer()


async def produce_v2(m: ReplicaManager, data: bytes, tid: str = "tx") -> ErrorCode:
    [r] = await m.append_records(
        acks=1,
        timeout_ms=100,
        entries=[(TP, data)],
        transactional_id=tid,
        add_to_transaction=True,
    )
    return r.error


def test_transaction_version_2_adds_the_partition_version_1_only_verifies(
    harness: Harness,
) -> None:
    """With no transaction open here, a version 1 batch (never added) is refused and a
    version 2 batch has the coordinator add the partition; once open, neither asks."""

    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        adder = Adder(coordinator)
        m.verify_transaction = coordinator
        m.add_to_transaction = adder
        assert await produce(m, txn_batch(b"a")) is ErrorCode.INVALID_TXN_STATE
        assert adder.asked == [] and m.partitions[TP].log.log_end_offset == 0
        assert await produce_v2(m, txn_batch(b"a")) is ErrorCode.NONE
        assert adder.asked == [("tx", PID, 0, TP)]
        assert (PID, 0, TP) in coordinator.added
        assert await produce_v2(m, txn_batch(b"b", seq=1)) is ErrorCode.NONE
        assert len(adder.asked) == 1 and len(coordinator.asked) == 1
        assert m.partitions[TP].log.log_end_offset == 2

    asyncio.run(scenario())


def test_transaction_version_2_a_late_batch_of_an_ended_transaction_is_fenced(
    harness: Harness,
) -> None:
    """After the transaction's marker (written with the bumped epoch, as EndTxn v5 bumps
    it), a replayed batch of the old epoch is refused and never appended."""

    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        adder = Adder(coordinator)
        m.verify_transaction = coordinator
        m.add_to_transaction = adder
        batch = txn_batch(b"a")
        assert await produce_v2(m, batch) is ErrorCode.NONE
        adder.epoch = 1  # EndTxn v5 bumped the epoch
        assert await marker(m, ControlRecordType.COMMIT, 1) is ErrorCode.NONE
        end = m.partitions[TP].log.log_end_offset
        assert await produce_v2(m, batch) is not ErrorCode.NONE
        assert await produce_v2(m, txn_batch(b"late", seq=1)) is ErrorCode.INVALID_PRODUCER_EPOCH
        assert m.partitions[TP].log.log_end_offset == end
        # The next transaction, at the new epoch, is added and written.
        assert await produce_v2(m, txn_batch(b"next", epoch=1)) is ErrorCode.NONE

    asyncio.run(scenario())


def test_a_batch_of_a_newer_epoch_before_the_old_marker_asks_the_coordinator(
    harness: Harness,
) -> None:
    """A transaction version 2 producer's next transaction (epoch bumped by EndTxn) may
    reach the partition before the last one's marker: it must not join the open
    transaction of the older epoch (the old marker would commit or abort it); the
    coordinator answers while the old one completes, and no byte is appended."""

    async def scenario() -> None:
        m = await lead(harness)
        coordinator = Coordinator()
        m.verify_transaction = coordinator
        m.add_to_transaction = adder = Adder(coordinator)
        assert await produce_v2(m, txn_batch(b"t1")) is ErrorCode.NONE

        def completing(tid: str, pid: int, epoch: int, tp: TopicPartition) -> Awaitable[ErrorCode]:
            adder.asked.append((tid, pid, epoch, tp))

            async def answer() -> ErrorCode:
                return ErrorCode.CONCURRENT_TRANSACTIONS

            return answer()

        m.add_to_transaction = completing
        end = m.partitions[TP].log.log_end_offset
        early = txn_batch(b"t2", epoch=1)
        assert await produce_v2(m, early) is ErrorCode.CONCURRENT_TRANSACTIONS
        assert adder.asked[-1] == ("tx", PID, 1, TP)
        assert m.partitions[TP].log.log_end_offset == end
        # Version 1 verification refuses it too (the coordinator never added epoch 1).
        assert await produce(m, early) is ErrorCode.INVALID_TXN_STATE
        # Once the old marker is written, the coordinator adds it and it is appended.
        assert await marker(m, ControlRecordType.COMMIT, 1) is ErrorCode.NONE
        m.add_to_transaction = adder
        adder.epoch = 1
        assert await produce_v2(m, early) is ErrorCode.NONE
        await follow_to_end(m)
        committed = await fetch(m, committed=True)
        values = [
            r.value
            for b in read_batches(committed.records)
            if not b.is_control
            for r in b.records()
        ]
        assert values == [b"t1"]  # t2 is open in its own transaction


def test_the_partitions_of_one_request_are_verified_at_once(harness: Harness) -> None:
    """Two partitions opening the transaction in one request: both questions are out
    before either is answered (one coordinator round trip, not two)."""

    async def scenario() -> None:
        m = harness.manager
        tp1 = TopicPartition(TP.topic, TP.partition + 1)
        await m.prepare_topics([TP.topic])
        second = PartitionState(
            tp1.topic, tp1.partition, LeaderAndIsr(0, 1, (0, 1), controller_epoch=1, zk_version=0),
            replicas=(0, 1),
        )  # fmt: skip
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1)), second]
        )
        asked: list[TopicPartition] = []
        both_asked = asyncio.Event()

        async def coordinator(tid: str, pid: int, epoch: int, tp: TopicPartition) -> ErrorCode:
            asked.append(tp)
            if len(asked) == 2:
                both_asked.set()
            await asyncio.wait_for(both_asked.wait(), 1.0)  # times out if asked one by one
            return ErrorCode.NONE if tp == TP else ErrorCode.INVALID_TXN_STATE

        m.verify_transaction = coordinator
        r0, r1 = await m.append_records(
            acks=1,
            timeout_ms=100,
            entries=[(TP, txn_batch(b"a")), (tp1, txn_batch(b"b"))],
            transactional_id="tx",
        )
        assert sorted(asked) == sorted([TP, tp1])
        assert r0.error is ErrorCode.NONE
        assert r1.error is ErrorCode.INVALID_TXN_STATE  # the refusal stays per partition
        assert m.partitions[tp1].log.log_end_offset == 0

    asyncio.run(scenario())
