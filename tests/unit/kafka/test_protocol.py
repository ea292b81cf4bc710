"""Kafka's framing and request headers (headwater.kafka.protocol), with a fuzz test."""

from __future__ import annotations

import contextlib
import datetime
import io
import struct
import sys
import uuid

import pytest
from headwater.kafka import protocol as p
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.api_versions.v0 import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3 import ApiVersionsRequest, ApiVersionsResponse
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.request_header.v2 import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer


def _frame(header: object, body: object) -> bytes:
    out = io.BytesIO()
    entity_writer(type(header))(out, header)
    entity_writer(type(body))(out, body)
    return out.getvalue()


def _metadata_v12(correlation_id: int = 7) -> bytes:
    return _frame(
        RequestHeaderV2(
            request_api_key=3, request_api_version=12, correlation_id=correlation_id, client_id="c"
        ),
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="orders"),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )


def test_frame_size_accepts_zero_to_the_limit() -> None:
    assert p.frame_size(struct.pack(">i", 0), max_bytes=10) == 0
    assert p.frame_size(struct.pack(">i", 10), max_bytes=10) == 10


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (struct.pack(">i", -1), "negative frame size -1"),
        (struct.pack(">i", 11), "larger than socket.request.max.bytes (10)"),
        (b"\0\0\0", "size prefix of 3 bytes"),
    ],
)
def test_frame_size_refuses(prefix: bytes, message: str) -> None:
    with pytest.raises(p.FrameError, match=message.replace("(", r"\(").replace(")", r"\)")):
        p.frame_size(prefix, max_bytes=10)


def test_a_flexible_request_decodes_with_header_v2() -> None:
    request = p.parse_request(_metadata_v12())
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 12, 7)
    assert request.client_id == "c"
    assert request.body.topics[0].name == "orders"
    assert not request.version_fallback


def test_api_versions_above_the_range_falls_back_to_v0_with_unsupported_version() -> None:
    frame = struct.pack(">hhih", 18, 99, 41, -1) + b"whatever the body"
    request = p.parse_request(frame)
    assert request.version_fallback and request.correlation_id == 41
    response = p.encode_response(41, p.unsupported_api_versions_response())
    size, correlation_id = struct.unpack_from(">ii", response)
    assert size == len(response) - 4 and correlation_id == 41
    body, _ = entity_reader(ApiVersionsResponseV0)(response, 8)
    assert body.error_code.value == p.UNSUPPORTED_VERSION
    # KIP-511: only ApiVersions' own range, as Kafka's ApiVersionsRequest.getErrorResponse.
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [
        (18, *p.SUPPORTED[18])
    ]


def test_api_versions_v3_answers_with_response_header_v0() -> None:
    frame = _frame(
        RequestHeaderV2(
            request_api_key=18, request_api_version=3, correlation_id=3, client_id=None
        ),
        ApiVersionsRequest(client_software_name="t", client_software_version="1"),
    )
    request = p.parse_request(frame)
    response = p.encode_response(request.correlation_id, p.api_versions_response(3))
    assert struct.unpack_from(">i", response, 4)[0] == 3
    body, used = entity_reader(ApiVersionsResponse)(response, 8)  # no header tagged fields
    assert 8 + used == len(response)
    assert body.error_code.value == 0


def test_api_versions_v3_finalizes_transaction_version_2() -> None:
    """What Kafka's 4.x producer reads to use transaction version 2: the finalized
    ``transaction.version`` at 2 with an epoch above -1, Produce above v11 and
    TxnOffsetCommit above v4."""
    response = p.encode_response(1, p.api_versions_response(3))
    body, _ = entity_reader(ApiVersionsResponse)(response, 8)
    assert [(f.name, f.min_version, f.max_version) for f in body.supported_features] == [
        ("transaction.version", 0, 2)
    ]
    assert [
        (f.name, f.min_version_level, f.max_version_level) for f in body.finalized_features
    ] == [("transaction.version", 2, 2)]
    assert body.finalized_features_epoch >= 0
    versions = {k.api_key: k.max_version for k in body.api_keys}
    assert versions[0] > 11 and versions[28] > 4 and versions[26] >= 5


def test_api_versions_below_v3_has_no_features() -> None:
    for version in range(3):
        answer = p.api_versions_response(version)
        assert not hasattr(answer, "finalized_features")
        p.encode_response(1, answer)


def test_every_transaction_version_2_form_is_supported() -> None:
    for key, first in p.TRANSACTION_VERSION_2_FROM.items():
        assert p.is_supported(key, first), (key, first)


@pytest.mark.parametrize(
    ("api_key", "version", "v2"),
    [(0, 11, False), (0, 12, True), (26, 4, False), (26, 5, True), (28, 4, False),
     (28, 5, True), (25, 4, False), (24, 5, False), (1, 12, False)],
)  # fmt: skip
def test_transaction_version_2_is_decided_by_the_requests_version(
    api_key: int, version: int, v2: bool
) -> None:
    assert p.transaction_version_2(api_key, version) is v2


def test_bytes_after_the_body_are_ignored_as_kafka_ignores_them() -> None:
    # librdkafka's Metadata v12 ends with these 3 bytes after the body's last field.
    request = p.parse_request(_metadata_v12() + b"\0\0\0")
    assert (request.api_key, request.api_version, request.correlation_id) == (3, 12, 7)
    assert request.body.topics[0].name == "orders"


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\0\x12\0", "truncated request header"),
        (struct.pack(">hhih", 99, 0, 1, -1), "unknown API key 99"),
        (struct.pack(">hhih", 0, 2, 1, -1), r"unsupported API key 0 \(Produce\) version 2"),
        (struct.pack(">hhih", 1, -1, 1, -1), r"unsupported API key 1 \(Fetch\) version -1"),
        (_metadata_v12()[:-3], "Metadata v12 request does not decode"),
    ],
)
def test_bad_frames_are_refused_with_a_reason(frame: bytes, message: str) -> None:
    with pytest.raises(p.FrameError, match=message):
        p.parse_request(frame)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_fuzz_any_bytes_decode_or_raise_frame_error(frame: bytes) -> None:
    try:
        request = p.parse_request(frame)
    except p.FrameError:
        return
    assert p.is_supported(request.api_key, request.api_version) or request.version_fallback


def _fetch_by_id(version: int) -> bytes:
    """A Fetch v13+ (topics by id) with a session, a forgotten topic and, from v15, the
    replica state; v17 adds a partition's replica directory id."""
    request_type = load_request_schema(1, version)
    m = sys.modules[request_type.__module__]
    tid = uuid.UUID("5b0c7f0e-2f55-4d8c-9a43-6b1f1c0e7a11")
    body = p.build(
        request_type,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        session_id=7,
        session_epoch=3,
        topics=(
            p.build(
                m.FetchTopic,
                topic_id=tid,
                partitions=(
                    p.build(
                        m.FetchPartition,
                        partition=0,
                        fetch_offset=42,
                        partition_max_bytes=1 << 20,
                        replica_directory_id=tid,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(p.build(m.ForgottenTopic, topic_id=tid, partitions=(1,)),),
        rack_id="r",
    )
    return _frame(
        type(body).__header_schema__(
            request_api_key=1, request_api_version=version, correlation_id=9, client_id="c"
        ),
        body,
    )


def _offset_for_leader_epoch(version: int) -> bytes:
    """An OffsetForLeaderEpoch request (v3+ carries the replica id, v4 is flexible)."""
    request_type = load_request_schema(23, version)
    m = sys.modules[request_type.__module__]
    body = p.build(
        request_type,
        replica_id=-1,
        topics=(
            m.OffsetForLeaderTopic(
                topic="orders",
                partitions=(
                    m.OffsetForLeaderPartition(partition=0, current_leader_epoch=3, leader_epoch=2),
                ),
            ),
        ),
    )
    return _frame(
        type(body).__header_schema__(
            request_api_key=23, request_api_version=version, correlation_id=5, client_id="c"
        ),
        body,
    )


@pytest.mark.parametrize("version", range(2, 5))
def test_offset_for_leader_epoch_decodes_at_each_version(version: int) -> None:
    request = p.parse_request(_offset_for_leader_epoch(version))
    assert (request.api_key, request.api_version) == (23, version)
    (part,) = request.body.topics[0].partitions
    assert (part.partition, part.current_leader_epoch, part.leader_epoch) == (0, 3, 2)
    assert getattr(request.body, "replica_id", None) == (-1 if version >= 3 else None)


VALID_FRAMES = [
    _metadata_v12(),
    *(_fetch_by_id(v) for v in range(13, 18)),
    *(_offset_for_leader_epoch(v) for v in range(2, 5)),
]


@pytest.mark.parametrize("version", range(13, 18))
def test_a_fetch_by_topic_id_decodes_at_each_version(version: int) -> None:
    request = p.parse_request(_fetch_by_id(version))
    (topic,) = request.body.topics
    assert (request.api_key, request.api_version, topic.partitions[0].fetch_offset) == (
        1,
        version,
        42,
    )
    assert request.body.forgotten_topics_data[0].topic_id == topic.topic_id


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_fuzz_a_corrupted_valid_request_decodes_or_raises_frame_error(data: st.DataObject) -> None:
    valid = data.draw(st.sampled_from(VALID_FRAMES))
    position = data.draw(st.integers(0, len(valid) - 1))
    frame = bytearray(valid)
    frame[position] = data.draw(st.integers(0, 255))
    with contextlib.suppress(p.FrameError):
        p.parse_request(bytes(frame))
    with contextlib.suppress(p.FrameError):
        p.parse_request(bytes(frame[:position]))


@given(st.binary(min_size=4, max_size=4), st.integers(0, 1 << 31))
def test_fuzz_frame_size_is_within_bounds_or_refused(prefix: bytes, max_bytes: int) -> None:
    try:
        size = p.frame_size(prefix, max_bytes=max_bytes)
    except p.FrameError:
        return
    assert 0 <= size <= max_bytes


def test_build_keeps_the_fields_a_version_has() -> None:
    v0 = p.build(ApiVersionsResponseV0, error_code=p.error_code(0), api_keys=(), throttle_time=1)
    assert v0 == ApiVersionsResponseV0(error_code=p.error_code(0), api_keys=())


def _fetch_response(version: int, records: bytes) -> object:
    m = p.response_module(1, version)
    part = p.build(
        m.PartitionData,
        partition_index=0,
        error_code=p.error_code(0),
        high_watermark=10,
        last_stable_offset=10,
        log_start_offset=0,
        aborted_transactions=(),
        preferred_read_replica=-1,
        records=records,
    )
    topic = p.build(
        m.FetchableTopicResponse, topic="t", topic_id=uuid.UUID(int=5), partitions=(part,)
    )
    return p.build(
        m.FetchResponse,
        throttle_time=p._ZERO,
        error_code=p.error_code(0),
        session_id=5,
        responses=(topic,),
    )


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16, 17])
@pytest.mark.parametrize("size", [0, 100, p.BY_REFERENCE_BYTES, 3 * p.BY_REFERENCE_BYTES])
def test_a_fetch_response_is_sent_in_chunks_with_the_records_not_copied(
    version: int, size: int
) -> None:
    records = bytes(range(256)) * (size // 256) + b"r" * (size % 256)
    body = _fetch_response(version, records)
    chunks = p.encode_response_chunks(9, body)
    frame = b"".join(chunks)
    assert any(c is records for c in chunks) == (size >= p.BY_REFERENCE_BYTES)
    size_prefix, correlation_id = struct.unpack_from(">ii", frame)
    assert size_prefix == len(frame) - 4 and correlation_id == 9
    header_bytes = 9 if version >= 12 else 8  # v12 is flexible: header tagged fields
    decoded, used = entity_reader(type(body))(frame, header_bytes)
    assert header_bytes + used == len(frame)
    assert decoded == body


def test_other_responses_are_one_chunk() -> None:
    chunks = p.encode_response_chunks(1, p.api_versions_response(3))
    assert len(chunks) == 1 and chunks[0] == p.encode_response(1, p.api_versions_response(3))
