"""Replication throttles (Kafka's ``ReplicationQuotaManager``), decided without I/O.

Kafka's reassignment tool throttles the move, not ordinary replication:

* the rates are broker dynamic configs, ``leader.replication.throttled.rate``
  (bytes/s this broker sends to throttled followers) and
  ``follower.replication.throttled.rate`` (bytes/s this broker fetches for
  throttled partitions);
* which replicas are throttled are topic configs,
  ``leader.replication.throttled.replicas`` and
  ``follower.replication.throttled.replicas``: ``partition:broker`` pairs or
  ``*``.  A broker throttles partition P on the leader side when
  ``P:<its id>`` (or ``*``) is in the leader list, on the follower side when
  it is in the follower list;
* a replica in the ISR is never throttled (Kafka's ``shouldLeaderThrottle`` /
  ``shouldFollowerThrottle``), so a caught-up follower keeps its pace.

:class:`ReplicationQuota` is a token bucket holding at most one second of the
rate: bytes are recorded after they are sent (the bucket may go negative, as
Kafka records after the response), and while it is negative the throttled
partitions get nothing.  The clock is passed in on every call.

Thread model: used from the broker's event loop only.
"""

from __future__ import annotations

import dataclasses
import functools

UNLIMITED = 2**63 - 1
"""Kafka's default rate (``Long.MaxValue``): no throttle."""

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_DYNAMIC_KEYS = frozenset({LEADER_RATE, FOLLOWER_RATE})
"""The broker configs that AlterConfigs may change without a restart."""


def parse_rate(raw: str) -> int:
    """A rate in bytes/s: a positive integer (Kafka's ``atLeast(0)`` long; 0 stops the move)."""
    value = int(raw.strip())
    if not 0 <= value <= UNLIMITED:
        raise ValueError(f"must be between 0 and {UNLIMITED}")
    return value


@functools.lru_cache(maxsize=1024)
def throttled_partitions(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions ``broker_id`` throttles under a replicas list; None means all (``*``).

    ``value`` was validated by the topic config (``storage.config``).
    """
    value = value.strip()
    if value == "*":
        return None
    out: set[int] = set()
    for item in value.split(","):
        if ":" not in item:
            continue
        partition, broker = item.split(":", 1)
        if int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)


def is_throttled(value: str, *, partition: int, broker_id: int) -> bool:
    """Whether ``partition`` is in the replicas list ``value`` for ``broker_id``."""
    if not value:
        return False
    listed = throttled_partitions(value, broker_id)
    return listed is None or partition in listed


@dataclasses.dataclass
class ReplicationQuota:
    """A token bucket of ``rate_bytes_per_s`` bytes/s, holding at most one second's worth.

    Invariant: ``tokens <= rate``; negative tokens mean the quota is exceeded
    until time refills them.  ``throttled_bytes`` counts bytes recorded while
    a rate was set (for metrics and tests).
    """

    rate_bytes_per_s: int = UNLIMITED
    tokens: float = 0.0
    """Starts full (one second's worth) at the first call that passes a time."""
    last_ms: float | None = None
    throttled_bytes: int = 0

    @property
    def unlimited(self) -> bool:
        return self.rate_bytes_per_s >= UNLIMITED

    def set_rate(self, rate_bytes_per_s: int) -> None:
        """A new rate takes effect now; the bucket keeps its debt but not more than one second."""
        self.rate_bytes_per_s = rate_bytes_per_s
        self.tokens = min(self.tokens, float(rate_bytes_per_s))

    def _refill(self, now_ms: float) -> None:
        if self.last_ms is None:
            self.last_ms = now_ms
            self.tokens = float(self.rate_bytes_per_s) + min(self.tokens, 0.0)
            return
        elapsed = max(0.0, now_ms - self.last_ms)
        self.last_ms = now_ms
        self.tokens = min(
            float(self.rate_bytes_per_s), self.tokens + elapsed * self.rate_bytes_per_s / 1000.0
        )

    def is_exceeded(self, now_ms: float) -> bool:
        """True while throttled partitions must get nothing."""
        if self.unlimited:
            return False
        self._refill(now_ms)
        return self.tokens < 0 or self.rate_bytes_per_s == 0

    def allowance(self, now_ms: float) -> int:
        """How many bytes may go now (0 when exceeded; at least one batch is the caller's)."""
        if self.unlimited:
            return UNLIMITED
        self._refill(now_ms)
        return max(0, int(self.tokens))

    def record(self, nbytes: int, now_ms: float) -> None:
        """``nbytes`` of throttled partitions went out (or came in) at ``now_ms``."""
        if self.unlimited or nbytes <= 0:
            return
        self._refill(now_ms)
        self.tokens -= nbytes
        self.throttled_bytes += nbytes

    def delay_ms(self, now_ms: float) -> float:
        """How long until the bucket is no longer in debt (0 if it is not)."""
        if self.unlimited:
            return 0.0
        self._refill(now_ms)
        if self.tokens >= 0:
            return 0.0
        if self.rate_bytes_per_s == 0:
            return float("inf")
        return -self.tokens * 1000.0 / self.rate_bytes_per_s


def effective_rate(key: str, *, broker: dict[str, str], default: dict[str, str]) -> int:
    """A broker's rate: its own dynamic config, else the cluster default, else unlimited."""
    for source in (broker, default):
        raw = source.get(key)
        if raw is not None:
            try:
                return parse_rate(raw)
            except ValueError:
                continue
    return UNLIMITED
