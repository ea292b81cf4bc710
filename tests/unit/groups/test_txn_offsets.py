"""TxnOffsetCommit in the group coordinator: offsets written as the producer's
transactional batch, pending until the transaction's marker, then committed (COMMIT)
or dropped (ABORT) -- in memory and when a new leader replays the partition."""

from __future__ import annotations

import pytest
from headwater.errors import ErrorCode
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.values import GroupConfig, OffsetCommit, OffsetCommitRequest
from headwater.records import read_batches
from headwater.records.control import ControlRecordType, build_control_batch
from headwater.values import TopicPartition

from tests.unit.groups.test_coordinator_runtime import FakeLog

T0 = TopicPartition("t", 0)
PID = 77


def runtime(log: FakeLog) -> GroupCoordinatorRuntime:
    return GroupCoordinatorRuntime(
        num_partitions=1,
        append=log.append,
        read=log.read,
        config=GroupConfig(group_initial_rebalance_delay_ms=0),
        clock_ms=lambda: 1_000,
    )


def txn_commit(offset: int, pid: int = PID) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        "g", (OffsetCommit("t", 0, offset),), producer_id=pid, producer_epoch=3
    )


async def write_marker(log: FakeLog, kind: ControlRecordType, pid: int = PID) -> None:
    await log.append(
        0,
        build_control_batch(
            kind, producer_id=pid, producer_epoch=4, coordinator_epoch=1, timestamp_ms=1_000
        ),
    )


def committed(rt: GroupCoordinatorRuntime) -> int | None:
    found = rt.fetch_offsets("g", [T0]).offsets[T0]
    return None if found is None else found.offset


@pytest.mark.asyncio
async def test_offsets_count_only_once_the_commit_marker_is_written() -> None:
    log = FakeLog()
    rt = runtime(log)
    await rt.on_become_leader(0, 1)
    resp = await rt.commit_offsets(txn_commit(42))
    assert resp.error_code is ErrorCode.NONE
    [batch] = list(read_batches(log.batches[-1]))
    assert batch.is_transactional and (batch.producer_id, batch.producer_epoch) == (PID, 3)
    assert committed(rt) is None  # pending
    await write_marker(log, ControlRecordType.COMMIT)
    rt.complete_transaction(0, PID, commit=True)
    assert committed(rt) == 42
    # A new leader replays the batch and its marker: the same offsets.
    rt2 = runtime(log)
    await rt2.on_become_leader(0, 2)
    assert committed(rt2) == 42
    await rt.close()
    await rt2.close()


@pytest.mark.asyncio
async def test_aborted_offsets_are_dropped_and_stay_dropped_after_a_reload() -> None:
    log = FakeLog()
    rt = runtime(log)
    await rt.on_become_leader(0, 1)
    plain = OffsetCommitRequest("g", (OffsetCommit("t", 0, 5),))
    assert (await rt.commit_offsets(plain)).error_code is ErrorCode.NONE
    assert (await rt.commit_offsets(txn_commit(42))).error_code is ErrorCode.NONE
    await write_marker(log, ControlRecordType.ABORT)
    rt.complete_transaction(0, PID, commit=False)
    assert committed(rt) == 5
    rt2 = runtime(log)
    await rt2.on_become_leader(0, 2)
    assert committed(rt2) == 5
    await rt.close()
    await rt2.close()


@pytest.mark.asyncio
async def test_a_transaction_still_open_at_a_reload_stays_pending() -> None:
    log = FakeLog()
    rt = runtime(log)
    await rt.on_become_leader(0, 1)
    assert (await rt.commit_offsets(txn_commit(9))).error_code is ErrorCode.NONE
    rt2 = runtime(log)
    await rt2.on_become_leader(0, 2)
    assert committed(rt2) is None
    rt2.complete_transaction(0, PID, commit=True)  # the marker arrives at the new leader
    assert committed(rt2) == 9
    await rt.close()
    await rt2.close()


@pytest.mark.asyncio
async def test_require_stable_names_the_partitions_with_a_pending_commit() -> None:
    """KIP-447: OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT (here:
    ``unstable``) while a TxnOffsetCommit of the group's partition awaits its marker."""
    log = FakeLog()
    rt = runtime(log)
    await rt.on_become_leader(0, 1)
    plain = OffsetCommitRequest("g", (OffsetCommit("t", 0, 5), OffsetCommit("t", 1, 6)))
    assert (await rt.commit_offsets(plain)).error_code is ErrorCode.NONE
    assert (await rt.commit_offsets(txn_commit(42))).error_code is ErrorCode.NONE
    t1 = TopicPartition("t", 1)
    stable = rt.fetch_offsets("g", [T0, t1], require_stable=True)
    assert stable.unstable == {T0}
    assert rt.fetch_offsets("g", None, require_stable=True).unstable == {T0}
    assert rt.fetch_offsets("other", [T0], require_stable=True).unstable == frozenset()
    assert rt.fetch_offsets("g", [T0]).unstable == frozenset()  # not asked: the last commit
    await write_marker(log, ControlRecordType.COMMIT)
    rt.complete_transaction(0, PID, commit=True)
    assert rt.fetch_offsets("g", [T0], require_stable=True).unstable == frozenset()
    assert committed(rt) == 42
    await rt.close()
