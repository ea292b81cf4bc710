"""Protobuf <-> domain conversions of the control plane, and the producer-id scheme."""

from __future__ import annotations

from headwater.coordination.model import BrokerRegistration, LeaderAndIsr, PartitionState
from headwater.server.convert import (
    broker_from_proto,
    broker_to_proto,
    partition_state_from_proto,
    partition_state_to_proto,
)
from headwater.server.runtime.metadata_cache import MetadataCache
from headwater.server.services.broker_service import PRODUCER_ID_BITS, ProducerIdAllocator


def test_partition_state_round_trip() -> None:
    state = PartitionState(
        "t", 3, LeaderAndIsr(2, 7, (2, 1), controller_epoch=4, zk_version=9), (1, 2)
    )
    msg = partition_state_to_proto(state, controller_epoch=4)
    assert (msg.leader, msg.leader_epoch, list(msg.isr), msg.zk_version) == (2, 7, [2, 1], 9)
    assert partition_state_from_proto(msg) == state


def test_broker_round_trip() -> None:
    reg = BrokerRegistration(5, "h", 9092, rack="r1", version="0.1.0", protocol_version="1")
    assert broker_from_proto(broker_to_proto(reg)) == reg


def test_producer_ids_carry_the_broker_id() -> None:
    ids = ProducerIdAllocator(3, start_ms=10)
    first, second = ids.next_id(), ids.next_id()
    assert first >> PRODUCER_ID_BITS == 3 and second == first + 1


def test_metadata_cache_refuses_stale_controller() -> None:
    cache = MetadataCache()
    state = PartitionState("t", 0, LeaderAndIsr(1, 1, (1,), controller_epoch=2), (1,))
    broker = BrokerRegistration(1, "h", 1)
    assert cache.update(controller_id=1, controller_epoch=2, states=[state], live_brokers=[broker])
    assert cache.topic_has_leaders("t", 1)
    assert not cache.update(controller_id=0, controller_epoch=1, states=[], live_brokers=[])
    assert cache.controller_id == 1 and cache.brokers == {1: broker}
    assert cache.update(
        controller_id=1, controller_epoch=2, states=[], live_brokers=None, deleted_topics=["t"]
    )
    assert "t" not in cache.topics
