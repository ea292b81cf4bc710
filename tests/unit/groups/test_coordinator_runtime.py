"""GroupCoordinatorRuntime: records appended before replies, NOT_COORDINATOR when not the
leader, state rebuilt by a new leader from the log, append failures answered with errors,
and the Kafka hash placement of groups."""

from __future__ import annotations

import asyncio

import pytest
from headwater.errors import ErrorCode, NotEnoughReplicasError
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.placement import java_string_hash, partition_for
from headwater.groups.values import (
    GroupConfig,
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommit,
    OffsetCommitRequest,
    Protocol,
    SyncGroupRequest,
)
from headwater.records import read_batches, set_base_offset
from headwater.values import TopicPartition


class FakeLog:
    """One in-memory __consumer_offsets partition."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.next_offset = 0
        self.fail: Exception | None = None
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
        return b"".join(b for b in self.batches if next(read_batches(b)).base_offset >= offset)


def _runtime(log: FakeLog, now: list[int]) -> GroupCoordinatorRuntime:
    return GroupCoordinatorRuntime(
        num_partitions=1,
        append=log.append,
        read=log.read,
        config=GroupConfig(group_initial_rebalance_delay_ms=0),
        clock_ms=lambda: now[0],
    )


JOIN = JoinGroupRequest("g", "", "consumer", (Protocol("range", b""),), 10_000, 30_000)


def test_java_hash_matches_kafka() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50


@pytest.mark.asyncio
async def test_join_commit_and_failover() -> None:
    log, now = FakeLog(), [1_000]
    rt = _runtime(log, now)
    assert (await rt.join_group(JOIN)).error_code is ErrorCode.NOT_COORDINATOR
    await rt.on_become_leader(0, leader_epoch=1)
    first = await rt.join_group(JOIN)
    assert first.error_code is ErrorCode.MEMBER_ID_REQUIRED
    joined = await rt.join_group(
        JoinGroupRequest(**{**JOIN.__dict__, "member_id": first.member_id})
    )
    assert joined.error_code is ErrorCode.NONE
    synced = await rt.sync_group(
        SyncGroupRequest(
            "g", joined.generation_id, joined.member_id, assignments=((joined.member_id, b"A"),)
        )
    )
    assert synced.assignment == b"A"
    commit = await rt.commit_offsets(
        OffsetCommitRequest(
            "g", (OffsetCommit("t", 0, 42),), joined.generation_id, joined.member_id
        )
    )
    assert commit.error_code is ErrorCode.NONE
    assert log.batches  # written before the answer
    rt.on_resign(0)
    assert rt.fetch_offsets("g", None).error_code is ErrorCode.NOT_COORDINATOR
    # a new leader (another broker) rebuilds everything from the log
    rt2 = _runtime(log, now)
    await rt2.on_become_leader(0, leader_epoch=2)
    offsets = rt2.fetch_offsets("g", [TopicPartition("t", 0)]).offsets
    assert offsets[TopicPartition("t", 0)] is not None
    assert offsets[TopicPartition("t", 0)].offset == 42  # type: ignore[union-attr]
    hb = await rt2.heartbeat(HeartbeatRequest("g", joined.generation_id, joined.member_id))
    assert hb.error_code is ErrorCode.NONE
    assert rt2.describe_group("g").state == "Stable"
    assert [g.group_id for g in rt2.list_groups()] == ["g"]
    await rt.close()
    await rt2.close()


@pytest.mark.asyncio
async def test_append_failure_answers_error_and_reloads() -> None:
    log, now = FakeLog(), [1_000]
    rt = _runtime(log, now)
    await rt.on_become_leader(0, leader_epoch=1)
    ok = await rt.commit_offsets(OffsetCommitRequest("g", (OffsetCommit("t", 0, 1),)))
    assert ok.error_code is ErrorCode.NONE
    log.fail = NotEnoughReplicasError()
    bad = await rt.commit_offsets(OffsetCommitRequest("g", (OffsetCommit("t", 0, 2),)))
    assert bad.error_code is ErrorCode.COORDINATOR_NOT_AVAILABLE
    log.fail = None
    for _ in range(10):
        await asyncio.sleep(0)
    found = rt.fetch_offsets("g", [TopicPartition("t", 0)]).offsets[TopicPartition("t", 0)]
    assert found is not None and found.offset == 1  # memory rebuilt from the log
    await rt.close()


@pytest.mark.asyncio
async def test_a_caller_gone_mid_append_still_has_its_outcome_applied() -> None:
    """A client that disconnects while its commit is being appended cancels its call; the
    append's outcome still counts: here it fails, and memory is rebuilt from the log."""
    log, now = FakeLog(), [1_000]
    rt = _runtime(log, now)
    await rt.on_become_leader(0, leader_epoch=1)
    ok = await rt.commit_offsets(OffsetCommitRequest("g", (OffsetCommit("t", 0, 1),)))
    assert ok.error_code is ErrorCode.NONE
    log.gate, log.fail = asyncio.Event(), NotEnoughReplicasError()
    call = asyncio.ensure_future(
        rt.commit_offsets(OffsetCommitRequest("g", (OffsetCommit("t", 0, 2),)))
    )
    await asyncio.sleep(0.01)
    assert not call.done()  # its record is being appended
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    log.gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    found = rt.fetch_offsets("g", [TopicPartition("t", 0)]).offsets[TopicPartition("t", 0)]
    assert found is not None and found.offset == 1  # the failed append did not count
    await rt.close()


@pytest.mark.asyncio
async def test_parked_join_answered_by_timer_and_resign() -> None:
    log, now = FakeLog(), [1_000]
    rt = _runtime(log, now)
    await rt.on_become_leader(0, leader_epoch=1)
    a = (await rt.join_group(JOIN)).member_id
    ja = await rt.join_group(JoinGroupRequest(**{**JOIN.__dict__, "member_id": a}))
    b = (await rt.join_group(JOIN)).member_id
    parked = asyncio.ensure_future(
        rt.join_group(JoinGroupRequest(**{**JOIN.__dict__, "member_id": b}))
    )
    for _ in range(5):  # the join runs as a task of its own: let it park
        await asyncio.sleep(0)
    assert not parked.done()
    now[0] += 30_000  # a never rejoins: the rebalance timeout completes the join
    await rt.tick()
    resp = await parked
    assert resp.error_code is ErrorCode.NONE and resp.generation_id == ja.generation_id + 1
    b_parked = asyncio.ensure_future(
        rt.join_group(JoinGroupRequest(**{**JOIN.__dict__, "member_id": "x"}))
    )
    assert (await b_parked).error_code is ErrorCode.UNKNOWN_MEMBER_ID
    await rt.close()
