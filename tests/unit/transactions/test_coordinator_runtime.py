"""TransactionCoordinatorRuntime over an in-memory log and marker writer: state written
before answers, markers written before Complete*, a new leader finishing a decided
transaction, timeouts aborted, append failures answered and reloaded."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from headwater.errors import ErrorCode, NotEnoughReplicasError, NotLeaderOrFollowerError
from headwater.records import read_batches, set_base_offset
from headwater.transactions.coordinator_runtime import MarkerRequest, TransactionCoordinatorRuntime
from headwater.transactions.metadata import TransactionConfig
from headwater.transactions.state import TransactionResult
from headwater.values import TopicPartition

from tests.unit.transactions.helpers import ProducerIds

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


class FakeLog:
    """One in-memory __transaction_state partition."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.next_offset = 0
        self.fail: Exception | None = None
        self.read_failures = 0
        """How many reads fail (NotLeaderOrFollowerError) before they succeed again."""
        self.gate: asyncio.Event | None = None
        """When set, appends wait for it (an acks=all append waiting for followers)."""

    async def append(self, partition: int, data: bytes) -> None:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        buf = bytearray(data)
        set_base_offset(buf, 0, self.next_offset)
        self.next_offset = next(read_batches(bytes(buf))).next_offset
        self.batches.append(bytes(buf))

    async def read(self, partition: int, offset: int) -> bytes:
        if self.read_failures:
            self.read_failures -= 1
            raise NotLeaderOrFollowerError("the log is not readable yet")
        return b"".join(b for b in self.batches if next(read_batches(b)).base_offset >= offset)


class FakeMarkers:
    """Partition leaders: records the markers, fails the partitions in ``down``."""

    def __init__(self) -> None:
        self.written: list[tuple[TopicPartition, MarkerRequest]] = []
        self.down: set[TopicPartition] = set()
        self.gate: asyncio.Event | None = None

    async def __call__(self, request: MarkerRequest) -> Mapping[TopicPartition, ErrorCode]:
        if self.gate is not None:
            await self.gate.wait()
        out = {}
        for tp in request.partitions:
            if tp in self.down:
                out[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                self.written.append((tp, request))
                out[tp] = ErrorCode.NONE
        return out


def runtime(
    log: FakeLog, markers: FakeMarkers, now: list[int], ids: ProducerIds | None = None
) -> TransactionCoordinatorRuntime:
    return TransactionCoordinatorRuntime(
        num_partitions=1,
        append=log.append,
        read=log.read,
        write_markers=markers,
        allocate_producer_id=ids or ProducerIds(),
        config=TransactionConfig(transaction_max_timeout_ms=60_000),
        clock_ms=lambda: now[0],
        marker_retry_backoff_s=0.001,
    )


async def settle(rt: TransactionCoordinatorRuntime, tid: str, state: str) -> None:
    for _ in range(500):
        if rt.describe(tid).state == state:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{tid} is {rt.describe(tid).state}, not {state}")


@pytest.mark.asyncio
async def test_not_coordinator_until_loaded() -> None:
    rt = runtime(FakeLog(), FakeMarkers(), [0])
    answer = await rt.init_producer_id("x", transaction_timeout_ms=1000)
    assert answer.error is ErrorCode.NOT_COORDINATOR
    assert rt.verify_partition("x", producer_id=1, producer_epoch=0, partition=T0) is (
        ErrorCode.NOT_COORDINATOR
    )
    await rt.close()


@pytest.mark.asyncio
async def test_commit_writes_state_then_markers_then_complete() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    assert init.error is ErrorCode.NONE and init.producer_epoch == 0
    assert len(log.batches) == 1  # written before the answer
    added = await rt.add_partitions(
        "x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0, T1]
    )
    assert added.error is ErrorCode.NONE
    assert rt.verify_partition(
        "x", producer_id=init.producer_id, producer_epoch=0, partition=T0
    ) is (ErrorCode.NONE)
    ended = await rt.end_transaction(
        "x", producer_id=init.producer_id, producer_epoch=0, commit=True
    )
    assert ended.error is ErrorCode.NONE and ended.producer_epoch == 1  # KIP-890 bump
    await settle(rt, "x", "CompleteCommit")
    assert {tp for tp, _ in markers.written} == {T0, T1}
    assert all(
        r.result is TransactionResult.COMMIT and r.producer_epoch == 1 for _, r in markers.written
    )
    assert all(r.coordinator_epoch == 1 for _, r in markers.written)
    # A late produce of the ended transaction is refused by the leader's check.
    assert rt.verify_partition(
        "x", producer_id=init.producer_id, producer_epoch=0, partition=T0
    ) is (ErrorCode.PRODUCER_FENCED)
    await rt.close()


@pytest.mark.asyncio
async def test_a_second_producer_fences_the_first() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    first = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    await rt.add_partitions("x", producer_id=first.producer_id, producer_epoch=0, partitions=[T0])
    # The second instance aborts the open transaction; it retries until the abort is done.
    second = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    assert second.error is ErrorCode.CONCURRENT_TRANSACTIONS
    await settle(rt, "x", "CompleteAbort")
    second = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    assert second.error is ErrorCode.NONE and second.producer_epoch > first.producer_epoch
    assert [r.result for _, r in markers.written] == [TransactionResult.ABORT]
    zombie = await rt.end_transaction(
        "x", producer_id=first.producer_id, producer_epoch=0, commit=True
    )
    assert zombie.error is ErrorCode.PRODUCER_FENCED
    await rt.close()


@pytest.mark.asyncio
async def test_markers_are_retried_until_every_leader_wrote_them() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    await rt.add_partitions(
        "x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0, T1]
    )
    markers.down = {T1}
    await rt.end_transaction("x", producer_id=init.producer_id, producer_epoch=0, commit=False)
    await asyncio.sleep(0.02)
    assert rt.describe("x").state == "PrepareAbort"  # not complete while T1 lacks its marker
    busy = await rt.add_partitions(
        "x", producer_id=init.producer_id, producer_epoch=1, partitions=[T0]
    )
    assert busy.error is ErrorCode.CONCURRENT_TRANSACTIONS
    markers.down = set()
    await settle(rt, "x", "CompleteAbort")
    assert {tp for tp, _ in markers.written} == {T0, T1}
    await rt.close()


@pytest.mark.asyncio
async def test_the_next_transaction_is_held_until_the_markers_are_written() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    await rt.add_partitions("x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0])
    markers.gate = asyncio.Event()
    ended = await rt.end_transaction(
        "x", producer_id=init.producer_id, producer_epoch=0, commit=True
    )
    assert ended.error is ErrorCode.NONE  # answered once PrepareCommit is in the log
    assert rt.describe("x").state == "PrepareCommit"
    # The next transaction's AddPartitionsToTxn waits for the markers instead of being
    # refused CONCURRENT_TRANSACTIONS at once, then is decided on the completed state.
    add = asyncio.ensure_future(
        rt.add_partitions(
            "x", producer_id=init.producer_id, producer_epoch=ended.producer_epoch, partitions=[T1]
        )
    )
    await asyncio.sleep(0.02)
    assert not add.done()
    markers.gate.set()
    added = await asyncio.wait_for(add, 1.0)
    assert added.error is ErrorCode.NONE
    assert rt.describe("x").state == "Ongoing"
    assert [tp for tp, _ in markers.written] == [T0]
    await rt.close()


@pytest.mark.asyncio
async def test_a_new_leader_finishes_a_decided_transaction() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    ids = ProducerIds()
    rt = runtime(log, markers, now, ids)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    await rt.add_partitions("x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0])
    markers.gate = asyncio.Event()  # the old coordinator never gets its markers out
    await rt.end_transaction("x", producer_id=init.producer_id, producer_epoch=0, commit=True)
    rt.on_resign(0)
    await rt.close()
    new_markers = FakeMarkers()
    rt2 = runtime(log, new_markers, now, ids)
    await rt2.on_become_leader(0, 2)
    await settle(rt2, "x", "CompleteCommit")
    assert [(tp, r.result, r.coordinator_epoch) for tp, r in new_markers.written] == [
        (T0, TransactionResult.COMMIT, 2)
    ]
    # The producer's retried EndTxn is answered as the first one was.
    retry = await rt2.end_transaction(
        "x", producer_id=init.producer_id, producer_epoch=0, commit=True
    )
    assert retry.error is ErrorCode.NONE and retry.producer_epoch == 1
    await rt2.close()


@pytest.mark.asyncio
async def test_an_expired_transaction_is_aborted_by_the_coordinator() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=5_000)
    await rt.add_partitions("x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0])
    await rt.tick()
    assert rt.describe("x").state == "Ongoing"
    now[0] += 5_001
    await rt.tick()
    await settle(rt, "x", "CompleteAbort")
    assert [r.result for _, r in markers.written] == [TransactionResult.ABORT]
    late = await rt.end_transaction(
        "x", producer_id=init.producer_id, producer_epoch=0, commit=True
    )
    assert late.error is ErrorCode.PRODUCER_FENCED
    await rt.close()


@pytest.mark.asyncio
async def test_a_failed_append_is_answered_and_memory_reloaded() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    log.fail = NotEnoughReplicasError()
    bad = await rt.add_partitions(
        "x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0]
    )
    assert bad.error is ErrorCode.COORDINATOR_NOT_AVAILABLE
    log.fail = None
    await settle(rt, "x", "Empty")  # reloaded from the log: the add never happened
    again = await rt.add_partitions(
        "x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0]
    )
    assert again.error is ErrorCode.NONE
    await rt.close()


@pytest.mark.asyncio
async def test_a_failed_load_read_is_retried_while_still_leader() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    ids = ProducerIds()
    rt = runtime(log, markers, now, ids)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    await rt.add_partitions("x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0])
    markers.gate = asyncio.Event()  # decided, but the markers never get out here
    await rt.end_transaction("x", producer_id=init.producer_id, producer_epoch=0, commit=True)
    rt.on_resign(0)
    await rt.close()
    log.read_failures = 3
    rt2 = runtime(log, FakeMarkers(), now, ids)
    await rt2.on_become_leader(0, 2)
    # Loaded after the failed reads, and the decided commit finished: not dropped
    # (which answered NOT_COORDINATOR until the next leadership change).
    await settle(rt2, "x", "CompleteCommit")
    assert log.read_failures == 0
    await rt2.close()


@pytest.mark.asyncio
async def test_a_load_that_fails_stops_when_leadership_moves() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    log.read_failures = 1_000_000
    rt = runtime(log, markers, now)
    load = asyncio.ensure_future(rt.on_become_leader(0, 1))
    await asyncio.sleep(0.01)
    answer = await rt.init_producer_id("x", transaction_timeout_ms=1000)
    assert answer.error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    rt.on_resign(0)
    await asyncio.wait_for(load, 1.0)
    answer = await rt.init_producer_id("x", transaction_timeout_ms=1000)
    assert answer.error is ErrorCode.NOT_COORDINATOR
    await rt.close()


@pytest.mark.asyncio
async def test_bad_inputs_are_refused_and_change_nothing() -> None:
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    assert (
        await rt.init_producer_id("", transaction_timeout_ms=1)
    ).error is ErrorCode.INVALID_REQUEST
    too_long = await rt.init_producer_id("x", transaction_timeout_ms=60_001)
    assert too_long.error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    nothing_open = await rt.end_transaction("x", producer_id=1, producer_epoch=0, commit=True)
    assert nothing_open.error is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    commit_nothing = await rt.end_transaction(
        "x", producer_id=init.producer_id, producer_epoch=0, commit=True
    )
    assert commit_nothing.error is ErrorCode.INVALID_TXN_STATE
    assert len(log.batches) == 1
    listed, unknown = rt.list_transactions(state_filters=["Empty", "Nope"])
    assert [t.transactional_id for t in listed] == ["x"] and unknown == ["Nope"]
    await rt.close()


@pytest.mark.asyncio
async def test_delayed_messages_of_an_ended_transaction_change_nothing_later() -> None:
    """Jepsen's 2024 holes: a delayed EndTxn, AddPartitionsToTxn or produce of
    transaction N arriving while N+1 is open must neither end N+1 nor write into it."""
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    pid = init.producer_id
    await rt.add_partitions("x", producer_id=pid, producer_epoch=0, partitions=[T0])
    first = await rt.end_transaction("x", producer_id=pid, producer_epoch=0, commit=True)
    await settle(rt, "x", "CompleteCommit")
    # Transaction N+1 at the bumped epoch.
    await rt.add_partitions(
        "x", producer_id=pid, producer_epoch=first.producer_epoch, partitions=[T1]
    )
    written = len(log.batches)
    late_abort = await rt.end_transaction("x", producer_id=pid, producer_epoch=0, commit=False)
    assert late_abort.error is ErrorCode.PRODUCER_FENCED
    late_commit = await rt.end_transaction("x", producer_id=pid, producer_epoch=0, commit=True)
    assert late_commit.error is ErrorCode.PRODUCER_FENCED
    late_add = await rt.add_partitions("x", producer_id=pid, producer_epoch=0, partitions=[T0])
    assert late_add.error is ErrorCode.PRODUCER_FENCED
    assert rt.verify_partition("x", producer_id=pid, producer_epoch=0, partition=T1) is (
        ErrorCode.PRODUCER_FENCED
    )
    assert len(log.batches) == written  # nothing written for any of them
    description = rt.describe("x")
    assert description.state == "Ongoing" and description.partitions == (T1,)
    await rt.close()


@pytest.mark.asyncio
async def test_a_caller_gone_mid_append_leaves_no_transition_pending() -> None:
    """A producer killed while its AddPartitionsToTxn is being appended: its RPC is
    cancelled, the append still ends and is recorded, so the next producer's
    InitProducerId fences and aborts the open transaction instead of being answered
    CONCURRENT_TRANSACTIONS until the coordinator moves."""
    log, markers, now = FakeLog(), FakeMarkers(), [1_000]
    rt = runtime(log, markers, now)
    await rt.on_become_leader(0, 1)
    init = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
    log.gate = asyncio.Event()
    call = asyncio.ensure_future(
        rt.add_partitions("x", producer_id=init.producer_id, producer_epoch=0, partitions=[T0])
    )
    await asyncio.sleep(0.01)
    assert not call.done()  # its record is being appended
    call.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await call
    log.gate.set()
    answers = []
    for _ in range(50):
        answer = await rt.init_producer_id("x", transaction_timeout_ms=10_000)
        answers.append(answer.error)
        if answer.error is ErrorCode.NONE:
            break
        await asyncio.sleep(0.005)
    assert answers[-1] is ErrorCode.NONE, answers
    assert set(answers[:-1]) <= {ErrorCode.CONCURRENT_TRANSACTIONS}
    assert {tp for tp, r in markers.written if r.result is TransactionResult.ABORT} == {T0}
    assert rt.describe("x").state == "Empty"
    await rt.close()
