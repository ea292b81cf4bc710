"""Metadata as a Kafka listener answers it, from the broker's metadata cache.

Every version (0-12) names each live broker at its advertised address on the listener the
client came in on (another listener: other addresses), with its rack from v1, the
controller from v1 and the cluster id from v2; a broker without an endpoint on that
listener (mid-roll, before it has the listener) is left out, and a partition it leads
has no leader for this client: LEADER_NOT_AVAILABLE, LISTENER_NOT_FOUND from v6, as in
Kafka.  The end-to-end check with real brokers and Kafka's clients is
tests/interop/test_kafka_metadata.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, cast

import pytest
from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, PartitionState
from headwater.kafka.apis import KafkaApis
from headwater.kafka.protocol import Request
from headwater.server.auth.authorization import ALLOW_ALL
from headwater.server.metrics import BrokerMetrics
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.runtime.replica_manager import ReplicaManager
from kio.index import load_request_schema

LISTENERS = ("INTERNAL", "KAFKA", "EXTERNAL")


def registration(broker_id: int, rack: str | None, *, kafka: bool = True) -> BrokerRegistration:
    endpoints = [f"INTERNAL://b{broker_id}.internal:9091"]
    if kafka:
        endpoints += [
            f"KAFKA://b{broker_id}.headless.ns.svc:9093",
            f"EXTERNAL://kafka-{broker_id}.example.com:{19093 + broker_id}",
        ]
    return BrokerRegistration(
        broker_id=broker_id,
        host=f"b{broker_id}.internal",
        port=9091,
        rack=rack,
        endpoints=tuple(endpoints),
        security_protocol_map=tuple((name, "PLAINTEXT") for name in LISTENERS),
    )


def partition(p: int, leader: int) -> PartitionState:
    return PartitionState("orders", p, LeaderAndIsr(leader, 4, (0, 1, 2), 1), (0, 1, 2))


@pytest.fixture
def cache() -> MetadataCache:
    cache = MetadataCache()
    cache.update(
        controller_id=1,
        controller_epoch=3,
        # partition 1's leader has no Kafka listener yet; partition 2's (5) is gone
        states=[partition(0, 0), partition(1, 2), partition(2, 5)],
        live_brokers=[
            registration(0, "zone-a"),
            registration(1, "zone-b"),
            registration(2, None, kafka=False),
        ],
        cluster_id="cluster-1",
    )
    return cache


def metadata(cache: MetadataCache, listener: str, version: int) -> Any:
    apis = KafkaApis(
        listener=listener,
        replicas=cast(ReplicaManager, None),
        metadata=cache,
        metrics=BrokerMetrics(),
        authz=ALLOW_ALL,
        next_producer_id=lambda: 1,
    )
    request_type = load_request_schema(3, version)
    fields = {f.name for f in dataclasses.fields(request_type)} - {"topics"}
    body = request_type(topics=() if version == 0 else None, **dict.fromkeys(fields, False))  # type: ignore[call-arg]
    return asyncio.run(apis.handle(Request(3, version, 1, None, body)))


@pytest.mark.parametrize("version", range(13))
def test_each_broker_at_its_address_on_this_listener_with_rack_and_controller(
    cache: MetadataCache, version: int
) -> None:
    answer = metadata(cache, "KAFKA", version)
    assert {(b.node_id, b.host, b.port) for b in answer.brokers} == {
        (0, "b0.headless.ns.svc", 9093),
        (1, "b1.headless.ns.svc", 9093),
    }
    if version >= 1:
        assert {b.node_id: b.rack for b in answer.brokers} == {0: "zone-a", 1: "zone-b"}
        assert answer.controller_id == 1
    if version >= 2:
        assert answer.cluster_id == "cluster-1"
    other = metadata(cache, "EXTERNAL", version)
    assert {(b.node_id, b.host, b.port) for b in other.brokers} == {
        (0, "kafka-0.example.com", 19093),
        (1, "kafka-1.example.com", 19094),
    }


@pytest.mark.parametrize("version", range(13))
def test_a_leader_without_this_listener_is_no_leader_for_its_clients(
    cache: MetadataCache, version: int
) -> None:
    (topic,) = metadata(cache, "KAFKA", version).topics
    by_partition = {p.partition_index: p for p in topic.partitions}
    assert (by_partition[0].leader_id, int(by_partition[0].error_code)) == (0, 0)
    missing = 72 if version >= 6 else 5  # LISTENER_NOT_FOUND, LEADER_NOT_AVAILABLE
    assert (by_partition[1].leader_id, int(by_partition[1].error_code)) == (-1, missing)
    assert (by_partition[2].leader_id, int(by_partition[2].error_code)) == (-1, 5)
    if version >= 1:  # replicas as they are (Kafka filters them for v0 clients only)
        assert by_partition[1].replica_nodes == (0, 1, 2)
