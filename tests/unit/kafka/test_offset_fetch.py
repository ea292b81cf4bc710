"""OffsetFetch on the Kafka listener (headwater.kafka.group_apis) over a real group
coordinator runtime: with ``require_stable`` (v7, KIP-447) a partition whose
transactional offset commit awaits its marker answers UNSTABLE_OFFSET_COMMIT, the others
their offsets; without it, or once the marker is written, the last stable offsets."""

from __future__ import annotations

from typing import Any

import pytest
from headwater.errors import ErrorCode
from headwater.groups.coordinator_runtime import GroupCoordinatorRuntime
from headwater.groups.values import GroupConfig, OffsetCommit, OffsetCommitRequest
from headwater.kafka import protocol as p
from headwater.kafka.group_apis import KafkaGroupApis
from headwater.records.control import ControlRecordType, build_control_batch
from headwater.server.auth.authorization import ALLOW_ALL
from kio.schema.offset_fetch.v6.request import OffsetFetchRequest as OffsetFetchV6
from kio.schema.offset_fetch.v6.request import OffsetFetchRequestTopic as TopicV6
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest, OffsetFetchRequestTopic

from tests.unit.groups.test_coordinator_runtime import FakeLog

PID = 77


async def offset_fetch(apis: KafkaGroupApis, body: Any) -> list[tuple[str, int, int, int]]:
    request = p.Request(body.__api_key__, body.__version__, 1, "test", body)
    r = await apis.handlers()[9](request)
    assert r.error_code == ErrorCode.NONE
    return sorted(
        (t.name, x.partition_index, x.committed_offset, x.error_code)
        for t in r.topics
        for x in t.partitions
    )


def v7(require_stable: bool) -> OffsetFetchRequest:
    return OffsetFetchRequest(
        group_id="g",
        topics=(OffsetFetchRequestTopic(name="t", partition_indexes=(0, 1)),),
        require_stable=require_stable,
    )


@pytest.mark.asyncio
async def test_require_stable_answers_unstable_offset_commit_while_the_commit_is_pending() -> None:
    log = FakeLog()
    groups = GroupCoordinatorRuntime(
        num_partitions=1,
        append=log.append,
        read=log.read,
        config=GroupConfig(group_initial_rebalance_delay_ms=0),
        clock_ms=lambda: 1_000,
    )
    await groups.on_become_leader(0, 1)
    apis = KafkaGroupApis(
        listener="KAFKA",
        groups=groups,
        metadata=None,  # type: ignore[arg-type] (OffsetFetch v7 names its topics)
        authz=ALLOW_ALL,
        ensure_offsets_topic=lambda: None,
    )
    try:
        plain = OffsetCommitRequest("g", (OffsetCommit("t", 0, 5), OffsetCommit("t", 1, 6)))
        assert (await groups.commit_offsets(plain)).error_code is ErrorCode.NONE
        pending = OffsetCommitRequest(
            "g", (OffsetCommit("t", 0, 42),), producer_id=PID, producer_epoch=3
        )
        assert (await groups.commit_offsets(pending)).error_code is ErrorCode.NONE

        unstable = ErrorCode.UNSTABLE_OFFSET_COMMIT
        assert await offset_fetch(apis, v7(True)) == [("t", 0, -1, unstable), ("t", 1, 6, 0)]
        # Not asked (v7 without it, or v6): the last stable offsets.
        assert await offset_fetch(apis, v7(False)) == [("t", 0, 5, 0), ("t", 1, 6, 0)]
        v6 = OffsetFetchV6(group_id="g", topics=(TopicV6(name="t", partition_indexes=(0, 1)),))
        assert await offset_fetch(apis, v6) == [("t", 0, 5, 0), ("t", 1, 6, 0)]

        await log.append(
            0,
            build_control_batch(
                ControlRecordType.COMMIT,
                producer_id=PID,
                producer_epoch=4,
                coordinator_epoch=1,
                timestamp_ms=1_000,
            ),
        )
        groups.complete_transaction(0, PID, commit=True)
        assert await offset_fetch(apis, v7(True)) == [("t", 0, 42, 0), ("t", 1, 6, 0)]
    finally:
        await groups.close()
