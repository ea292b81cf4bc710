"""ReplicaManager over real logs: produce, HW-bounded fetch, long-poll wake-ups, acks=all,
ISR shrink with a fake clock, and refusals that change nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.server.runtime.hosted import FetchSpec, RoleChanges
from headwater.server.runtime.replica_manager import ReplicaManager

from .conftest import TP, Harness


def records(*values: bytes) -> bytes:
    return build_batch([Record(None, v) for v in values])


async def consumer_fetch(manager: ReplicaManager, offset: int, *, wait_ms: int = 0) -> bytes:
    results = await manager.fetch(
        replica_id=-1,
        max_wait_ms=wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        specs=[FetchSpec(TP, offset, -1, 1 << 20)],
    )
    assert results[0].error is ErrorCode.NONE, results[0]
    return results[0].records


async def follower_fetch(manager: ReplicaManager, offset: int) -> bytes:
    results = await manager.fetch(
        replica_id=1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        specs=[FetchSpec(TP, offset, 1, 1 << 20)],
    )  # fmt: skip
    return results[0].records


def test_consumers_see_only_below_the_high_watermark(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))]
        )
        [result] = await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        assert (result.error, result.base_offset) == (ErrorCode.NONE, 0)
        assert await consumer_fetch(m, 0) == b""
        assert await follower_fetch(m, 0) != b""
        await follower_fetch(m, 1)  # the follower now holds offset 0: HW moves to 1
        assert await consumer_fetch(m, 0) != b""

    asyncio.run(scenario())


def test_acks_all_completes_when_the_follower_catches_up(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))]
        )
        produce = asyncio.ensure_future(
            m.append_records(acks=-1, timeout_ms=30000, entries=[(TP, records(b"a", b"b"))])
        )
        await asyncio.sleep(0)
        assert not produce.done()
        await follower_fetch(m, 0)
        await follower_fetch(m, 2)
        [result] = await asyncio.wait_for(produce, 10)
        assert result.error is ErrorCode.NONE

    asyncio.run(scenario())


def test_acks_all_times_out(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))]
        )
        [result] = await m.append_records(acks=-1, timeout_ms=1, entries=[(TP, records(b"a"))])
        assert result.error is ErrorCode.REQUEST_TIMED_OUT

    asyncio.run(scenario())


def test_long_poll_wakes_on_append(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))]
        )
        poll = asyncio.ensure_future(follower_fetch_waiting(m))
        await asyncio.sleep(0)
        assert not poll.done()
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        assert await asyncio.wait_for(poll, 10) != b""

    async def follower_fetch_waiting(m: ReplicaManager) -> bytes:
        results = await m.fetch(
            replica_id=1, max_wait_ms=60000, min_bytes=1, max_bytes=1 << 20,
            specs=[FetchSpec(TP, 0, -1, 1 << 20)],
        )  # fmt: skip
        return results[0].records

    asyncio.run(scenario())


def test_a_high_watermark_move_wakes_consumers_not_followers(harness: Harness) -> None:
    """A follower reads up to the log end: a move of the high watermark alone gives its
    waiting fetch nothing, so it is not re-read (it learns the high watermark with its
    next answer); a consumer's waiting fetch is answered; an append wakes both."""

    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        three = PartitionState(
            TP.topic,
            TP.partition,
            LeaderAndIsr(0, 1, (0, 1, 2), controller_epoch=1, zk_version=0),
            replicas=(0, 1, 2),
        )
        m.become_leader_or_follower(controller_epoch=1, states=[three])
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        for replica in (1, 2):
            await m.fetch(
                replica_id=replica, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                specs=[FetchSpec(TP, 0, 1, 1 << 20)],
            )  # fmt: skip
        follower_reads = []
        read_all = m._read_all

        def counting(**kwargs: Any) -> Any:
            if kwargs["replica_id"] == 1:
                follower_reads.append(1)
            return read_all(**kwargs)

        m._read_all = counting  # type: ignore[method-assign]
        follower = asyncio.ensure_future(
            m.fetch(
                replica_id=1,
                max_wait_ms=60000,
                min_bytes=1,
                max_bytes=1 << 20,
                specs=[FetchSpec(TP, 1, 1, 1 << 20)],
            )
        )
        consumer = asyncio.ensure_future(consumer_fetch(m, 0, wait_ms=60000))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not follower.done() and not consumer.done()
        assert len(follower_reads) == 1
        # replica 2 holds offset 0 too: the high watermark moves to 1
        await m.fetch(
            replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            specs=[FetchSpec(TP, 1, 1, 1 << 20)],
        )  # fmt: skip
        assert m.partitions[TP].state.high_watermark == 1
        assert await asyncio.wait_for(consumer, 10) != b""
        for _ in range(3):
            await asyncio.sleep(0)
        assert not follower.done()
        assert len(follower_reads) == 1  # not woken, not re-read
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"b"))])
        [result] = await asyncio.wait_for(follower, 10)
        assert result.records != b""
        assert result.high_watermark == 1

    asyncio.run(scenario())


def test_isr_shrinks_after_lag_time(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))]
        )
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        harness.clock.now_ms = 1000
        m.maybe_shrink_isrs()
        await asyncio.sleep(0.05)
        assert harness.store.writes == []
        harness.clock.now_ms = 1001
        m.maybe_shrink_isrs()
        for _ in range(100):
            if m.partitions[TP].state.isr == (0,):
                break
            await asyncio.sleep(0.01)
        [(_topic, _p, lai, version)] = harness.store.writes
        assert lai.isr == (0,) and version == 0
        assert m.partitions[TP].state.isr == (0,)
        # Below min.insync.replicas=2 now.
        [result] = await m.append_records(acks=-1, timeout_ms=100, entries=[(TP, records(b"b"))])
        assert result.error is ErrorCode.NOT_ENOUGH_REPLICAS

    asyncio.run(scenario())


def test_refusals_change_nothing(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(
            controller_epoch=2, states=[harness.state(leader=1, isr=(0, 1))]
        )
        [result] = await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        assert result.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        code, _, changes = m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1), epoch=9)]
        )
        assert code is ErrorCode.STALE_CONTROLLER_EPOCH
        assert changes == RoleChanges([], [], {})  # nothing for the fetchers or groups
        assert not m.partitions[TP].state.is_leader
        other = TP._replace(topic="other")
        [result] = await m.append_records(acks=1, timeout_ms=100, entries=[(other, records(b"a"))])
        assert result.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert m.partitions[TP].log.log_end_offset == 0

    asyncio.run(scenario())


def test_corrupt_and_oversize_batches_are_refused(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0,))])
        bad = bytearray(records(b"a"))
        bad[-1] ^= 1
        big = records(b"x" * 20000)
        results = await m.append_records(
            acks=1, timeout_ms=100, entries=[(TP, bytes(bad)), (TP, big)]
        )
        assert [r.error for r in results] == [
            ErrorCode.CORRUPT_MESSAGE,
            ErrorCode.MESSAGE_TOO_LARGE,
        ]
        assert m.partitions[TP].log.log_end_offset == 0

    asyncio.run(scenario())


def test_a_waiting_fetch_cancelled_as_it_is_woken_ends_cancelled(harness: Harness) -> None:
    """The cancellation (the client went away) wins over the wake-up that came in the same
    event-loop step: the fetch does not go round again and answer."""

    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0,))])
        fetch = asyncio.ensure_future(consumer_fetch(m, 0, wait_ms=60000))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not fetch.done()
        # One step: the append wakes the fetch (its records are readable at once), then
        # the fetch is cancelled.
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        fetch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fetch
        assert not m.partitions[TP].watchers  # the fetch let go of the partition

    asyncio.run(scenario())
