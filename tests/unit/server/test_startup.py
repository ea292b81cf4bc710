"""Broker startup (headwater.server.startup): readiness and services registered before start.

* :class:`Readiness` reports ready only once the broker is registered, has
  applied an UpdateMetadata for that registration's epoch, and hosts every
  led partition it is a replica of; it then stays ready;
* :class:`DeferredServices`, registered on a real in-process gRPC server
  before ``start()``, answers UNAVAILABLE until the servicers are attached,
  then delegates to them, and leaves other services UNIMPLEMENTED.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
import pytest_asyncio
from headwater.coordination.model import LeaderAndIsr, PartitionState
from headwater.server.startup import STARTING_MESSAGE, DeferredServices, Readiness
from headwater.v1 import admin_pb2, admin_pb2_grpc, broker_pb2, broker_pb2_grpc
from headwater.values import TopicPartition


def state(topic: str, partition: int, replicas: tuple[int, ...], leader: int) -> PartitionState:
    return PartitionState(
        topic=topic,
        partition=partition,
        leader_and_isr=LeaderAndIsr(
            leader=leader, leader_epoch=1, isr=replicas, controller_epoch=1
        ),
        replicas=replicas,
    )


TOPICS = {
    "a": {0: state("a", 0, (1, 2), leader=1), 1: state("a", 1, (2, 3), leader=2)},
    "b": {0: state("b", 0, (1, 3), leader=-1)},  # offline: no LeaderAndIsr will come
}


def test_not_ready_before_registration_even_with_metadata() -> None:
    r = Readiness(broker_id=1)
    r.on_update_metadata(7)
    assert not r.evaluate(TOPICS, {TopicPartition("a", 0)})


def test_metadata_for_an_older_registration_does_not_count() -> None:
    r = Readiness(broker_id=1)
    r.on_registered(10)
    r.on_update_metadata(7)  # sent to this broker's previous session
    assert not r.evaluate(TOPICS, {TopicPartition("a", 0)})
    r.on_update_metadata(10)
    assert r.evaluate(TOPICS, {TopicPartition("a", 0)})


def test_waits_for_the_leader_and_isr_of_its_replicas() -> None:
    r = Readiness(broker_id=1)
    r.on_registered(10)
    r.on_update_metadata(10)
    assert r.missing_replicas(TOPICS, set()) == [TopicPartition("a", 0)]
    assert not r.evaluate(TOPICS, set())
    assert r.evaluate(TOPICS, {TopicPartition("a", 0)})


def test_ready_is_latched() -> None:
    r = Readiness(broker_id=3)
    r.on_registered(5)
    r.on_update_metadata(5)
    assert r.evaluate({}, set())
    assert r.evaluate(TOPICS, set())  # later metadata does not take readiness back


class FakeBroker(broker_pb2_grpc.BrokerServicer):
    async def Metadata(
        self, request: broker_pb2.MetadataRequest, context: object
    ) -> broker_pb2.MetadataResponse:
        return broker_pb2.MetadataResponse(controller_id=42)


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[DeferredServices, str]]:
    server = grpc.aio.server()
    services = DeferredServices(("headwater.v1.Broker",))
    server.add_generic_rpc_handlers((services,))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield services, f"127.0.0.1:{port}"
    finally:
        await server.stop(grace=None)


@pytest.mark.asyncio
async def test_deferred_services_answer_unavailable_then_delegate(
    served: tuple[DeferredServices, str],
) -> None:
    services, address = served
    async with grpc.aio.insecure_channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Metadata(broker_pb2.MetadataRequest(), timeout=5)
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
        assert caught.value.details() == STARTING_MESSAGE
        assert not services.attached

        services.attach(
            lambda target: broker_pb2_grpc.add_BrokerServicer_to_server(FakeBroker(), target)
        )
        response = await stub.Metadata(broker_pb2.MetadataRequest(), timeout=5)
        assert response.controller_id == 42

        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await broker_pb2_grpc.BrokerStub(channel).Produce(
                broker_pb2.ProduceRequest(), timeout=5
            )
        assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED  # FakeBroker lacks it


@pytest.mark.asyncio
async def test_other_services_are_left_unimplemented(served: tuple[DeferredServices, str]) -> None:
    _, address = served
    async with grpc.aio.insecure_channel(address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await admin_pb2_grpc.AdminStub(channel).DescribeCluster(
                admin_pb2.DescribeClusterRequest(), timeout=5
            )
        assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED
