"""Parsing and validating the data source's options, with Spark's Kafka source names.

A user of Spark's Kafka source switches by changing the format name and the
bootstrap option, so the options keep that source's names, defaults and
meaning (``subscribe``, ``startingOffsets``, ``failOnDataLoss``, ...).  Unlike
it, an unknown option or a conflicting pair fails when the query is planned,
with an :class:`OptionError` naming the option, instead of being ignored: a
typo like ``startingOffset`` would otherwise silently read from the default.

Everything here is pure (strings in, frozen values out), so it runs the same
on the driver and in unit tests.  Spark hands options over case-insensitively
(lower-cased keys); error messages use the canonical spelling.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from headwater.client.settings import COMPRESSION_TYPES, parse_acks
from headwater.client.transport.security import PLAINTEXT, ClientSecurity, from_java_properties
from headwater.client.types import TopicPartition

EARLIEST = -2
"""In offset JSON, -2 means the earliest offset (Kafka's convention)."""
LATEST = -1
"""In offset JSON, -1 means the latest offset (the high watermark)."""


class OptionError(ValueError):
    """A missing, unknown, malformed or conflicting option; the message names it."""


BoundKind = Literal["earliest", "latest", "offsets", "timestamps", "timestamp"]


@dataclasses.dataclass(frozen=True)
class OffsetBound:
    """Where a read starts or ends, before it is resolved against the cluster.

    ``offsets`` holds per-partition offsets (``-2``/``-1`` allowed) for kind
    "offsets", per-partition timestamps for kind "timestamps"; ``timestamp_ms``
    the one timestamp of kind "timestamp".  ``option`` names the option it came
    from, for error messages.
    """

    kind: BoundKind
    option: str
    offsets: Mapping[TopicPartition, int] = dataclasses.field(default_factory=dict)
    timestamp_ms: int = -1


@dataclasses.dataclass(frozen=True)
class Subscription:
    """What to read: exactly one of topics, a pattern or assigned partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.partitions)


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """A validated read (batch or streaming)."""

    bootstrap_servers: str
    subscription: Subscription
    starting: OffsetBound
    """Where the read starts (batch default earliest, streaming default latest)."""
    ending: OffsetBound
    """Where a batch read ends (default latest); unused by streaming."""
    timestamp_strategy: Literal["error", "latest"] = "error"
    """startingOffsetsByTimestampStrategy: no record at or after the time -> fail or latest."""
    fail_on_data_loss: bool = True
    """Fail when offsets were deleted (retention) or changed; false: skip and warn."""
    min_partitions: int | None = None
    """At least this many Spark partitions: big offset ranges are split."""
    max_records_per_partition: int | None = None
    """At most this many records per Spark partition: bigger ranges are split."""
    max_offsets_per_trigger: int | None = None
    """Streaming: at most this many records per micro-batch, spread across partitions."""
    include_headers: bool = False
    """Add the ``headers`` column."""
    fetch_max_bytes: int = 52428800
    """Bytes per fetch response (Kafka's fetch.max.bytes)."""
    max_partition_fetch_bytes: int = 4 * 1024 * 1024
    """Bytes per partition per fetch (bounded by fetch.max.bytes)."""
    poll_timeout_ms: int = 120000
    """How long an executor waits for a broker to return data that should exist."""
    read_committed: bool = False
    """``kafka.isolation.level=read_committed``: reads end at the last stable offset
    and skip aborted transactions' records; default read_uncommitted (everything below
    the high watermark), as Spark's Kafka source."""
    group_id: str | None = None
    """Streaming: commit processed offsets to this consumer group after each micro-batch."""
    security: ClientSecurity = PLAINTEXT
    """``kafka.security.protocol``, ``kafka.ssl.*``, ``kafka.sasl.*`` (Kafka's client names)."""


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    """A validated write (batch or streaming)."""

    bootstrap_servers: str
    topic: str | None
    """Topic for every row (overrides a ``topic`` column), or None: use the column."""
    producer: Mapping[str, Any]
    """Keyword arguments for :class:`headwater.Producer` (``acks``, ``linger_ms``, ...,
    ``security``)."""
    transactional_id_prefix: str | None = None
    """``exactly.once=true`` (streaming only): each task writes its part of a micro-batch
    in one transaction, as ``<prefix>-<partition>``, with the batch id recorded in it
    (:mod:`headwater_spark.writing`); None: at-least-once."""

    @property
    def exactly_once(self) -> bool:
        return self.transactional_id_prefix is not None


# Read options by lower-cased key -> canonical name.
_READ = {
    name.lower(): name
    for name in (
        "bootstrap.servers",
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "endingTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "failOnDataLoss",
        "minPartitions",
        "maxRecordsPerPartition",
        "maxOffsetsPerTrigger",
        "includeHeaders",
        "fetch.max.bytes",
        "kafka.fetch.max.bytes",
        "max.partition.fetch.bytes",
        "kafka.max.partition.fetch.bytes",
        "pollTimeoutMs",
        "kafkaConsumer.pollTimeoutMs",
        "groupId",
        "kafka.isolation.level",
        "isolation.level",
    )
}

# Producer settings a write passes through: option name -> Producer keyword and type.
_PRODUCER: dict[str, tuple[str, type]] = {
    "acks": ("acks", str),
    "compression.type": ("compression_type", str),
    "linger.ms": ("linger_ms", int),
    "batch.size": ("batch_size", int),
    "buffer.memory": ("buffer_memory", int),
    "max.block.ms": ("max_block_ms", int),
    "max.request.size": ("max_request_size", int),
    "max.in.flight.requests.per.connection": ("max_in_flight_requests_per_connection", int),
    "retries": ("retries", int),
    "retry.backoff.ms": ("retry_backoff_ms", int),
    "delivery.timeout.ms": ("delivery_timeout_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "enable.idempotence": ("enable_idempotence", bool),
    "transaction.timeout.ms": ("transaction_timeout_ms", int),
}

# Options Spark itself may add to a sink's options; accepted and ignored.
_SPARK_SINK_OPTIONS = frozenset({"checkpointlocation", "path", "queryname"})


def _canonical_keys(options: Mapping[str, str], known: Mapping[str, str]) -> dict[str, str]:
    """Options by canonical name; an unknown one raises naming it and listing the known."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = known.get(key.lower())
        if name is None:
            raise OptionError(
                f"unknown option {key!r} for the headwater data source; known options: "
                + ", ".join(sorted(set(known.values())))
            )
        out[name] = value
    return out


def _alias(opts: dict[str, str], name: str, alias: str) -> str | None:
    if name in opts and alias in opts:
        raise OptionError(f"options {name!r} and {alias!r} are the same setting; give only one")
    return opts.get(name, opts.get(alias))


def _bootstrap(opts: dict[str, str]) -> str:
    value = _alias(opts, "bootstrap.servers", "kafka.bootstrap.servers")
    if not value or not value.strip():
        raise OptionError("option 'bootstrap.servers' is required (host:port[,host:port...])")
    for addr in value.split(","):
        host, sep, port = addr.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise OptionError(f"option 'bootstrap.servers': bad address {addr.strip()!r}")
    return value.strip()


def _int(opts: dict[str, str], name: str, *, minimum: int) -> int | None:
    raw = opts.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be >= {minimum}, not {value}")
    return value


def _bool(opts: dict[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name!r} must be 'true' or 'false', not {raw!r}")
    return lowered == "true"


def _json(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name!r} is not valid JSON ({exc.msg}): {raw!r}") from None


def parse_partition_map(name: str, raw: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -2}}`` to ``{TopicPartition: 23, ...}``."""
    data = _json(name, raw)
    if not isinstance(data, dict) or not data:
        raise OptionError(f'option {name!r} must be a JSON object like {{"topic":{{"0":23}}}}')
    out: dict[TopicPartition, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name!r}: topic {topic!r} must map partitions to numbers")
        for key, value in parts.items():
            if not str(key).lstrip("-").isdigit() or int(key) < 0:
                raise OptionError(f"option {name!r}: bad partition {key!r} of topic {topic!r}")
            if isinstance(value, bool) or not isinstance(value, int):
                raise OptionError(
                    f"option {name!r}: value for {topic}-{key} must be an integer, not {value!r}"
                )
            out[TopicPartition(topic, int(key))] = value
    return out


def _subscription(opts: dict[str, str]) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n in opts]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' is required"
            + (f"; got {', '.join(repr(g) for g in given)}" if given else "")
        )
    kind = given[0]
    raw = opts[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' must list at least one topic")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not raw.strip():
            raise OptionError("option 'subscribePattern' must not be empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription("subscribePattern", pattern=raw)
    data = _json("assign", raw)
    if not isinstance(data, dict) or not data:
        raise OptionError("option 'assign' must be a JSON object like {\"topic\":[0,1]}")
    tps: list[TopicPartition] = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
        ):
            raise OptionError(f"option 'assign': topic {topic!r} must map to a list of partitions")
        tps.extend(TopicPartition(topic, p) for p in parts)
    return Subscription("assign", partitions=tuple(sorted(set(tps))))


def _bound(opts: dict[str, str], *, starting: bool, streaming: bool) -> OffsetBound:
    prefix = "starting" if starting else "ending"
    names = (f"{prefix}Timestamp", f"{prefix}OffsetsByTimestamp", f"{prefix}Offsets")
    given = [n for n in names if n in opts]
    if len(given) > 1:
        raise OptionError(
            f"options {' and '.join(repr(g) for g in given)} conflict; give only one of them"
        )
    if not given:
        default: BoundKind = "latest" if (streaming or not starting) else "earliest"
        return OffsetBound(default, option=f"{prefix}Offsets")
    name = given[0]
    raw = opts[name]
    if name.endswith("Timestamp") and not name.endswith("ByTimestamp"):
        try:
            ts = int(raw.strip())
        except ValueError:
            raise OptionError(f"option {name!r} must be a timestamp in ms, not {raw!r}") from None
        if ts < 0:
            raise OptionError(f"option {name!r} must be >= 0, not {ts}")
        return OffsetBound("timestamp", option=name, timestamp_ms=ts)
    if name.endswith("ByTimestamp"):
        stamps = parse_partition_map(name, raw)
        bad = [f"{tp}={ts}" for tp, ts in stamps.items() if ts < 0]
        if bad:
            raise OptionError(f"option {name!r}: timestamps must be >= 0 ({', '.join(bad)})")
        return OffsetBound("timestamps", option=name, offsets=stamps)
    lowered = raw.strip().lower()
    if lowered in ("earliest", "latest"):
        if not streaming and starting and lowered == "latest":
            raise OptionError("option 'startingOffsets' cannot be 'latest' for a batch read")
        if not streaming and not starting and lowered == "earliest":
            raise OptionError("option 'endingOffsets' cannot be 'earliest' for a batch read")
        return OffsetBound("earliest" if lowered == "earliest" else "latest", option=name)
    offsets = parse_partition_map(name, raw)
    for tp, off in offsets.items():
        if off < EARLIEST:
            raise OptionError(f"option {name!r}: offset {off} for {tp} is not valid")
        if not streaming and starting and off == LATEST:
            raise OptionError(f"option {name!r}: -1 (latest) is not allowed for a batch start")
        if not starting and off == EARLIEST:
            raise OptionError(f"option {name!r}: -2 (earliest) is not allowed as an end")
    return OffsetBound("offsets", option=name, offsets=offsets)


def _split_security(options: Mapping[str, str]) -> tuple[ClientSecurity, dict[str, str]]:
    """The ``kafka.security.*``, ``kafka.ssl.*`` and ``kafka.sasl.*`` options as a
    :class:`ClientSecurity`, and the other options."""
    security: dict[str, str] = {}
    rest: dict[str, str] = {}
    for key, value in options.items():
        lowered = key.lower()
        if lowered.startswith(("kafka.security.", "kafka.ssl.", "kafka.sasl.")):
            security[lowered] = value
        else:
            rest[key] = value
    try:
        return from_java_properties(security, prefix="kafka."), rest
    except ValueError as exc:
        raise OptionError(f"option {exc}") from None


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate the options of a read; raise :class:`OptionError` naming a bad one."""
    security, options = _split_security(options)
    opts = _canonical_keys(options, _READ)
    bootstrap = _bootstrap(opts)
    subscription = _subscription(opts)
    starting = _bound(opts, starting=True, streaming=streaming)
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name in opts:
                raise OptionError(f"option {name!r} is for batch reads; a stream has no end")
        ending = OffsetBound("latest", option="endingOffsets")
    else:
        ending = _bound(opts, starting=False, streaming=False)
        for name in ("maxOffsetsPerTrigger", "groupId"):
            if name in opts:
                raise OptionError(f"option {name!r} is for streaming reads only")
    strategy = opts.get("startingOffsetsByTimestampStrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            "option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"not {opts['startingOffsetsByTimestampStrategy']!r}"
        )
    fetch_max = _alias(opts, "fetch.max.bytes", "kafka.fetch.max.bytes")
    part_max = _alias(opts, "max.partition.fetch.bytes", "kafka.max.partition.fetch.bytes")
    poll = _alias(opts, "pollTimeoutMs", "kafkaConsumer.pollTimeoutMs")
    sized = {
        "fetch.max.bytes": fetch_max,
        "max.partition.fetch.bytes": part_max,
        "pollTimeoutMs": poll,
    }
    numbers = {k: v for k, v in sized.items() if v is not None}
    fetch_max_bytes = _int(numbers, "fetch.max.bytes", minimum=1) or 52428800
    partition_bytes = _int(numbers, "max.partition.fetch.bytes", minimum=1)
    if partition_bytes is None:
        partition_bytes = min(fetch_max_bytes, 4 * 1024 * 1024)
    isolation = _alias(opts, "kafka.isolation.level", "isolation.level") or "read_uncommitted"
    if isolation.strip().lower() not in ("read_committed", "read_uncommitted"):
        raise OptionError(
            "option 'kafka.isolation.level' must be 'read_committed' or 'read_uncommitted', "
            f"not {isolation!r}"
        )
    group_id = opts.get("groupId")
    if group_id is not None and not group_id.strip():
        raise OptionError("option 'groupId' must not be empty")
    return ReadOptions(
        bootstrap_servers=bootstrap,
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy="latest" if strategy == "latest" else "error",
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        min_partitions=_int(opts, "minPartitions", minimum=1),
        max_records_per_partition=_int(opts, "maxRecordsPerPartition", minimum=1),
        max_offsets_per_trigger=_int(opts, "maxOffsetsPerTrigger", minimum=1),
        include_headers=_bool(opts, "includeHeaders", False),
        fetch_max_bytes=fetch_max_bytes,
        max_partition_fetch_bytes=min(partition_bytes, fetch_max_bytes),
        poll_timeout_ms=_int(numbers, "pollTimeoutMs", minimum=1) or 120000,
        read_committed=isolation.strip().lower() == "read_committed",
        group_id=group_id.strip() if group_id is not None else None,
        security=security,
    )


class ClientIds(NamedTuple):
    """The ``client.id`` of one read's clients: the driver's and the executors'."""

    driver: str
    executor: str


def client_ids(*, streaming: bool, nonce: str | None = None) -> ClientIds:
    """The client ids of a new read, named as Spark's Kafka source names a read's
    consumers (``spark-kafka-relation-<uuid>`` for a batch, ``spark-kafka-source-<uuid>``
    for a stream, ``-driver`` and ``-executor`` after it): ``headwater-spark-relation-``
    or ``headwater-spark-source-`` and a random ``nonce``, so that quotas and the brokers'
    logs tell one query's clients from another's."""
    base = f"headwater-spark-{'source' if streaming else 'relation'}-{nonce or uuid.uuid4()}"
    return ClientIds(f"{base}-driver", f"{base}-executor")


def include_headers(options: Mapping[str, str]) -> bool:
    """Just the ``includeHeaders`` flag (the schema needs it before full validation)."""
    for key, value in options.items():
        if key.lower() == "includeheaders":
            return value.strip().lower() == "true"
    return False


def parse_write_options(options: Mapping[str, str], *, streaming: bool = False) -> WriteOptions:
    """Validate the options of a write; producer settings pass through to the Producer."""
    security, options = _split_security(options)
    known = {
        n.lower(): n
        for n in (
            "bootstrap.servers",
            "kafka.bootstrap.servers",
            "topic",
            "exactly.once",
            "transactional.id.prefix",
        )
    }
    for name in _PRODUCER:
        known[name] = name
        known[f"kafka.{name}"] = f"kafka.{name}"
    opts: dict[str, str] = {}
    for key, value in options.items():
        if key.lower() in _SPARK_SINK_OPTIONS:
            continue
        opts.update(_canonical_keys({key: value}, known))
    bootstrap = _bootstrap(opts)
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' must not be empty")
    producer: dict[str, Any] = {"acks": "all"}
    if security != PLAINTEXT:
        producer["security"] = security
    for name, (kwarg, kind) in _PRODUCER.items():
        raw = _alias(opts, name, f"kafka.{name}")
        if raw is None:
            continue
        if kind is int:
            producer[kwarg] = _int({name: raw}, name, minimum=0)
        elif kind is bool:
            producer[kwarg] = _bool({name: raw}, name, False)
        else:
            producer[kwarg] = raw.strip()
    try:
        parse_acks(producer["acks"])
    except ValueError as exc:
        raise OptionError(f"option 'acks': {exc}") from None
    codec = producer.get("compression_type", "none")
    if codec not in COMPRESSION_TYPES:
        raise OptionError(
            f"option 'compression.type' must be one of {', '.join(COMPRESSION_TYPES)}, "
            f"not {codec!r}"
        )
    return WriteOptions(
        bootstrap_servers=bootstrap,
        topic=topic.strip() if topic is not None else None,
        producer=producer,
        transactional_id_prefix=_transactional_prefix(opts, producer, streaming=streaming),
    )


def _transactional_prefix(
    opts: dict[str, str], producer: Mapping[str, Any], *, streaming: bool
) -> str | None:
    """``transactional.id.prefix`` when ``exactly.once=true`` (checked), else None."""
    prefix = opts.get("transactional.id.prefix")
    if not _bool(opts, "exactly.once", False):
        if prefix is not None or "transaction_timeout_ms" in producer:
            raise OptionError(
                "options 'transactional.id.prefix' and 'transaction.timeout.ms' need "
                "'exactly.once' = 'true'"
            )
        return None
    if not streaming:
        raise OptionError(
            "option 'exactly.once' is for streaming writes (writeStream): a batch write has "
            "no batch id to record"
        )
    if prefix is None or not prefix.strip():
        raise OptionError(
            "option 'exactly.once' needs 'transactional.id.prefix': a name unique to the "
            "query and kept across its restarts (the tasks' transactional ids and the "
            "group recording written batches are named after it)"
        )
    if parse_acks(producer["acks"]) != -1:
        raise OptionError("option 'exactly.once' needs acks=all (Kafka's transactions do)")
    if producer.get("enable_idempotence") is False:
        raise OptionError("option 'exactly.once' needs enable.idempotence (transactions do)")
    return prefix.strip()
