"""The ReplicaManager's disk work that must not hold up the event loop, and the order it
keeps: a LeaderAndIsr's new logs are opened, and a new leader's epoch checkpointed, by
:meth:`ReplicaManager.prepare_partitions` in a worker thread before the decision makes
the partitions hosted; the producer snapshot at a roll is written by a worker thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.storage.checkpoints import read_entries
from headwater.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, EpochEntry

from .conftest import TP, Harness


def records(*values: bytes) -> bytes:
    return build_batch([Record(None, v) for v in values])


def on_loop_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def test_a_new_leaders_log_and_epoch_are_on_disk_before_it_leads(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        state = harness.state(leader=0, isr=(0, 1), epoch=3)
        await m.prepare_topics([TP.topic])
        await m.prepare_partitions([state])
        plog = harness.logs.get_log(TP.topic, TP.partition)
        assert plog is not None
        assert read_entries(plog.dir / LEADER_EPOCH_CHECKPOINT, 2) == [["3", "0"]]
        # Not hosted until the decision: produce is refused as before the request.
        assert TP not in m.partitions
        [refused] = await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        assert refused.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
        result = m.become_leader_or_follower(controller_epoch=1, states=[state])
        assert result.partitions == [(TP, ErrorCode.NONE)]
        hosted = m.partitions[TP]
        assert hosted.log is plog and hosted.state.is_leader
        assert plog.epoch_cache.entries == [EpochEntry(3, 0)]
        [appended] = await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        assert (appended.error, appended.base_offset) == (ErrorCode.NONE, 0)

    asyncio.run(scenario())


def test_a_new_followers_log_is_opened_without_an_epoch(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        state = harness.state(leader=1, isr=(0, 1), epoch=3)
        await m.prepare_topics([TP.topic])
        await m.prepare_partitions([state])
        plog = harness.logs.get_log(TP.topic, TP.partition)
        assert plog is not None and plog.epoch_cache.entries == []
        result = m.become_leader_or_follower(controller_epoch=1, states=[state])
        assert result.changes.follow == {TP: (1, 3)}
        assert m.partitions[TP].log is plog

    asyncio.run(scenario())


def test_a_partition_prepared_for_another_state_is_opened_for_its_own(
    harness: Harness,
) -> None:
    """The decision takes a prepared partition only for the state it was prepared for."""

    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        await m.prepare_partitions([harness.state(leader=1, isr=(0, 1), epoch=3)])
        result = m.become_leader_or_follower(
            controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1), epoch=4)]
        )
        assert result.partitions == [(TP, ErrorCode.NONE)]
        hosted = m.partitions[TP]
        assert hosted.state.is_leader and hosted.state.leader_epoch == 4
        assert hosted.log.epoch_cache.entries == [EpochEntry(4, 0)]

    asyncio.run(scenario())


def test_the_logs_are_opened_in_a_worker_thread(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[bool] = []
    open_log = harness.logs.get_or_create_log

    def recording(*args: Any, **kwargs: Any) -> Any:
        opened.append(on_loop_thread())
        return open_log(*args, **kwargs)

    monkeypatch.setattr(harness.logs, "get_or_create_log", recording)

    async def scenario() -> None:
        m = harness.manager
        state = harness.state(leader=0, isr=(0, 1))
        await m.prepare_topics([TP.topic])
        await m.prepare_partitions([state])
        m.become_leader_or_follower(controller_epoch=1, states=[state])
        assert m.partitions[TP].state.is_leader

    asyncio.run(scenario())
    assert opened == [False]  # once, off the loop


def test_the_producer_snapshot_at_a_roll_is_written_off_the_loop(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        m = harness.manager
        state = harness.state(leader=0, isr=(0,))
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(controller_epoch=1, states=[state])
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        plog = m.partitions[TP].log
        writes: list[bool] = []
        write = plog.write_producer_snapshot

        def recording(*args: Any, **kwargs: Any) -> bool:
            writes.append(on_loop_thread())
            return write(*args, **kwargs)

        monkeypatch.setattr(plog, "write_producer_snapshot", recording)
        plog.roll(now_ms=0)
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"b"))])
        for _ in range(400):
            if plog.producer_snapshots():
                break
            await asyncio.sleep(0.005)
        assert plog.producer_snapshots() == [2]
        assert writes == [False]

    asyncio.run(scenario())
