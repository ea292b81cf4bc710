"""The ReplicaManager's operations for the other services: the follower's append and
truncation (the HW follows, mirrored into the log), ListOffsets, OffsetsForLeaderEpoch,
local reads of any role, topic-config watches released with the last partition, role
changes returned to the caller, and log maintenance over every log on disk."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

import pytest
from headwater.errors import ErrorCode
from headwater.records import Record, build_batch
from headwater.replication.follower import LocalLog, StartAt, TruncateTo
from headwater.server.runtime.hosted import LATEST_TIMESTAMP, RoleChanges
from headwater.storage import Log
from headwater.storage.cleaner import CleanerStats, LogCleaner

from .conftest import TP, Harness


def batch(base_offset: int, *values: bytes) -> bytes:
    return build_batch([Record(None, v) for v in values], base_offset=base_offset, timestamp_ms=0)


def follow(harness: Harness) -> RoleChanges:
    asyncio.run(harness.manager.prepare_topics([TP.topic]))
    return harness.manager.become_leader_or_follower(
        controller_epoch=1, states=[harness.state(leader=1, isr=(0, 1))]
    ).changes


def test_a_follower_appends_and_follows_the_leaders_high_watermark(harness: Harness) -> None:
    follow(harness)
    m = harness.manager
    m.append_as_follower(TP, batch(0, b"a", b"b", b"c"), leader_high_watermark=2)
    assert m.local_log(TP) == LocalLog(0, 3, 2, -1)
    assert m.high_watermark(TP) == 2
    m.append_as_follower(TP, b"", leader_high_watermark=9)  # capped at the local end
    assert m.high_watermark(TP) == 3 and m.partitions[TP].log.high_watermark == 3


def test_a_follower_truncation_moves_both_copies_of_the_high_watermark(
    harness: Harness,
) -> None:
    follow(harness)
    m = harness.manager
    three = batch(0, b"a") + batch(1, b"b") + batch(2, b"c")  # truncation cuts whole batches
    m.append_as_follower(TP, three, leader_high_watermark=3)
    m.truncate_follower(TP, TruncateTo(1))
    assert m.local_log(TP) == LocalLog(0, 1, 1, -1)
    assert m.high_watermark(TP) == 1
    m.truncate_follower(TP, TruncateTo(5))  # never extends
    assert m.local_log(TP) == LocalLog(0, 1, 1, -1)
    m.truncate_follower(TP, StartAt(10))
    assert m.local_log(TP) == LocalLog(10, 10, 10, -1)
    assert m.high_watermark(TP) == 10 and m.partitions[TP].log.high_watermark == 10


def test_operations_on_a_partition_not_hosted_do_nothing(harness: Harness) -> None:
    m = harness.manager
    assert m.local_log(TP) is None
    assert m.local_end_offset_for_epoch(TP, 1) == -1
    assert m.high_watermark(TP) is None
    m.truncate_follower(TP, TruncateTo(0))
    m.append_as_follower(TP, batch(0, b"a"), leader_high_watermark=1)
    assert m.partitions == {}


def test_local_reads_serve_any_role_from_the_log_start(harness: Harness) -> None:
    follow(harness)
    m = harness.manager
    m.append_as_follower(TP, batch(0, b"a", b"b"), leader_high_watermark=0)
    assert m.read_local(TP, 0, 1 << 20) == batch(0, b"a", b"b")
    assert m.read_local(TP, 2, 1 << 20) == b""


def test_list_offsets_and_epoch_end_need_the_leader(harness: Harness) -> None:
    follow(harness)
    m = harness.manager
    lookup = m.list_offset(TP, timestamp=LATEST_TIMESTAMP, current_leader_epoch=-1, replica_id=-1)
    assert lookup.error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    code, _epoch, _end = m.offset_for_leader_epoch(TP, current_leader_epoch=-1, leader_epoch=1)
    assert code is ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_list_offsets_and_epoch_end_on_the_leader(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0,))])
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, batch(0, b"a", b"b"))])
        latest = m.list_offset(
            TP, timestamp=LATEST_TIMESTAMP, current_leader_epoch=1, replica_id=-1
        )
        assert (latest.error, latest.offset, latest.leader_epoch) == (ErrorCode.NONE, 2, 1)
        fenced = m.list_offset(
            TP, timestamp=LATEST_TIMESTAMP, current_leader_epoch=0, replica_id=-1
        )
        assert fenced.error is ErrorCode.FENCED_LEADER_EPOCH
        assert m.offset_for_leader_epoch(TP, current_leader_epoch=1, leader_epoch=1) == (
            ErrorCode.NONE,
            1,
            2,
        )

    asyncio.run(scenario())


def test_topic_config_watch_lives_as_long_as_a_hosted_partition(harness: Harness) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic, TP.topic])
        assert harness.store.watched == [TP.topic]
        m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0,))])
        assert m.partitions[TP].log.config.max_message_bytes == 10000
        m.stop_replicas(controller_epoch=1, partitions=[(TP, False)])
        assert harness.store.watched == []

    asyncio.run(scenario())


def test_role_changes_are_returned_once_per_request(harness: Harness) -> None:
    assert follow(harness) == RoleChanges([], [(TP, None)], {TP: (1, 1)})
    m = harness.manager
    led = m.become_leader_or_follower(
        controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1), epoch=2)]
    )
    assert led.changes == RoleChanges([TP], [(TP, 2)], {})
    again = m.become_leader_or_follower(  # the same epoch: still leader, nothing to unfollow
        controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1), epoch=2)]
    )
    assert again.changes == RoleChanges([], [(TP, 2)], {})
    stopped = m.stop_replicas(controller_epoch=1, partitions=[(TP, False)])
    assert stopped.changes == RoleChanges([TP], [(TP, None)], {})
    assert m.hosted_partitions() == set()


def test_log_maintenance_covers_every_log_on_disk_in_a_worker_thread(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    follow(harness)
    harness.logs.get_or_create_log("not-hosted", 0)  # on disk, not (yet) hosted here
    seen: list[tuple[str, object]] = []

    class SpyCleaner(LogCleaner):
        def maybe_clean(self, logs: Iterable[Log], *, now_ms: int) -> CleanerStats:
            names = sorted(f"{lg.topic}-{lg.partition}" for lg in logs)
            seen.append((threading.current_thread().name, (names, now_ms)))
            return CleanerStats()

    def periodic(now_ms: int) -> None:
        seen.append((threading.current_thread().name, now_ms))

    monkeypatch.setattr(harness.logs, "run_periodic_tasks", periodic)
    m = harness.manager

    async def scenario() -> CleanerStats:
        await m.run_log_tasks(5)
        return await m.clean_logs(SpyCleaner(), now_ms=6)

    assert asyncio.run(scenario()) == CleanerStats()
    assert [what for _, what in seen] == [5, (["not-hosted-0", "orders-0"], 6)]
    assert all(thread.startswith("blocking-") for thread, _ in seen)
    assert m.hosted_partitions() == {TP}


def test_delete_records_moves_the_leaders_log_start_within_the_high_watermark(
    harness: Harness,
) -> None:
    async def scenario() -> None:
        m = harness.manager
        await m.prepare_topics([TP.topic])
        m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0,))])
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, batch(0, b"a", b"b", b"c"))])
        assert m.high_watermark(TP) == 3
        for offset in (4, -2):  # past the high watermark; not an offset
            code, low, message = await m.delete_records(TP, offset)
            assert (code, low) == (ErrorCode.OFFSET_OUT_OF_RANGE, -1), message
            assert m.partitions[TP].log.log_start_offset == 0
        assert (await m.delete_records(TP, 2))[:2] == (ErrorCode.NONE, 2)
        assert (await m.delete_records(TP, 1))[:2] == (ErrorCode.NONE, 2)  # never back
        assert (await m.delete_records(TP, -1))[:2] == (ErrorCode.NONE, 3)  # -1: the HW
        other = TP._replace(partition=TP.partition + 1)
        assert (await m.delete_records(other, 0))[0] is not ErrorCode.NONE

    asyncio.run(scenario())


def test_delete_records_needs_the_leader_and_a_follower_follows_the_log_start(
    harness: Harness,
) -> None:
    follow(harness)
    m = harness.manager
    m.append_as_follower(TP, batch(0, b"a", b"b", b"c"), leader_high_watermark=3)
    code, _low, _message = asyncio.run(m.delete_records(TP, 1))
    assert code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert m.partitions[TP].log.log_start_offset == 0
    m.follow_log_start(TP, 2)
    assert m.partitions[TP].log.log_start_offset == 2
    m.follow_log_start(TP, 9)  # capped at the follower's own log end
    assert m.partitions[TP].log.log_start_offset == 3
