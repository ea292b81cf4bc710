"""Kafka's wire protocol: framing, request headers and what to do with each request.

Pure: bytes in, decisions and bytes out; the socket is :mod:`headwater.kafka.server`'s.
The message types are ``kio``'s, generated from Kafka's own JSON message schemas, so
flexible versions (compact strings and arrays, tagged fields) and the request and
response header versions of each API version are Kafka's, not written here.

A request on the wire is a 4-byte big-endian size and that many bytes: the request
header (v1: api key, api version, correlation id, client id; v2 adds tagged fields and
is used by the flexible versions) and the body.  A response is a size, the response
header (v0: the correlation id; v1 adds tagged fields) and the body.  ApiVersions
always answers with header v0, whatever its version, so that a client can read the
answer before it knows which versions the broker speaks.

Decisions, as Kafka's ``SocketServer`` and ``KafkaApis`` make them:

* a size below zero or above ``socket.request.max.bytes`` closes the connection
  (:class:`FrameError`), as does a frame whose header or body does not decode or
  leaves bytes over;
* ApiVersions at a version above the highest supported is answered, at version 0,
  with UNSUPPORTED_VERSION and ApiVersions' own range (KIP-511: the client retries at
  the highest version both speak);
* any other API key or version outside :data:`SUPPORTED` closes the connection
  (Kafka: "Unsupported API key" / InvalidRequestException), since no response of
  that API at that version can be written; clients only send what ApiVersions
  listed.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import io
import logging
import struct
from collections.abc import Mapping
from types import ModuleType
from typing import IO, Any, Final, cast

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.constants import EntityType

log = logging.getLogger(__name__)

DEFAULT_MAX_REQUEST_BYTES: Final = 104_857_600
"""Kafka's default ``socket.request.max.bytes``."""

API_VERSIONS: Final = 18
UNSUPPORTED_VERSION: Final = 35

API_NAMES: Final = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    17: "SaslHandshake",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    21: "DeleteRecords",
    22: "InitProducerId",
    23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    35: "DescribeLogDirs",
    36: "SaslAuthenticate",
    37: "CreatePartitions",
    42: "DeleteGroups",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    47: "OffsetDelete",
    48: "DescribeClientQuotas",
    49: "AlterClientQuotas",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    60: "DescribeCluster",
    61: "DescribeProducers",
    65: "DescribeTransactions",
    66: "ListTransactions",
    68: "ConsumerGroupHeartbeat",
    69: "ConsumerGroupDescribe",
}

SUPPORTED: Final[Mapping[int, tuple[int, int]]] = {
    0: (3, 12),  # Produce: RecordBatch (v2 records) only; v12 is transaction version 2
    1: (4, 17),  # Fetch: v13+ by topic id, v15 replica_state, v16 KIP-951 leader hints
    2: (1, 7),  # ListOffsets
    3: (0, 12),  # Metadata: v13 adds a top-level error code for KIP-1102 rebootstrap
    8: (2, 8),  # OffsetCommit: v9+ is KIP-848's member epoch
    9: (1, 7),  # OffsetFetch: v8+ batches groups
    10: (0, 4),  # FindCoordinator
    11: (4, 9),  # JoinGroup: from v4 a new member rejoins with its member id
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups: v5 filters by group type (KIP-848)
    17: (0, 1),  # SaslHandshake: v0 is followed by raw SASL tokens, v1 by SaslAuthenticate
    18: (0, 3),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics: v6 names topics by name or by id
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId: v5 is transaction version 2 (KIP-890); v6 is 2PC (KIP-939)
    23: (2, 4),  # OffsetForLeaderEpoch: v0-v1 are gone from Kafka 4 (KIP-896); v3 replica_id
    24: (0, 5),  # AddPartitionsToTxn: v0-v3 clients, v4+ brokers
    25: (0, 4),  # AddOffsetsToTxn
    26: (0, 5),  # EndTxn: v5 bumps the epoch (transaction version 2)
    28: (0, 5),  # TxnOffsetCommit: v5 adds the group's partition itself (version 2)
    29: (1, 3),  # DescribeAcls: v0 (no pattern types) is gone from Kafka 4 (KIP-896)
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs: topics and brokers
    33: (0, 2),  # AlterConfigs
    35: (1, 4),  # DescribeLogDirs: this broker's log dirs
    36: (0, 2),  # SaslAuthenticate: v1 adds the session lifetime (KIP-368)
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    43: (0, 2),  # ElectLeaders: preferred elections
    44: (0, 1),  # IncrementalAlterConfigs
    45: (0, 0),  # AlterPartitionReassignments: v1 may change the replication factor
    46: (0, 0),  # ListPartitionReassignments
    47: (0, 0),  # OffsetDelete
    48: (0, 1),  # DescribeClientQuotas
    49: (0, 1),  # AlterClientQuotas
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 1),  # DescribeCluster: brokers (there are no KRaft controllers)
    61: (0, 0),  # DescribeProducers
    65: (0, 0),  # DescribeTransactions
    66: (0, 1),  # ListTransactions: v2 filters by a transactional id pattern (KIP-1152)
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848): v1 adds the topic regex
    69: (0, 1),  # ConsumerGroupDescribe
}
"""API key -> (lowest, highest) version this listener answers; what ApiVersions lists."""

TRANSACTION_VERSION_FEATURE: Final = "transaction.version"
TRANSACTION_VERSION: Final = 2
"""The ``transaction.version`` feature level this listener supports and finalizes.

Level 2 is KIP-890 part 2, which Kafka's 4.x clients use once a broker's ApiVersions
finalizes it (with Produce above v11 and TxnOffsetCommit above v4): the producer sends
no AddPartitionsToTxn or AddOffsetsToTxn (Produce v12 and TxnOffsetCommit v5 make the
partition leader and group coordinator add the partition), and EndTxn v5 bumps the
producer's epoch and answers the new one.  Which rules a request follows is decided by
its version, as Kafka's broker does, so a transaction version 1 client (Produce v11 and
below, EndTxn v4 and below) keeps its own rules on the same broker."""

TRANSACTION_VERSION_2_FROM: Final[Mapping[int, int]] = {0: 12, 26: 5, 28: 5}
"""API key -> the first version that follows transaction version 2's rules."""

FINALIZED_FEATURES_EPOCH: Final = 1
"""ApiVersions' ``finalized_features_epoch``: the finalized features never change here,
and a client takes them only from an epoch above -1 (no features)."""


def transaction_version_2(api_key: int, api_version: int) -> bool:
    """Whether a request of ``api_key`` at ``api_version`` follows transaction version 2."""
    first = TRANSACTION_VERSION_2_FROM.get(api_key)
    return first is not None and api_version >= first


_PREFIX = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")
_ZERO = datetime.timedelta(0)


class FrameError(Exception):
    """A frame that cannot be served: the connection is closed, the message logged."""


def frame_size(prefix: bytes, *, max_bytes: int) -> int:
    """The size announced by a frame's 4-byte prefix; refuses negative and too-large sizes."""
    if len(prefix) != _PREFIX.size:
        raise FrameError(f"size prefix of {len(prefix)} bytes, expected 4")
    (size,) = _PREFIX.unpack(prefix)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_bytes:
        raise FrameError(
            f"frame of {size} bytes is larger than socket.request.max.bytes ({max_bytes})"
        )
    return int(size)


def is_supported(api_key: int, api_version: int) -> bool:
    span = SUPPORTED.get(api_key)
    return span is not None and span[0] <= api_version <= span[1]


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: its header fields and its body (a ``kio`` entity).

    ``body`` is None exactly when ``version_fallback`` is set: an ApiVersions request at
    a version this listener does not speak, answered at v0 without reading its body.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    version_fallback: bool = False

    @property
    def api_name(self) -> str:
        return API_NAMES.get(self.api_key, f"api key {self.api_key}")


def parse_request(frame: bytes) -> Request:
    """Decode one frame (without its size prefix); :class:`FrameError` if it cannot be served.

    Bytes after the body's last field are ignored, as Kafka's broker ignores them.
    """
    if len(frame) < _HEADER_START.size:
        raise FrameError(f"truncated request header ({len(frame)} bytes)")
    api_key, api_version, correlation_id = _HEADER_START.unpack_from(frame)
    if not is_supported(api_key, api_version):
        if api_key == API_VERSIONS and api_version > SUPPORTED[API_VERSIONS][1]:
            return Request(api_key, api_version, correlation_id, None, None, True)
        name = API_NAMES.get(api_key)
        raise FrameError(
            f"unsupported API key {api_key} ({name}) version {api_version}"
            if name
            else f"unknown API key {api_key} (version {api_version})"
        )
    schema = _request_schema(api_key, api_version)
    try:
        header, used = entity_reader(schema.__header_schema__)(frame, 0)
        body, body_used = entity_reader(schema)(frame, used)
    except (SerialError, ValueError, OverflowError, KeyError) as exc:
        # KeyError: kio refuses tagged fields its schema does not name (Kafka skips them).
        raise FrameError(
            f"{API_NAMES[api_key]} v{api_version} request does not decode: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    trailing = len(frame) - used - body_used
    if trailing:
        # Kafka's broker reads a request's fields and ignores what follows them
        # (librdkafka's Metadata v12 carries 3 such bytes).
        log.debug(
            "ignoring %d bytes after the body of a %s v%d request",
            trailing,
            API_NAMES[api_key],
            api_version,
        )
    return Request(api_key, api_version, correlation_id, header.client_id, body)


@functools.cache
def _request_schema(api_key: int, api_version: int) -> Any:
    """``kio``'s request type of a supported API version (kio resolves it by import path
    on every call: here once)."""
    return load_request_schema(api_key, api_version)


@functools.cache
def response_module(api_key: int, api_version: int) -> ModuleType:
    """The ``kio`` module of an API version's response types (its nested entities too)."""
    return load_payload_module(api_key, api_version, EntityType.response)


def build(entity_type: Any, /, **values: Any) -> Any:
    """An entity of ``entity_type`` from those of ``values`` the type has.

    One handler serves every version of an API: it passes every field any version has
    and each version's type keeps its own (the others keep their schema defaults).
    """
    names = _field_names(entity_type)
    return entity_type(**{k: v for k, v in values.items() if k in names})


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _field_names(entity_type: type) -> frozenset[str]:
    names = _FIELD_NAMES.get(entity_type)
    if names is None:
        names = _FIELD_NAMES[entity_type] = frozenset(
            f.name for f in dataclasses.fields(entity_type)
        )
    return names


def error_code(code: int) -> KioErrorCode:
    """Headwater's error codes are Kafka's numbers."""
    return KioErrorCode(int(code))


BY_REFERENCE_BYTES: Final = 16_384
"""A value this large written while encoding a response (the records of a Fetch
response) becomes a chunk of its own, kept by reference rather than copied."""


class _ResponseChunks:
    """The ``write`` target of a response's encoding: small writes gather in a buffer,
    each value of :data:`BY_REFERENCE_BYTES` or more is its own chunk (not copied).

    Invariant: ``b"".join(chunks)`` after :meth:`close` is the frame, its size prefix
    (4 bytes reserved at the start) filled in.
    """

    __slots__ = ("_small", "chunks", "size")

    def __init__(self) -> None:
        self._small = bytearray(_PREFIX.size)
        self.chunks: list[bytes | bytearray | memoryview] = []
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        n = len(data)
        if n >= BY_REFERENCE_BYTES:
            self.chunks.append(self._small)
            self._small = bytearray()
            self.chunks.append(data)
        else:
            self._small += data
        self.size += n
        return n

    def close(self) -> list[bytes | bytearray | memoryview]:
        if self._small:
            self.chunks.append(self._small)
        first = self.chunks[0]
        assert isinstance(first, bytearray)
        _PREFIX.pack_into(first, 0, self.size)
        return self.chunks


CARRY_RECORDS: Final = frozenset({1})
"""The APIs whose responses carry record bytes (Fetch): encoded into chunks, the records
not copied.  The others are encoded into one buffer (each of their many small writes
costs less there)."""


def encode_response_chunks(correlation_id: int, body: Any) -> list[bytes | bytearray | memoryview]:
    """The size-prefixed response frame as the chunks to send in order: the header its
    API version uses, then ``body``; record bytes (:data:`CARRY_RECORDS`) are not copied."""
    entity_type = type(body)
    header_type = entity_type.__header_schema__
    if entity_type.__api_key__ in CARRY_RECORDS:
        chunks = _ResponseChunks()
        target = cast(IO[bytes], chunks)  # kio's writers call only write()
        entity_writer(header_type)(target, header_type(correlation_id=correlation_id))
        entity_writer(entity_type)(target, body)
        return chunks.close()
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    entity_writer(header_type)(out, header_type(correlation_id=correlation_id))
    entity_writer(entity_type)(out, body)
    frame = out.getbuffer()
    _PREFIX.pack_into(frame, 0, len(frame) - _PREFIX.size)
    del frame
    return [out.getvalue()]


def encode_response(correlation_id: int, body: Any) -> bytes:
    """The size-prefixed response frame: the header its API version uses, then ``body``."""
    return b"".join(encode_response_chunks(correlation_id, body))


def encode_raw(token: bytes) -> bytes:
    """A size-prefixed raw SASL token (the SCRAM answers after SaslHandshake v0)."""
    return _PREFIX.pack(len(token)) + token


def api_versions_response(api_version: int) -> Any:
    """ApiVersions' answer at ``api_version``: every key of :data:`SUPPORTED` and its range."""
    module = response_module(API_VERSIONS, api_version)
    keys = tuple(
        build(module.ApiVersion, api_key=key, min_version=low, max_version=high)
        for key, (low, high) in sorted(SUPPORTED.items())
    )
    return build(
        load_response_schema(API_VERSIONS, api_version),
        error_code=error_code(0),
        api_keys=keys,
        throttle_time=_ZERO,
        **_features(module, api_version),
    )


def _features(module: ModuleType, api_version: int) -> dict[str, Any]:
    """ApiVersions v3+'s tagged feature fields: ``transaction.version`` supported from 0
    to :data:`TRANSACTION_VERSION` and finalized at it."""
    if api_version < 3:
        return {}
    return {
        "supported_features": (
            build(
                module.SupportedFeatureKey,
                name=TRANSACTION_VERSION_FEATURE,
                min_version=0,
                max_version=TRANSACTION_VERSION,
            ),
        ),
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": (
            build(
                module.FinalizedFeatureKey,
                name=TRANSACTION_VERSION_FEATURE,
                max_version_level=TRANSACTION_VERSION,
                min_version_level=TRANSACTION_VERSION,
            ),
        ),
    }


def unsupported_api_versions_response() -> Any:
    """Kafka's answer to an ApiVersions version it does not speak (KIP-511): v0,
    UNSUPPORTED_VERSION and the ApiVersions key's range alone, from which the client picks
    the version to retry with (Kafka's ``ApiVersionsRequest.getErrorResponse``)."""
    module = response_module(API_VERSIONS, 0)
    low, high = SUPPORTED[API_VERSIONS]
    return build(
        module.ApiVersionsResponse,
        error_code=error_code(UNSUPPORTED_VERSION),
        api_keys=(
            build(module.ApiVersion, api_key=API_VERSIONS, min_version=low, max_version=high),
        ),
        throttle_time=_ZERO,
    )
