"""A broker's client quotas: the stored quotas of every entity and the rate sensors
that enforce them, as Kafka's ``ClientQuotaManager`` (one per quota type; here one
object for the three keys, both front doors sharing it, so a client's produce rate is
one budget whichever door it uses).

Threads: :meth:`ClientQuotas.replace` swaps the whole quota map (the ZooKeeper
watcher's thread); :meth:`ClientQuotas.record` runs on the event loop only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from headwater.quotas.entities import QuotaEntity, QuotaKey, resolve
from headwater.quotas.rates import QuotaSensors, SensorFigures, WindowConfig


class ClientQuotas:
    """Quota lookups and throttle decisions.  Invariant: with no quota stored,
    :meth:`record` answers 0 and keeps no sensor (no work per request beyond one
    emptiness test)."""

    def __init__(self, config: WindowConfig | None = None) -> None:
        self._sensors = QuotaSensors(config)
        self._quotas: Mapping[QuotaEntity, Mapping[QuotaKey, float]] = {}

    @property
    def config(self) -> WindowConfig:
        return self._sensors.config

    def replace(self, quotas: Mapping[QuotaEntity, Mapping[QuotaKey, float]]) -> None:
        """Every entity's quotas, as now stored (any thread: one reference swap)."""
        self._quotas = {e: dict(q) for e, q in quotas.items() if q}

    @property
    def quotas(self) -> Mapping[QuotaEntity, Mapping[QuotaKey, float]]:
        return self._quotas

    def enabled(self, key: QuotaKey) -> bool:
        return any(key in q for q in self._quotas.values())

    def record(self, key: QuotaKey, *, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` (bytes, or request handling time as a percentage of one
        thread for the window: ms * 100 / 1000 per second) against the connection's
        budget for ``key``; answers the throttle time in ms."""
        quotas = self._quotas
        if not quotas:
            return 0
        budget = resolve(quotas, key, user=user, client_id=client_id)
        if budget is None:
            return 0
        return self._sensors.record((key, *budget.sensor), value, budget.bound, now_ms)

    def rate(self, key: QuotaKey, *, user: str, client_id: str, now_ms: int) -> float:
        """The measured rate of the connection's budget (0 if it has none)."""
        budget = resolve(self._quotas, key, user=user, client_id=client_id)
        if budget is None:
            return 0.0
        return self._sensors.rate((key, *budget.sensor), now_ms)

    def figures(self) -> list[tuple[QuotaKey, str, str, SensorFigures]]:
        """``(key, user, client_id, figures)`` of every budget recorded against (the
        budget's tags: "" for a tag its quota does not name); any thread."""
        out: list[tuple[QuotaKey, str, str, SensorFigures]] = []
        for sensor, figures in self._sensors.figures():
            key, user, client_id = cast("tuple[QuotaKey, str, str]", sensor)
            out.append((key, user, client_id, figures))
        return out
