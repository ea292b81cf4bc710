"""Sampled rates and throttle times, as Kafka's ``ClientQuotaManager`` computes them.

A rate is measured over ``quota.window.num`` samples of ``quota.window.size.seconds``
each (Kafka's defaults: 11 samples of 1 s).  Recording adds to the current sample;
a sample older than ``num * size`` is dropped (Kafka's ``SampledStat``, which keeps
``num`` samples and reuses the oldest).  The rate is the samples' total over the
elapsed window, which is at least ``num - 1`` full samples so that a client's
first bytes do not read as an enormous rate (Kafka's ``Rate.windowSize``).

When a recording takes the rate above the bound, the connection is throttled for
the time it must stay silent for the rate to fall back to the bound::

    throttle_ms = (rate - bound) / bound * window_ms

(Kafka's ``ClientQuotaManager.throttleTime``), at most ``num * size`` (Kafka's
``maxThrottleTimeMs``).  The bytes are recorded whether or not they throttle: the
request has been served, the throttle makes up for it afterwards.

No clock: every call takes ``now_ms``.  Not thread-safe; each broker keeps one
:class:`QuotaSensors` on its event loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import NamedTuple

DEFAULT_WINDOW_NUM = 11
"""Kafka's ``quota.window.num``."""
DEFAULT_WINDOW_SIZE_SECONDS = 1
"""Kafka's ``quota.window.size.seconds``."""


@dataclasses.dataclass(frozen=True)
class WindowConfig:
    """``quota.window.num`` samples of ``quota.window.size.seconds``; both at least 1."""

    num: int = DEFAULT_WINDOW_NUM
    size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS

    def __post_init__(self) -> None:
        if self.num < 1:
            raise ValueError(f"quota.window.num must be at least 1, not {self.num}")
        if self.size_seconds < 1:
            raise ValueError(
                f"quota.window.size.seconds must be at least 1, not {self.size_seconds}"
            )

    @property
    def size_ms(self) -> int:
        return self.size_seconds * 1000

    @property
    def max_throttle_ms(self) -> int:
        return self.num * self.size_ms


class SampledRate:
    """A per-second rate over a ring of samples (Kafka's ``Rate`` over ``SampledStat``).

    Invariants: ``_starts`` and ``_totals`` have ``config.num`` entries; sample ``i``
    holds what was recorded from ``_starts[i]`` for one sample length; ``_current`` is
    the sample being filled.  A start of -1 is a sample never used.
    """

    def __init__(self, config: WindowConfig, now_ms: int) -> None:
        self._config = config
        self._starts = [-1] * config.num
        self._totals = [0.0] * config.num
        self._current = 0
        self._starts[0] = now_ms

    def record(self, value: float, now_ms: int) -> None:
        size = self._config.size_ms
        if now_ms >= self._starts[self._current] + size:
            self._current = (self._current + 1) % self._config.num
            self._starts[self._current] = now_ms
            self._totals[self._current] = 0.0
        self._totals[self._current] += value

    def _purge(self, now_ms: int) -> None:
        """Forget samples wholly older than the window (Kafka's ``purgeObsoleteSamples``)."""
        expire = self._config.num * self._config.size_ms
        for i, start in enumerate(self._starts):
            if start >= 0 and now_ms - start >= expire:
                self._starts[i] = now_ms if i == self._current else -1
                self._totals[i] = 0.0

    def window_ms(self, now_ms: int) -> int:
        """The elapsed time the rate divides by: from the oldest live sample to now, at
        least ``num - 1`` samples long (Kafka's ``Rate.windowSize``)."""
        self._purge(now_ms)
        live = [s for s in self._starts if s >= 0]
        oldest = min(live) if live else now_ms
        elapsed = now_ms - oldest
        size = self._config.size_ms
        full = elapsed // size
        minimum = self._config.num - 1
        if full < minimum:
            elapsed += (minimum - full) * size
        return max(elapsed, 1)

    def rate(self, now_ms: int) -> float:
        """Per second."""
        window = self.window_ms(now_ms)
        return sum(self._totals) / (window / 1000.0)


def throttle_ms(rate: float, bound: float, window_ms: int, config: WindowConfig) -> int:
    """How long a client at ``rate`` against ``bound`` must stay silent (0 within the
    bound), capped at ``num * size``."""
    if rate <= bound:
        return 0
    return min(round((rate - bound) / bound * window_ms), config.max_throttle_ms)


class SensorFigures(NamedTuple):
    """What a sensor has measured, as of its latest recording (Kafka's per-entity
    ``byte-rate``/``request-time`` and ``throttle-time`` metrics): the rate then, the
    bound it was held to, the total recorded, and the throttle time handed out in all
    and how many times."""

    rate: float
    bound: float
    recorded_total: float
    throttle_ms_total: int
    throttled: int


class QuotaSensors:
    """One :class:`SampledRate` per shared budget (a sensor key such as ``("produce",
    user, client_id)``), created at first use.  Idle sensors are dropped by
    :meth:`expire` (Kafka's ``InactiveSensorExpirationTimeSeconds``, one hour).

    Each sensor's :class:`SensorFigures` are replaced (one dict store) at every
    recording, so another thread (a metrics scrape) may read :meth:`figures`."""

    IDLE_EXPIRY_MS = 3600 * 1000

    def __init__(self, config: WindowConfig | None = None) -> None:
        self.config = config or WindowConfig()
        self._rates: dict[Hashable, SampledRate] = {}
        self._last_used: dict[Hashable, int] = {}
        self._figures: dict[Hashable, SensorFigures] = {}

    def record(self, sensor: Hashable, value: float, bound: float, now_ms: int) -> int:
        """Record ``value`` on ``sensor`` and answer the throttle time in ms (0 within
        ``bound``)."""
        rate = self._rates.get(sensor)
        if rate is None:
            rate = self._rates[sensor] = SampledRate(self.config, now_ms)
        self._last_used[sensor] = now_ms
        rate.record(value, now_ms)
        window = rate.window_ms(now_ms)
        measured = rate.rate(now_ms)
        ms = throttle_ms(measured, bound, window, self.config)
        before = self._figures.get(sensor)
        self._figures[sensor] = SensorFigures(
            rate=measured,
            bound=bound,
            recorded_total=value + (before.recorded_total if before else 0.0),
            throttle_ms_total=ms + (before.throttle_ms_total if before else 0),
            throttled=(ms > 0) + (before.throttled if before else 0),
        )
        return ms

    def figures(self) -> list[tuple[Hashable, SensorFigures]]:
        """Every live sensor's figures (a copy; safe from any thread)."""
        return list(self._figures.items())

    def rate(self, sensor: Hashable, now_ms: int) -> float:
        found = self._rates.get(sensor)
        return 0.0 if found is None else found.rate(now_ms)

    def expire(self, now_ms: int) -> None:
        idle = [s for s, t in self._last_used.items() if now_ms - t >= self.IDLE_EXPIRY_MS]
        for sensor in idle:
            del self._rates[sensor], self._last_used[sensor]
            self._figures.pop(sensor, None)
