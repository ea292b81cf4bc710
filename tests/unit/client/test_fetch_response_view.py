"""``fetch_response.parse`` reads every ``FetchResponse`` the generated code reads, field
for field (negative and 64-bit values, missing fields, unknown fields, several
partitions), with ``records`` a view of the received bytes; malformed bytes raise."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import DecodeError
from headwater.client.transport import fetch_response
from headwater.client.transport.fetch_response import MalformedFetchResponse
from headwater.v1 import broker_pb2

SCALARS = (
    "topic",
    "partition",
    "error",
    "error_message",
    "high_watermark",
    "last_stable_offset",
    "log_start_offset",
    "preferred_read_replica",
    "log_end_offset",
)


def assert_same(raw: bytes) -> fetch_response.FetchResponseView:
    want = broker_pb2.FetchResponse.FromString(raw)
    got = fetch_response.parse(raw)
    assert got.throttle_time_ms == want.throttle_time_ms
    assert len(got.partitions) == len(want.partitions)
    for g, w in zip(got.partitions, want.partitions, strict=True):
        for name in SCALARS:
            assert getattr(g, name) == getattr(w, name), name
        assert bytes(g.records) == w.records
        assert g.HasField("diverging_epoch") == w.HasField("diverging_epoch")
        assert g.diverging_epoch == w.diverging_epoch
        assert g.aborted_transactions == list(w.aborted_transactions)
    return got


def test_the_view_reads_every_field_the_proto_has() -> None:
    """A field added to ``FetchedPartition`` must be read by the view too (or the client
    silently drops it, as it once dropped READ_COMMITTED's aborted transactions)."""
    fields = {f.name for f in broker_pb2.FetchedPartition.DESCRIPTOR.fields}
    assert fields == {*SCALARS, "records", "diverging_epoch", "aborted_transactions"}


def test_every_field_of_several_partitions() -> None:
    response = broker_pb2.FetchResponse(
        throttle_time_ms=-3,
        partitions=[
            broker_pb2.FetchedPartition(
                topic="orders-é",
                partition=2**31 - 1,
                error=6,  # type: ignore[arg-type]  # any int an enum field holds
                error_message="not leader ✓",
                high_watermark=2**63 - 1,
                last_stable_offset=-1,
                log_start_offset=-(2**63),
                records=bytes(range(256)) * 600,
                diverging_epoch=broker_pb2.EpochEndOffset(epoch=-1, end_offset=77),
                preferred_read_replica=-1,
                log_end_offset=300,
                aborted_transactions=[
                    broker_pb2.AbortedTransaction(producer_id=7, first_offset=0),
                    broker_pb2.AbortedTransaction(producer_id=2**62, first_offset=2**40),
                ],
            ),
            broker_pb2.FetchedPartition(),  # every field its default
            broker_pb2.FetchedPartition(topic="t", partition=-2, records=b"x"),
        ],
    )
    got = assert_same(response.SerializeToString())
    assert isinstance(got.partitions[0].records, memoryview)
    assert got.partitions[1].records == b""


def test_empty_response() -> None:
    got = assert_same(b"")
    assert got.partitions == []


def test_records_are_views_of_the_received_bytes() -> None:
    raw = broker_pb2.FetchResponse(
        partitions=[broker_pb2.FetchedPartition(topic="t", records=b"abc" * 1000)]
    ).SerializeToString()
    view = fetch_response.parse(raw).partitions[0].records
    assert isinstance(view, memoryview)
    assert view.obj is raw


def test_unknown_fields_of_each_wire_type_are_skipped() -> None:
    part = broker_pb2.FetchedPartition(topic="t", partition=3, records=b"r").SerializeToString()
    unknown = (
        b"\xa0\x06\x96\x01"  # field 100, varint 150
        + b"\xa9\x06"
        + b"\x01" * 8  # field 101, fixed64
        + b"\xb2\x06\x03abc"  # field 102, 3 bytes
        + b"\xbd\x06"
        + b"\x02" * 4  # field 103, fixed32
    )
    raw = b"\x0a" + bytes([len(part) + len(unknown)]) + part + unknown + unknown + b"\x10\x05"
    got = assert_same(raw)
    assert (got.partitions[0].partition, got.throttle_time_ms) == (3, 5)


@pytest.mark.parametrize(
    "raw",
    [
        b"\x0a\x05ab",  # a partition cut short
        b"\x0a\x03\x0a\x05t",  # a topic longer than its partition
        b"\x10\xff\xff",  # a truncated varint
        b"\x10" + b"\xff" * 10 + b"\x01",  # a varint longer than 10 bytes
        b"\x0b",  # a group (wire type 3)
        b"\x0a\x02\x0a\xff",  # a length varint cut short
        b"\x0a\x03\x0a\x01\xff",  # a topic that is not UTF-8
    ],
)
def test_malformed_bytes_raise(raw: bytes) -> None:
    with pytest.raises(MalformedFetchResponse):
        fetch_response.parse(raw)
    with pytest.raises(DecodeError):  # the generated code refuses them too
        broker_pb2.FetchResponse.FromString(raw)


def test_client_fetch_calls_use_the_view() -> None:
    """The consumer's and the range reader's Fetch and FetchStream deserialize views."""
    import grpc
    from headwater.client.transport.connection import Channels

    channels = Channels()
    try:
        stub = channels.broker("127.0.0.1:1")
        assert isinstance(stub.Fetch, grpc.UnaryUnaryMultiCallable)
        methods: list[Any] = [stub.Fetch, stub.FetchStream]
        for method in methods:
            assert method._response_deserializer is fetch_response.parse
    finally:
        channels.close()
