"""Fetch v4-v17 and Produce's leader hints as the Kafka listener answers them, on the wire.

Each request is written with kio's types for its version, read by the listener's parser,
answered by :class:`~headwater.kafka.apis.KafkaApis` and the answer read back with kio:
v13+ names topics by the id Metadata gives (an id no topic has is UNKNOWN_TOPIC_ID, the
other partitions are served), its fetch sessions hold partitions by id (a request naming
topics the other way is FETCH_SESSION_TOPIC_ID_ERROR and changes nothing), v15 reads the
replica id from ``replica_state``, and from Fetch v16 and Produce v10 a partition led
elsewhere names its current leader and the response that leader's endpoint (KIP-951).
The replica manager is a stand-in that leads ``orders`` and not ``moved``; the
end-to-end checks with real brokers and clients are tests/interop/test_kafka_listener.py.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import sys
import uuid
from collections.abc import Sequence
from typing import Any, cast

import pytest
from headwater.coordination.model import (
    BrokerRegistration,
    LeaderAndIsr,
    PartitionState,
    decode_topic_id,
    new_topic_id,
)
from headwater.errors import ErrorCode
from headwater.kafka import protocol
from headwater.kafka.admin_apis import topics_to_delete
from headwater.kafka.apis import KafkaApis
from headwater.server.auth.authorization import ALLOW_ALL
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.hosted import FetchResult, FetchSpec, ProduceResult
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from headwater.values import TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

CLUSTER = "cluster-1"
ORDERS_ID, MOVED_ID = new_topic_id(), new_topic_id()  # as the controller sends them
ORDERS, MOVED = decode_topic_id(ORDERS_ID), decode_topic_id(MOVED_ID)
STRANGER = uuid.UUID("00000000-0000-4000-8000-000000000001")
ZERO = uuid.UUID(int=0)
HW = 5
RECORDS = b"r" * 70
FETCH_VERSIONS = range(4, 18)
BY_ID = range(13, 18)


class Replicas:
    """The replica manager's answers: this broker leads ``orders``, not ``moved``."""

    def __init__(self) -> None:
        self.read: list[list[FetchSpec]] = []

    async def fetch(self, *, specs: Sequence[FetchSpec], **_: Any) -> list[FetchResult]:
        self.read.append(list(specs))
        return [
            FetchResult(s.topic_partition, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if s.topic_partition.topic == "moved"
            else FetchResult(
                s.topic_partition,
                ErrorCode.NONE,
                high_watermark=HW,
                log_start_offset=0,
                log_end_offset=HW,
                records=RECORDS if s.fetch_offset < HW else b"",
            )
            for s in specs
        ]

    async def append_records(
        self, *, entries: Sequence[tuple[TopicPartition, bytes]], **_: Any
    ) -> list[ProduceResult]:
        return [
            ProduceResult(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            if tp.topic == "moved"
            else ProduceResult(tp, ErrorCode.NONE, base_offset=0, log_start_offset=0)
            for tp, _records in entries
        ]


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        broker_id=broker_id,
        host=f"b{broker_id}.internal",
        port=9091,
        rack=f"rack-{broker_id}",
        endpoints=(f"INTERNAL://b{broker_id}.internal:9091", f"KAFKA://k{broker_id}:9093"),
        security_protocol_map=(("INTERNAL", "PLAINTEXT"), ("KAFKA", "PLAINTEXT")),
    )


def new_apis() -> KafkaApis:
    cache = MetadataCache()
    cache.update(
        controller_id=0,
        controller_epoch=1,
        states=[
            PartitionState("orders", 0, LeaderAndIsr(0, 4, (0, 1), 1), (0, 1), ORDERS_ID),
            PartitionState("orders", 1, LeaderAndIsr(0, 4, (0, 1), 1), (0, 1), ORDERS_ID),
            PartitionState("moved", 0, LeaderAndIsr(1, 9, (1, 0), 1), (1, 0), MOVED_ID),
        ],
        live_brokers=[registration(0), registration(1)],
        cluster_id=CLUSTER,
    )
    return KafkaApis(
        listener="KAFKA",
        replicas=cast(ReplicaManager, Replicas()),
        metadata=cache,
        metrics=BrokerMetrics(),
        authz=ALLOW_ALL,
        next_producer_id=lambda: 1,
    )


@pytest.fixture
def apis() -> KafkaApis:
    return new_apis()


def exchange(apis: KafkaApis, body: Any) -> Any:
    """``body`` through the wire both ways: written, parsed, answered, read back."""
    out = io.BytesIO()
    header_type = type(body).__header_schema__
    entity_writer(header_type)(
        out,
        header_type(
            request_api_key=body.__api_key__,
            request_api_version=body.__version__,
            correlation_id=3,
            client_id="test",
        ),
    )
    entity_writer(type(body))(out, body)
    request = protocol.parse_request(out.getvalue())
    answer = asyncio.run(apis.handle(request))
    frame = protocol.encode_response(request.correlation_id, answer)
    schema = load_response_schema(request.api_key, request.api_version)
    header, used = entity_reader(schema.__header_schema__)(frame, 4)
    assert header.correlation_id == 3
    decoded, body_used = entity_reader(schema)(frame, 4 + used)
    assert 4 + used + body_used == len(frame)
    return decoded


def _module(api_key: int, version: int) -> Any:
    return sys.modules[load_request_schema(api_key, version).__module__]


Asked = Sequence[tuple[str, uuid.UUID | None, Sequence[tuple[int, int]]]]


def fetch(
    version: int,
    topics: Asked,
    *,
    session_id: int = 0,
    epoch: int = -1,
    forgotten: Asked = (),
    replica_id: int = -1,
) -> Any:
    """A Fetch at ``version``: ``topics`` as ``(name, id, [(partition, offset)])``."""
    m = _module(1, version)
    build = protocol.build
    return build(
        load_request_schema(1, version),
        replica_id=replica_id,
        replica_state=build(m.ReplicaState, replica_id=replica_id) if version >= 15 else None,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            build(
                m.FetchTopic,
                topic=name,
                topic_id=tid,
                partitions=tuple(
                    build(
                        m.FetchPartition,
                        partition=p,
                        fetch_offset=offset,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=-1,
                    )
                    for p, offset in parts
                ),
            )
            for name, tid, parts in topics
        ),
        forgotten_topics_data=tuple(
            build(m.ForgottenTopic, topic=name, topic_id=tid, partitions=tuple(p for p, _ in parts))
            for name, tid, parts in forgotten
        ),
        rack_id="",
    )


def partitions(answer: Any) -> dict[Any, Any]:
    """``(topic name or id, partition) -> PartitionData`` of a Fetch answer."""
    return {
        (getattr(t, "topic", None) or t.topic_id, p.partition_index): p
        for t in answer.responses
        for p in t.partitions
    }


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_every_version_reads_a_topic_by_name_or_from_v13_by_id(
    apis: KafkaApis, version: int
) -> None:
    answer = exchange(apis, fetch(version, [("orders", ORDERS, [(0, 0), (1, HW)])]))
    assert int(getattr(answer, "error_code", 0)) == 0  # v7+
    (topic,) = answer.responses
    if version >= 13:
        assert topic.topic_id == ORDERS
    else:
        assert topic.topic == "orders"
    got = {p.partition_index: p for p in topic.partitions}
    assert (int(got[0].error_code), got[0].high_watermark, got[0].records) == (0, HW, RECORDS)
    assert (int(got[1].error_code), got[1].high_watermark, got[1].records or b"") == (0, HW, b"")


@pytest.mark.parametrize("version", BY_ID)
def test_an_unknown_or_zero_topic_id_is_unknown_topic_id_and_the_rest_is_served(
    apis: KafkaApis, version: int
) -> None:
    answer = exchange(
        apis,
        fetch(
            version,
            [("", STRANGER, [(0, 0)]), ("orders", ORDERS, [(0, 0)]), ("", None, [(3, 0)])],
        ),
    )
    got = partitions(answer)
    assert int(got[(ORDERS, 0)].error_code) == 0 and got[(ORDERS, 0)].records == RECORDS
    assert int(got[(STRANGER, 0)].error_code) == ErrorCode.UNKNOWN_TOPIC_ID
    zero = got.get((None, 3)) or got[(ZERO, 3)]
    assert int(zero.error_code) == ErrorCode.UNKNOWN_TOPIC_ID
    assert got[(STRANGER, 0)].high_watermark == -1


@pytest.mark.parametrize("version", BY_ID)
def test_the_old_id_of_a_recreated_topic_is_unknown_topic_id(apis: KafkaApis, version: int) -> None:
    """``orders`` deleted and created again: the controller sends its new id."""
    cache = apis._metadata  # the broker's cache, as UpdateMetadata changes it
    again = new_topic_id()
    cache.update(
        controller_id=0, controller_epoch=1, states=[], live_brokers=None, deleted_topics=["orders"]
    )
    cache.update(
        controller_id=0,
        controller_epoch=1,
        states=[PartitionState("orders", 0, LeaderAndIsr(0, 0, (0, 1), 1), (0, 1), again)],
        live_brokers=None,
    )
    answer = exchange(apis, fetch(version, [("orders", ORDERS, [(0, 0)])]))
    assert int(partitions(answer)[(ORDERS, 0)].error_code) == ErrorCode.UNKNOWN_TOPIC_ID
    new = decode_topic_id(again)
    answer = exchange(apis, fetch(version, [("orders", new, [(0, 0)])]))
    assert int(partitions(answer)[(new, 0)].error_code) == 0


@pytest.mark.parametrize("version", BY_ID)
def test_a_session_by_id_answers_news_and_refuses_requests_by_name(
    apis: KafkaApis, version: int
) -> None:
    full = exchange(
        apis,
        fetch(version, [("orders", ORDERS, [(0, 0), (1, HW)]), ("", STRANGER, [(0, 0)])], epoch=0),
    )
    session = full.session_id
    assert session != 0 and set(partitions(full)) == {(ORDERS, 0), (ORDERS, 1), (STRANGER, 0)}
    # Caught up on orders: only the unknown id (an error) is news.
    quiet = exchange(
        apis, fetch(version, [("orders", ORDERS, [(0, HW)])], session_id=session, epoch=1)
    )
    assert set(partitions(quiet)) == {(STRANGER, 0)}
    # Fetch v12 names topics by name: refused, and the session is as it was.
    by_name = exchange(apis, fetch(12, [("orders", None, [(0, 0)])], session_id=session, epoch=2))
    assert int(by_name.error_code) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    assert by_name.responses == ()
    # Forgetting the unknown id by id: nothing is news any more.
    calm = exchange(
        apis,
        fetch(version, [], session_id=session, epoch=2, forgotten=[("", STRANGER, [(0, 0)])]),
    )
    assert (calm.session_id, calm.responses) == (session, ())


def test_a_session_by_name_refuses_requests_by_id(apis: KafkaApis) -> None:
    full = exchange(apis, fetch(12, [("orders", None, [(0, HW)])], epoch=0))
    refused = exchange(
        apis, fetch(13, [("orders", ORDERS, [(1, 0)])], session_id=full.session_id, epoch=1)
    )
    assert int(refused.error_code) == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    same = exchange(apis, fetch(12, [], session_id=full.session_id, epoch=1))
    assert int(same.error_code) == 0 and same.responses == ()


@pytest.mark.parametrize("version", range(12, 18))
def test_from_v16_a_partition_led_elsewhere_names_the_leader_and_its_endpoint(
    apis: KafkaApis, version: int
) -> None:
    answer = exchange(
        apis, fetch(version, [("moved", MOVED, [(0, 0)]), ("orders", ORDERS, [(0, 0)])])
    )
    got = partitions(answer)
    moved = got.get(("moved", 0)) or got[(MOVED, 0)]
    assert int(moved.error_code) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    leader = moved.current_leader
    if version >= 16:
        assert (leader.leader_id, leader.leader_epoch) == (1, 9)
        assert [(n.node_id, n.host, n.port, n.rack) for n in answer.node_endpoints] == [
            (1, "k1", 9093, "rack-1")
        ]
        served = got[(ORDERS, 0)].current_leader
        assert (served.leader_id, served.leader_epoch) == (-1, -1)
    else:
        assert (leader.leader_id, leader.leader_epoch) == (-1, -1)


def produce(version: int, topic: str) -> Any:
    m = _module(0, version)
    build = protocol.build
    return build(
        load_request_schema(0, version),
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            build(
                m.TopicProduceData,
                name=topic,
                partition_data=(build(m.PartitionProduceData, index=0, records=RECORDS),),
            ),
        ),
    )


@pytest.mark.parametrize("version", range(3, 13))
def test_from_produce_v10_a_partition_led_elsewhere_names_the_leader_and_its_endpoint(
    apis: KafkaApis, version: int
) -> None:
    answer = exchange(apis, produce(version, "moved"))
    (part,) = answer.responses[0].partition_responses
    assert int(part.error_code) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    if version >= 10:
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 9)
        assert [(n.node_id, n.host, n.port) for n in answer.node_endpoints] == [(1, "k1", 9093)]
    served = exchange(apis, produce(version, "orders"))
    (ok,) = served.responses[0].partition_responses
    assert int(ok.error_code) == 0
    assert getattr(served, "node_endpoints", ()) == ()


@pytest.mark.parametrize("version", [4, 12, 14, 15, 17])
def test_a_replicas_fetch_is_answered_not_leader_and_opens_no_session(
    apis: KafkaApis, version: int
) -> None:
    answer = exchange(apis, fetch(version, [("orders", ORDERS, [(0, 0)])], epoch=0, replica_id=2))
    assert getattr(answer, "session_id", 0) == 0  # v7+
    assert [int(p.error_code) for p in partitions(answer).values()] == [
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    ]
    assert len(apis._fetch_sessions) == 0


def _sessions(apis: KafkaApis) -> dict[int, Any]:
    return {
        sid: (s.epoch, list(s.by_id or ()), list(s.partitions), list(s.unknown))
        for sid, s in apis._fetch_sessions._sessions.items()
    }


_IDS = st.sampled_from([ORDERS, MOVED, STRANGER, None])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([*BY_ID, 12]),
            st.lists(st.tuples(_IDS, st.integers(-1, 3), st.integers(-1, 9)), max_size=4),
            st.lists(st.tuples(_IDS, st.integers(-1, 3)), max_size=2),
            st.integers(-2, 3),
            st.booleans(),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_fuzz_fetches_by_id_are_answered_and_a_refused_one_changes_nothing(
    steps: list[tuple[int, list[Any], list[Any], int, bool]],
) -> None:
    handlers = new_apis()
    session_id = 0
    for version, wanted, forgotten, epoch, same_session in steps:
        name = {ORDERS: "orders", MOVED: "moved"}
        topics = [(name.get(tid, "x") if tid else "x", tid, [(p, o)]) for tid, p, o in wanted]
        gone = [(name.get(tid, "x") if tid else "x", tid, [(p, 0)]) for tid, p in forgotten]
        before = _sessions(handlers)
        answer = exchange(
            handlers,
            fetch(
                version,
                topics,
                forgotten=gone,
                epoch=epoch,
                session_id=session_id if same_session else session_id + 1,
            ),
        )
        if int(answer.error_code) != 0:
            assert answer.responses == ()
            assert _sessions(handlers) == before
        elif answer.session_id:
            session_id = answer.session_id


def test_topics_to_delete_refuses_entries_as_kafka_does() -> None:
    names = {ORDERS: "orders", MOVED: "moved"}
    wanted, refused = topics_to_delete(
        [
            (None, None),
            ("orders", ORDERS),
            ("quux", None),
            ("quux", None),
            (None, STRANGER),
            (None, MOVED),
            ("moved", None),
            (None, ORDERS),
            (None, ORDERS),
            ("t", ZERO),
        ],
        names.get,
    )
    assert wanted == [("moved", MOVED), ("t", None)]
    assert refused == [
        (None, ZERO, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        (
            "orders",
            ORDERS,
            ErrorCode.INVALID_REQUEST,
            "You may not specify both topic name and topic id.",
        ),
        ("quux", ZERO, ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
        (None, ORDERS, ErrorCode.INVALID_REQUEST, "Duplicate topic id."),
        (None, STRANGER, ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."),
        (
            "moved",
            MOVED,
            ErrorCode.INVALID_REQUEST,
            "The provided topic name maps to an ID that was already supplied.",
        ),
    ]
