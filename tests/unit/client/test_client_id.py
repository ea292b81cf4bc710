"""Every gRPC call of the producer, consumer and admin carries their ``client_id`` as
the ``client-id`` metadata entry (the brokers' client quotas match it), on a real
in-process gRPC server; a streamed call carries it once, when the stream opens."""

from __future__ import annotations

import grpc
import pytest
from headwater.client import Admin, Consumer, Producer
from headwater.client.transport.connection import Channels
from headwater.client.types import TopicPartition
from headwater.v1 import broker_pb2

from tests.unit.client.fake_broker import FakeBroker


def test_producer_consumer_and_admin_send_their_client_id(broker: FakeBroker) -> None:
    broker.create("t", 1)
    with Producer(broker.bootstrap, client_id="prod-x", linger_ms=0) as producer:
        producer.send("t", b"v", partition=0).result(timeout=10)
    produced = set(broker.client_ids)
    assert ("Produce", "prod-x") in produced or ("ProduceStream", "prod-x") in produced
    assert {cid for _, cid in produced} == {"prod-x"}

    broker.client_ids.clear()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap, client_id="cons-y", auto_offset_reset="earliest"
    )
    try:
        consumer.assign([TopicPartition("t", 0)])
        assert [r.value for r in consumer.poll(timeout_ms=5000)] == [b"v"]
    finally:
        consumer.close()
    assert {m for m, _ in broker.client_ids} & {"Fetch", "FetchStream"}
    assert {cid for _, cid in broker.client_ids} == {"cons-y"}

    broker.client_ids.clear()
    with Admin(broker.bootstrap, client_id="adm-z") as admin:
        admin.describe_cluster()
    assert broker.client_ids and {cid for _, cid in broker.client_ids} == {"adm-z"}


def test_default_client_ids_are_kafkas(broker: FakeBroker) -> None:
    with Producer(broker.bootstrap) as a, Producer(broker.bootstrap) as b:
        assert a.client_id.startswith("producer-") and b.client_id.startswith("producer-")
        assert a.client_id != b.client_id
    with Admin(broker.bootstrap) as admin:
        assert admin.client_id.startswith("adminclient-")


def test_a_stream_carries_the_client_id_when_it_opens(broker: FakeBroker) -> None:
    """FetchStream is answered UNIMPLEMENTED by the fake, but it was opened with the id."""
    channels = Channels(client_id="streamer")
    try:
        stream = channels.broker(broker.bootstrap).FetchStream(iter(()))
        with pytest.raises(grpc.RpcError):
            next(stream)
        # a caller's own metadata is kept beside the client id
        channels.broker(broker.bootstrap).Metadata(
            broker_pb2.MetadataRequest(),
            metadata=(("x-other", "1"),),
            timeout=5,
        )
    finally:
        channels.close()
    assert broker.client_ids == [("FetchStream", "streamer"), ("Metadata", "streamer")]


def test_no_client_id_sends_no_entry(broker: FakeBroker) -> None:
    channels = Channels()
    try:
        channels.broker(broker.bootstrap).Metadata(broker_pb2.MetadataRequest(), timeout=5)
    finally:
        channels.close()
    assert broker.client_ids == [("Metadata", None)]


@pytest.mark.parametrize("bad", [7, b"x", "caf\u00e9", "a\nb"])
def test_a_client_id_gRPC_cannot_carry_is_refused_up_front(bad: object) -> None:
    with pytest.raises(ValueError, match="client_id"):
        Producer("127.0.0.1:1", client_id=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="client_id"):
        Admin("127.0.0.1:1", client_id=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="client_id"):
        Consumer(bootstrap_servers="127.0.0.1:1", client_id=bad)  # type: ignore[arg-type]
