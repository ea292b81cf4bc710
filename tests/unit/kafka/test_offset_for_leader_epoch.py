"""OffsetForLeaderEpoch (API key 23, v2-v4) as the Kafka listener answers it, on the wire.

A real :class:`~headwater.server.runtime.replica_manager.ReplicaManager` over real logs
(``tests/unit/server/conftest.py``'s harness) leads ``orders``/0 through two leader
epochs; each request is written with kio's types for its version, parsed, answered by
:class:`~headwater.kafka.apis.KafkaApis` and read back: the end offset of an epoch, the
current leader epoch's fencing (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), a partition
not led here or not known, and Kafka's ACLs with a real authorizer (CLUSTER_ACTION allows
every topic, else DESCRIBE on each; a replica id changes nothing).  Clients sending it
after a leader change: tests/interop/test_kafka_listener.py.
"""

from __future__ import annotations

import asyncio
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, PartitionState
from headwater.errors import ErrorCode
from headwater.kafka import protocol
from headwater.kafka.apis import KafkaApis
from headwater.records import Record, build_batch
from headwater.security.acls import AclOperation as Op
from headwater.security.acls import AclPermissionType, PatternType, ResourceType, binding
from headwater.security.authorizer import AclAuthorizer, AclSnapshot, AuthorizerSettings
from headwater.security.principal import KafkaPrincipal, RequestIdentity
from headwater.server.auth.authorization import ALLOW_ALL, RequestAuthorizer
from headwater.server.auth.identity import reset_identity, set_identity
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.metadata_cache import MetadataCache
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from tests.unit.server.conftest import TP, Harness

VERSIONS = (2, 3, 4)
EPOCH_1_RECORDS = 3  # appended in leader epoch 1; epoch 2 starts at offset 3


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        host=f"b{broker_id}.internal",
        port=9091,
        endpoints=(f"INTERNAL://b{broker_id}.internal:9091", f"KAFKA://k{broker_id}:9093"),
        security_protocol_map=(("INTERNAL", "PLAINTEXT"), ("KAFKA", "PLAINTEXT")),
    )


def state(*, leader: int, epoch: int) -> PartitionState:
    return PartitionState(TP.topic, TP.partition, LeaderAndIsr(leader, epoch, (0, 1), 1), (0, 1))


class Broker:
    """Broker 0: the real replica manager, its metadata cache and the Kafka listener."""

    def __init__(self, harness: Harness, authz: RequestAuthorizer) -> None:
        self.manager = harness.manager
        self.cache = MetadataCache()
        self.apis = KafkaApis(
            listener="KAFKA",
            replicas=self.manager,
            metadata=self.cache,
            metrics=BrokerMetrics(),
            authz=authz,
            next_producer_id=lambda: 1,
        )

    def lead(self, *, leader: int, epoch: int) -> None:
        self.cache.update(
            controller_id=0,
            controller_epoch=1,
            states=[state(leader=leader, epoch=epoch)],
            live_brokers=[registration(0), registration(1)],
            cluster_id="c",
        )
        self.manager.become_leader_or_follower(
            controller_epoch=1, states=[state(leader=leader, epoch=epoch)]
        )

    async def append(self, n: int) -> None:
        batch = build_batch([Record(None, b"v%d" % i) for i in range(n)])
        [r] = await self.manager.append_records(acks=1, timeout_ms=100, entries=[(TP, batch)])
        assert r.error is ErrorCode.NONE


async def two_epochs(harness: Harness, authz: RequestAuthorizer = ALLOW_ALL) -> Broker:
    """``orders``/0 led by broker 0: 3 records in epoch 1, 2 in epoch 2 (current)."""
    broker = Broker(harness, authz)
    await broker.manager.prepare_topics([TP.topic])
    broker.lead(leader=0, epoch=1)
    await broker.append(EPOCH_1_RECORDS)
    broker.lead(leader=0, epoch=2)
    await broker.append(2)
    return broker


def request(version: int, asked: list[tuple[str, int, int, int]], *, replica_id: int = -1) -> Any:
    """OffsetForLeaderEpoch at ``version``: ``(topic, partition, current epoch, epoch)``."""
    request_type = load_request_schema(23, version)
    m = sys.modules[request_type.__module__]
    topics: dict[str, list[Any]] = {}
    for topic, partition, current, epoch in asked:
        topics.setdefault(topic, []).append(
            m.OffsetForLeaderPartition(
                partition=partition, current_leader_epoch=current, leader_epoch=epoch
            )
        )
    return protocol.build(
        request_type,
        replica_id=replica_id,
        topics=tuple(
            m.OffsetForLeaderTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()
        ),
    )


async def exchange(apis: KafkaApis, body: Any) -> Any:
    """``body`` through the wire both ways: written, parsed, answered, read back."""
    out = io.BytesIO()
    header_type = type(body).__header_schema__
    entity_writer(header_type)(
        out,
        header_type(
            request_api_key=23,
            request_api_version=body.__version__,
            correlation_id=3,
            client_id="test",
        ),
    )
    entity_writer(type(body))(out, body)
    parsed = protocol.parse_request(out.getvalue())
    frame = protocol.encode_response(parsed.correlation_id, await apis.handle(parsed))
    schema = load_response_schema(23, parsed.api_version)
    header, used = entity_reader(schema.__header_schema__)(frame, 4)
    assert header.correlation_id == 3
    decoded, body_used = entity_reader(schema)(frame, 4 + used)
    assert 4 + used + body_used == len(frame)
    return decoded


def answers(response: Any) -> list[tuple[str, int, ErrorCode, int, int]]:
    return [
        (t.topic, p.partition, ErrorCode(p.error_code.value), p.leader_epoch, p.end_offset)
        for t in response.topics
        for p in t.partitions
    ]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.logs.shutdown()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_end_offset_of_each_epoch(harness: Harness, version: int) -> None:
    async def scenario() -> None:
        broker = await two_epochs(harness)
        asked = [("orders", 0, 2, 1), ("orders", 0, 2, 2), ("orders", 0, -1, 0)]
        got = answers(await exchange(broker.apis, request(version, asked)))
        assert got == [
            ("orders", 0, ErrorCode.NONE, 1, EPOCH_1_RECORDS),  # where epoch 2 began
            ("orders", 0, ErrorCode.NONE, 2, EPOCH_1_RECORDS + 2),  # the log end
            # An epoch before the first one: Kafka's LeaderEpochFileCache answers the asked
            # epoch and the first epoch's start offset.
            ("orders", 0, ErrorCode.NONE, 0, 0),
        ]

    asyncio.run(scenario())


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stale_or_newer_current_leader_epoch_is_fenced(harness: Harness, version: int) -> None:
    async def scenario() -> None:
        broker = await two_epochs(harness)
        asked = [("orders", 0, 1, 1), ("orders", 0, 3, 1)]
        got = answers(await exchange(broker.apis, request(version, asked)))
        assert got == [
            ("orders", 0, ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
            ("orders", 0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
        ]

    asyncio.run(scenario())


@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_topic_and_a_partition_led_elsewhere(harness: Harness, version: int) -> None:
    async def scenario() -> None:
        broker = await two_epochs(harness)
        broker.lead(leader=1, epoch=3)  # broker 0 is now a follower of orders/0
        asked = [("orders", 0, 3, 2), ("nope", 0, -1, 1), ("orders", 7, -1, 1)]
        got = answers(await exchange(broker.apis, request(version, asked)))
        assert got == [
            ("orders", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1),
            ("orders", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]

    asyncio.run(scenario())


def _allow(principal: str, op: Op, rtype: ResourceType, name: str) -> Any:
    return binding(
        resource_type=rtype,
        name=name,
        principal=principal,
        operation=op,
        permission_type=AclPermissionType.ALLOW,
        host="*",
        pattern_type=PatternType.LITERAL,
    )


AUTHZ = RequestAuthorizer(
    AclAuthorizer(
        AuthorizerSettings(),
        AclSnapshot.of(
            [
                _allow("User:alice", Op.DESCRIBE, ResourceType.TOPIC, "orders"),
                _allow("User:broker", Op.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"),
            ]
        ),
    )
)


@pytest.mark.parametrize(
    ("user", "replica_id", "served"),
    [
        ("alice", -1, True),  # a consumer with DESCRIBE on the topic
        ("bob", -1, False),  # a consumer without
        ("broker", -1, True),  # CLUSTER_ACTION allows every topic, whatever the replica id
        ("broker", 1, True),  # a follower with CLUSTER_ACTION
        ("alice", 1, True),  # Kafka: a follower without CLUSTER_ACTION, with DESCRIBE
        ("bob", 1, False),  # a replica id with neither
    ],
)
def test_acls_are_kafkas(harness: Harness, user: str, replica_id: int, served: bool) -> None:
    async def scenario() -> None:
        broker = await two_epochs(harness, AUTHZ)
        token = set_identity(RequestIdentity(KafkaPrincipal("User", user), "10.0.0.1"))
        try:
            got = answers(
                await exchange(
                    broker.apis, request(4, [("orders", 0, 2, 1)], replica_id=replica_id)
                )
            )
        finally:
            reset_identity(token)
        assert got == [
            ("orders", 0, ErrorCode.NONE, 1, EPOCH_1_RECORDS)
            if served
            else ("orders", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1)
        ]

    asyncio.run(scenario())


def test_api_versions_lists_it() -> None:
    answer = protocol.api_versions_response(3)
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}[23] == (2, 4)
