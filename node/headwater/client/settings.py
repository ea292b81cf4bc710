"""Typed client settings, one frozen dataclass per client, with Kafka's names and units.

The constructors of :class:`~headwater.client.producer.producer.Producer` and
:class:`~headwater.client.consumer.consumer.Consumer` take Kafka's settings as keyword
arguments (``linger_ms``, ``batch_size``, ...) and build these objects, which
validate every value once, up front: a bad setting fails the constructor with a
``ValueError`` naming it instead of misbehaving later on a background thread.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from headwater.retry import RetryPolicy

COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
OFFSET_RESETS = ("latest", "earliest", "none")
GROUP_PROTOCOLS = ("classic", "consumer")

Acks = Literal["all", -1, 0, 1]


def parse_bootstrap(bootstrap_servers: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``"h:p,h:p"`` (or a list of ``"h:p"``) to a tuple of addresses; checks the form."""
    items = (
        bootstrap_servers.split(",") if isinstance(bootstrap_servers, str) else bootstrap_servers
    )
    out: list[str] = []
    for raw in items:
        addr = raw.strip()
        if not addr:
            continue
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad bootstrap address {addr!r}; expected HOST:PORT")
        out.append(addr)
    if not out:
        raise ValueError("bootstrap_servers is empty; expected HOST:PORT[,HOST:PORT...]")
    return tuple(out)


def parse_acks(acks: str | int) -> int:
    """Kafka's ``acks``: ``"all"``/-1 (whole ISR), 1 (leader), 0 (no answer) to -1/1/0."""
    if acks in ("all", "-1", -1):
        return -1
    if acks in (1, "1"):
        return 1
    if acks in (0, "0"):
        return 0
    raise ValueError(f"acks must be 'all', -1, 0 or 1, not {acks!r}")


def _positive(name: str, value: int, *, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, not {value}")


@dataclasses.dataclass(frozen=True)
class ProducerSettings:
    """Everything that governs a producer (Kafka's producer configs, same meaning)."""

    bootstrap_servers: tuple[str, ...]
    """Brokers to ask for metadata first; any one that answers is enough."""
    acks: int = -1
    """-1: the whole ISR has the record; 1: the leader has it; 0: fire and forget."""
    linger_ms: int = 5
    """How long a batch that is not full waits for more records before it is sent."""
    batch_size: int = 16384
    """Bytes per partition batch; a full batch is sent at once, whatever ``linger_ms``."""
    buffer_memory: int = 32 * 1024 * 1024
    """Bytes of unsent records the producer holds before ``send`` blocks."""
    max_block_ms: int = 60000
    """How long ``send`` may block for buffer space or metadata before it fails."""
    compression_type: str = "none"
    """Per-batch codec: none, gzip, snappy, lz4 or zstd."""
    max_in_flight_requests_per_connection: int = 5
    """Unacknowledged produce requests per broker (at most 5 with idempotence)."""
    delivery_timeout_ms: int = 120000
    """Upper bound from ``send`` to success or failure, retries included."""
    request_timeout_ms: int = 30000
    """How long to wait for one produce answer before treating the request as lost."""
    enable_idempotence: bool = True
    """Producer id + sequence numbers so retries never duplicate (needs acks=all)."""
    sequence_acks_1: bool = False
    """With acks=1, still number batches (producer id + sequences) so that several
    batches of a partition can be in flight while a retry keeps their order.  Set by
    ``Producer`` when ``enable_idempotence`` was left unset; see :attr:`sequenced`."""
    max_request_size: int = 1024 * 1024
    """Largest single record (encoded) that ``send`` accepts."""
    metadata_max_age_ms: int = 300000
    """Refresh metadata at least this often even without errors."""
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    """Retries and backoff (``retries``, ``retry_backoff_ms``)."""

    def __post_init__(self) -> None:
        parse_acks(self.acks)
        _positive("linger_ms", self.linger_ms, allow_zero=True)
        _positive("batch_size", self.batch_size)
        _positive("buffer_memory", self.buffer_memory)
        _positive("max_block_ms", self.max_block_ms, allow_zero=True)
        _positive("delivery_timeout_ms", self.delivery_timeout_ms)
        _positive("request_timeout_ms", self.request_timeout_ms)
        _positive("max_request_size", self.max_request_size)
        _positive(
            "max_in_flight_requests_per_connection", self.max_in_flight_requests_per_connection
        )
        if self.compression_type not in COMPRESSION_TYPES:
            raise ValueError(
                f"compression_type must be one of {', '.join(COMPRESSION_TYPES)}, "
                f"not {self.compression_type!r}"
            )
        if self.enable_idempotence:
            if self.acks != -1:
                raise ValueError("enable_idempotence=True needs acks='all'")
            if self.max_in_flight_requests_per_connection > 5:
                raise ValueError(
                    "enable_idempotence=True allows max_in_flight_requests_per_connection <= 5"
                )
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ValueError("delivery_timeout_ms must be >= linger_ms + request_timeout_ms")

    @property
    def max_in_flight_per_partition(self) -> int:
        """How many batches of one partition may be sent and unresolved at once.

        With sequence numbers (:attr:`sequenced`),
        ``max_in_flight_requests_per_connection`` (at most 5): sequence numbers
        let the broker refuse a batch that overtook a failed one,
        and the client resends both in order.  Without retries (``retries=0``) or
        answers (``acks=0``) nothing is resent, so batches pipeline the same way.
        Otherwise 1: without sequence numbers a retried batch could land after a
        later one.  Kafka pipelines there too and accepts the reordering;
        Headwater keeps a partition's records in order instead, at the cost of
        one batch per partition per round trip.
        """
        if self.sequenced or self.retry.retries == 0 or self.acks == 0:
            return self.max_in_flight_requests_per_connection
        return 1

    @property
    def sequenced(self) -> bool:
        """Whether batches carry a producer id and sequence numbers.

        Always with idempotence.  With acks=1 too when idempotence was left
        unset (``sequence_acks_1``): Kafka pipelines acks=1 batches and lets a
        retry reorder them; Headwater numbers them, so the leader refuses a
        batch that overtook a failed predecessor (OUT_OF_ORDER_SEQUENCE_NUMBER)
        and the sender resends both in order.  acks=1 still promises what
        Kafka's acks=1 does and no more: a leader that dies before its
        followers copied a batch loses it (and the offsets it acknowledged are
        handed out again); if the new leader holds part of the producer's
        sequence, the next batch of that partition fails with
        OutOfOrderSequenceNumberError (the loss is reported, not hidden) and the
        producer goes on under a new producer epoch.  ``enable_idempotence=False``
        turns the numbering off, and then one batch per partition is in flight.
        """
        return self.enable_idempotence or (
            self.sequence_acks_1
            and self.acks == 1
            and self.max_in_flight_requests_per_connection <= 5
        )


ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


@dataclasses.dataclass(frozen=True)
class ConsumerSettings:
    """Everything that governs a consumer (Kafka's consumer configs, same meaning)."""

    bootstrap_servers: tuple[str, ...]
    """Brokers to ask for metadata first; any one that answers is enough."""
    group_id: str | None = None
    """Consumer group; None consumes by manual assignment only, without commits."""
    auto_offset_reset: str = "latest"
    """Where to start without a committed offset, or when out of range: latest,
    earliest or none (raise)."""
    enable_auto_commit: bool = True
    """Commit positions every ``auto_commit_interval_ms`` (needs a group)."""
    auto_commit_interval_ms: int = 5000
    """How often auto-commit commits."""
    fetch_min_bytes: int = 1
    """The broker holds a fetch until this many bytes are available..."""
    fetch_max_wait_ms: int = 500
    """...or this long has passed (the long poll)."""
    max_partition_fetch_bytes: int = 1024 * 1024
    """Bytes per partition per fetch (at least one batch is returned regardless)."""
    fetch_max_bytes: int = 50 * 1024 * 1024
    """Bytes per fetch response at most (the consumer asks each broker for at most 8 MiB
    of it, or ``max_partition_fetch_bytes`` if larger: see
    :func:`headwater.client.consumer.fetcher.request_max_bytes`)."""
    max_poll_records: int = 500
    """Records per ``poll`` at most."""
    request_timeout_ms: int = 30000
    """How long to wait for a broker answer beyond the long-poll wait."""
    metadata_max_age_ms: int = 300000
    """Refresh metadata at least this often (finds new partitions for patterns)."""
    group_protocol: str = "classic"
    """``classic`` (JoinGroup/SyncGroup, client-side assignors) or ``consumer``
    (KIP-848's ConsumerGroupHeartbeat: the broker assigns)."""
    group_remote_assignor: str | None = None
    """``group_protocol="consumer"`` only: the broker's assignor to use (``uniform``,
    ``range``); None: the broker's default (Kafka's ``group.remote.assignor``)."""
    isolation_level: str = "read_uncommitted"
    """``read_committed``: only committed transactions' records, up to the last stable
    offset, never an aborted one; ``read_uncommitted``: everything below the high
    watermark (Kafka's ``isolation.level``)."""
    retry: RetryPolicy = dataclasses.field(default_factory=RetryPolicy)
    """Retries and backoff for offset look-ups and metadata."""

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    def __post_init__(self) -> None:
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, "
                f"not {self.isolation_level!r}"
            )
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(
                f"auto_offset_reset must be one of {', '.join(OFFSET_RESETS)}, "
                f"not {self.auto_offset_reset!r}"
            )
        _positive("auto_commit_interval_ms", self.auto_commit_interval_ms)
        _positive("fetch_min_bytes", self.fetch_min_bytes, allow_zero=True)
        _positive("fetch_max_wait_ms", self.fetch_max_wait_ms, allow_zero=True)
        _positive("max_partition_fetch_bytes", self.max_partition_fetch_bytes)
        _positive("fetch_max_bytes", self.fetch_max_bytes)
        _positive("max_poll_records", self.max_poll_records)
        _positive("request_timeout_ms", self.request_timeout_ms)
        if self.group_protocol not in GROUP_PROTOCOLS:
            raise ValueError(
                f"group_protocol must be one of {', '.join(GROUP_PROTOCOLS)}, "
                f"not {self.group_protocol!r}"
            )
        if self.group_remote_assignor is not None and (
            self.group_protocol != "consumer" or not self.group_remote_assignor
        ):
            raise ValueError("group_remote_assignor needs group_protocol='consumer' and a name")
