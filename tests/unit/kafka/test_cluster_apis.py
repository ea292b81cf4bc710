"""ElectLeaders and AlterPartitionReassignments requests to the coordinator's calls, and
the refusals that never reach it."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from headwater.errors import ErrorCode
from headwater.kafka.cluster_apis import KafkaClusterApis
from headwater.kafka.protocol import Request
from headwater.server.auth.authorization import ALLOW_ALL
from headwater.values import TopicPartition
from kio.index import load_payload_module
from kio.static.constants import EntityType

SECOND = datetime.timedelta(seconds=1)


class Refusing:
    """An authorizer that refuses everything on the cluster."""

    enabled = True

    def cluster(self, _context: object, _op: object) -> bool:
        return False


class Controller:
    def __init__(self) -> None:
        self.moves: list[dict[TopicPartition, Any]] = []

    def alter_partition_reassignments(
        self, wanted: dict[TopicPartition, Any], *, timeout_s: float
    ) -> dict[TopicPartition, None]:
        self.moves.append(dict(wanted))
        return dict.fromkeys(wanted)


class Coordinator:
    is_controller = True
    broker_id = 0

    def __init__(self) -> None:
        self.controller = Controller()
        self.elections: list[Any] = []

    def elect_preferred_leaders(
        self, partitions: list[TopicPartition] | None, *, timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]:
        self.elections.append(partitions)
        return {tp: ErrorCode.NONE for tp in partitions or [TopicPartition("t", 0)]}


def apis(coordinator: Coordinator, authz: Any = ALLOW_ALL) -> KafkaClusterApis:
    return KafkaClusterApis(
        coordinator=lambda: coordinator,  # type: ignore[arg-type,return-value]
        log_manager=lambda: None,
        authz=authz,
    )


def elect(version: int, **fields: Any) -> Request:
    module = load_payload_module(43, version, EntityType.request)
    topics = fields.pop("topics")
    body = module.ElectLeadersRequest(
        topic_partitions=None
        if topics is None
        else tuple(module.TopicPartitions(topic=t, partitions=tuple(ps)) for t, ps in topics),
        timeout=SECOND,
        **fields,
    )
    return Request(43, version, 1, None, body)


def results(response: Any) -> list[tuple[str, int, int]]:
    return [
        (r.topic, p.partition_id, int(p.error_code))
        for r in response.replica_election_results
        for p in r.partition_result
    ]


def test_elect_leaders_names_partitions_or_none_for_all() -> None:
    c = Coordinator()
    named = asyncio.run(apis(c).elect_leaders(elect(2, election_type=0, topics=[("t", [1, 0])])))
    assert results(named) == [("t", 0, 0), ("t", 1, 0)]
    everything = asyncio.run(apis(c).elect_leaders(elect(0, topics=None)))
    assert results(everything) == [("t", 0, 0)]
    assert c.elections == [[TopicPartition("t", 1), TopicPartition("t", 0)], None]


def test_elect_leaders_refusals_never_reach_the_coordinator() -> None:
    c = Coordinator()
    unclean = asyncio.run(apis(c).elect_leaders(elect(1, election_type=1, topics=[("t", [0])])))
    assert results(unclean) == [("t", 0, int(ErrorCode.INVALID_REQUEST))]
    refused_v0 = asyncio.run(apis(c, Refusing()).elect_leaders(elect(0, topics=[("t", [0])])))
    assert results(refused_v0) == [("t", 0, int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED))]
    refused_v2 = asyncio.run(
        apis(c, Refusing()).elect_leaders(elect(2, election_type=0, topics=[("t", [0])]))
    )
    assert int(refused_v2.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert c.elections == []


def test_a_partition_named_twice_is_not_moved() -> None:
    module = load_payload_module(45, 0, EntityType.request)
    body = module.AlterPartitionReassignmentsRequest(
        timeout=SECOND,
        topics=(
            module.ReassignableTopic(
                name="t",
                partitions=(
                    module.ReassignablePartition(partition_index=0, replicas=(1, 2)),
                    module.ReassignablePartition(partition_index=1, replicas=(2,)),
                    module.ReassignablePartition(partition_index=0, replicas=None),
                ),
            ),
        ),
    )
    c = Coordinator()
    response = asyncio.run(apis(c).alter_partition_reassignments(Request(45, 0, 1, None, body)))
    assert int(response.error_code) == 0
    [topic] = response.responses
    assert [(p.partition_index, int(p.error_code)) for p in topic.partitions] == [
        (0, int(ErrorCode.INVALID_REQUEST)),
        (1, 0),
    ]
    assert c.controller.moves == [{TopicPartition("t", 1): (2,)}]
    refused = asyncio.run(
        apis(c, Refusing()).alter_partition_reassignments(Request(45, 0, 1, None, body))
    )
    assert int(refused.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert refused.responses == ()
    assert len(c.controller.moves) == 1
