"""Follower fetch sessions on the leader (Kafka's KIP-227), through the Broker service's
Fetch over a real ReplicaManager and logs: what an incremental fetch reads, answers and
keeps fresh, and what bad session inputs get."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.errors import ErrorCode
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.broker_service import BrokerService, ProducerIdAllocator
from headwater.v1 import broker_pb2

from .conftest import TP, Harness
from .test_replica_manager import records

FOLLOWER = 1


def service(harness: Harness) -> BrokerService:
    return BrokerService(
        replicas=harness.manager,
        metadata=MetadataCache(),
        metrics=harness.manager._metrics,
        producer_ids=ProducerIdAllocator(0, start_ms=0),
    )


def request(
    *,
    session_id: int = 0,
    epoch: int | None = None,
    offsets: dict[int, int] | None = None,
    forgotten: bool = False,
    replica_id: int = FOLLOWER,
    max_wait_ms: int = 0,
) -> broker_pb2.FetchRequest:
    extra: dict[str, Any] = {} if epoch is None else {"session_epoch": epoch}
    return broker_pb2.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        partitions=[
            broker_pb2.FetchPartition(
                topic=TP.topic,
                partition=TP.partition,
                fetch_offset=offset,
                current_leader_epoch=1,
                partition_max_bytes=1 << 20,
            )
            for offset in (offsets or {}).values()
        ],
        forgotten=[broker_pb2.ForgottenPartition(topic=TP.topic, partition=TP.partition)]
        if forgotten
        else [],
        session_id=session_id,
        **extra,
    )


async def leading(harness: Harness) -> BrokerService:
    m = harness.manager
    await m.prepare_topics([TP.topic])
    m.become_leader_or_follower(controller_epoch=1, states=[harness.state(leader=0, isr=(0, 1))])
    return service(harness)


async def fetch(svc: BrokerService, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
    return await svc.Fetch(req, None)  # type: ignore[arg-type]


def test_an_idle_follower_in_a_session_stays_in_the_isr_and_hears_nothing(
    harness: Harness,
) -> None:
    async def scenario() -> None:
        svc = await leading(harness)
        m = harness.manager
        await m.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"a"))])
        full = await fetch(svc, request(epoch=0, offsets={0: 0}))
        assert full.error == ErrorCode.NONE and full.session_id > 0
        assert [p.records != b"" for p in full.partitions] == [True]
        sid = full.session_id
        inc = await fetch(svc, request(session_id=sid, epoch=1, offsets={0: 1}))
        assert inc.session_id == sid
        assert [p.high_watermark for p in inc.partitions] == [1]  # news: the high watermark
        for epoch in range(2, 6):  # caught up, lists nothing: the leader fetches it anyway
            harness.clock.now_ms += 900
            quiet = await fetch(svc, request(session_id=sid, epoch=epoch))
            assert (quiet.error, list(quiet.partitions)) == (ErrorCode.NONE, [])
            m.maybe_shrink_isrs()
        await asyncio.sleep(0.05)
        assert harness.store.writes == [] and m.partitions[TP].state.isr == (0, 1)
        # Without the session's fetches it drops out of the ISR after the lag time.
        harness.clock.now_ms += 1001
        m.maybe_shrink_isrs()
        for _ in range(100):
            if m.partitions[TP].state.isr == (0,):
                break
            await asyncio.sleep(0.01)
        assert m.partitions[TP].state.isr == (0,)

    asyncio.run(scenario())


def test_a_parked_incremental_fetch_wakes_on_new_data_in_an_unlisted_partition(
    harness: Harness,
) -> None:
    async def scenario() -> None:
        svc = await leading(harness)
        full = await fetch(svc, request(epoch=0, offsets={0: 0}))
        parked = asyncio.ensure_future(
            fetch(svc, request(session_id=full.session_id, epoch=1, max_wait_ms=5000))
        )
        await asyncio.sleep(0.05)
        assert not parked.done()
        await harness.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"b"))])
        answer = await asyncio.wait_for(parked, 5)
        assert [p.records != b"" for p in answer.partitions] == [True]

    asyncio.run(scenario())


def test_a_forgotten_partition_is_no_longer_read(harness: Harness) -> None:
    async def scenario() -> None:
        svc = await leading(harness)
        full = await fetch(svc, request(epoch=0, offsets={0: 0}))
        await harness.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"c"))])
        inc = await fetch(svc, request(session_id=full.session_id, epoch=1, forgotten=True))
        assert list(inc.partitions) == []

    asyncio.run(scenario())


def test_bad_session_inputs_get_kafkas_errors_and_change_nothing(harness: Harness) -> None:
    async def scenario() -> None:
        svc = await leading(harness)
        sid = (await fetch(svc, request(epoch=0, offsets={0: 0}))).session_id
        bad = [
            (request(session_id=sid + 1, epoch=1), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (request(session_id=sid, epoch=3), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
            (request(session_id=sid, epoch=-2), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
            (request(session_id=sid, epoch=1, replica_id=2), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (request(session_id=sid, epoch=1, replica_id=-1), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
            (request(epoch=-3, replica_id=-1), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        ]
        for req, code in bad:
            answer = await fetch(svc, req)
            assert (answer.error, list(answer.partitions), answer.session_id) == (code, [], 0)
        # Another replica's full fetch naming the session does not close it.
        other = await fetch(svc, request(session_id=sid, epoch=0, offsets={0: 0}, replica_id=2))
        assert other.session_id not in (0, sid)
        await harness.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, records(b"d"))])
        ok = await fetch(svc, request(session_id=sid, epoch=1))
        assert ok.error == ErrorCode.NONE and ok.session_id == sid
        assert [p.records != b"" for p in ok.partitions] == [True]  # still at offset 0

    asyncio.run(scenario())


def test_a_consumer_fetch_is_sessionless(harness: Harness) -> None:
    async def scenario() -> None:
        svc = await leading(harness)
        for epoch in (None, 0, -1):
            answer = await fetch(svc, request(epoch=epoch, offsets={0: 0}, replica_id=-1))
            assert (answer.error, answer.session_id) == (ErrorCode.NONE, 0)
            assert len(answer.partitions) == 1

    asyncio.run(scenario())
