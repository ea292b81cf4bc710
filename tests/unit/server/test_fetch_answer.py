"""The hand-encoded Fetch answer is the generated class's encoding, byte for byte."""

from __future__ import annotations

import os
from typing import Any

import grpc
import pytest
from google.protobuf.internal.encoder import _VarintBytes
from headwater.server.services.broker_service import BROKER_SERVICE, add_broker_service
from headwater.server.services.fetch_answer import (
    EncodedPartition,
    encode_fetch_response,
    varint,
)
from headwater.v1 import broker_pb2

FP = broker_pb2.FetchedPartition


def _partition(
    records: bytes, **fields: Any
) -> tuple[EncodedPartition, broker_pb2.FetchedPartition]:
    """The encoder's input and the whole message the generated class would send."""
    head_fields = {
        k: v
        for k, v in fields.items()
        if FP.DESCRIPTOR.fields_by_name[k].number < FP.RECORDS_FIELD_NUMBER
    }
    tail_fields = {k: v for k, v in fields.items() if k not in head_fields}
    return (
        EncodedPartition(head=FP(**head_fields), records=records, tail=FP(**tail_fields)),
        FP(records=records, **fields),
    )


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 1 << 20, (1 << 21) + 3])
def test_one_partition_matches_the_generated_encoding(size: int) -> None:
    encoded, whole = _partition(
        os.urandom(size),
        topic="orders",
        partition=7,
        error=0,
        high_watermark=size + 10,
        last_stable_offset=size + 5,
        log_start_offset=3,
        preferred_read_replica=-1,
        log_end_offset=size + 12,
        aborted_transactions=[broker_pb2.AbortedTransaction(producer_id=9, first_offset=4)],
    )
    wire = encode_fetch_response([], [encoded])
    expected = broker_pb2.FetchResponse(partitions=[whole])
    assert wire == expected.SerializeToString()
    assert broker_pb2.FetchResponse.FromString(wire) == expected


def test_refused_errors_and_several_partitions_in_order() -> None:
    refused = [FP(topic="secret", partition=p, error=29) for p in (0, 1)]
    parts = [
        _partition(b"", topic="a", partition=0, error=1, error_message="out of range"),
        _partition(os.urandom(300), topic="b", partition=2, high_watermark=40, log_end_offset=41),
        _partition(b"\x00" * 5, topic="c", partition=1, high_watermark=-1, log_start_offset=-1),
    ]
    wire = encode_fetch_response(refused, [e for e, _ in parts])
    expected = broker_pb2.FetchResponse(partitions=[*refused, *(w for _, w in parts)])
    assert wire == expected.SerializeToString()
    assert broker_pb2.FetchResponse.FromString(wire) == expected


def test_no_partitions_is_the_empty_answer() -> None:
    assert encode_fetch_response([], []) == b""
    assert broker_pb2.FetchResponse.FromString(b"") == broker_pb2.FetchResponse()


def test_records_in_the_head_or_tail_are_refused() -> None:
    with pytest.raises(ValueError, match="must not carry records"):
        encode_fetch_response([], [EncodedPartition(head=FP(records=b"x"), records=b"y")])
    with pytest.raises(ValueError, match="must not carry records"):
        encode_fetch_response(
            [], [EncodedPartition(head=FP(), records=b"y", tail=FP(records=b"x"))]
        )


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16383, 16384, 2**21, 2**28 + 5, 2**35])
def test_varint_is_protobufs(n: int) -> None:
    assert varint(n) == _VarintBytes(n)


def test_varint_refuses_a_negative_length() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        varint(-1)


class _Target:
    def __init__(self) -> None:
        self.generic: list[Any] = []
        self.methods: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, methods: dict[str, Any]) -> None:
        assert service == BROKER_SERVICE
        self.methods.update(methods)


def test_fetch_handlers_send_the_encoded_bytes_the_others_are_generated() -> None:
    service: Any = _ServiceStub()
    target = _Target()
    add_broker_service(service, target)
    assert set(target.methods) == {
        "Metadata",
        "Produce",
        "Fetch",
        "ListOffsets",
        "OffsetsForLeaderEpoch",
        "InitProducerId",
        "ProduceStream",
        "FetchStream",
    }
    fetch, stream = target.methods["Fetch"], target.methods["FetchStream"]
    assert fetch.unary_unary == service.fetch_encoded and fetch.response_serializer is None
    assert stream.stream_stream == service.fetch_stream_encoded
    assert stream.response_serializer is None
    assert fetch.request_deserializer == broker_pb2.FetchRequest.FromString
    produce = target.methods["Produce"]
    assert produce.unary_unary == service.Produce
    assert produce.response_serializer == broker_pb2.ProduceResponse.SerializeToString
    # The generic handler answers the same methods (a server without registered methods).
    [generic] = target.generic
    details: Any = type("D", (), {"method": f"/{BROKER_SERVICE}/Fetch"})()
    assert generic.service(details).response_serializer is None


class _ServiceStub:
    """Only the attributes the registration reads."""

    def __getattr__(self, name: str) -> Any:
        return f"method {name}"
