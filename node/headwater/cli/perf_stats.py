"""Latency statistics of the ``perf`` commands (and ``bench/``): one summary shape."""

from __future__ import annotations

from collections.abc import Sequence


def percentiles(latencies_ms: Sequence[float]) -> dict[str, float]:
    """avg, p50, p95, p99, p99.9 and max of ``latencies_ms`` (zeros when empty)."""
    if not latencies_ms:
        return dict.fromkeys(("avg", "p50", "p95", "p99", "p999", "max"), 0.0)
    s = sorted(latencies_ms)

    def pick(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))]

    return {
        "avg": sum(s) / len(s),
        "p50": pick(0.50),
        "p95": pick(0.95),
        "p99": pick(0.99),
        "p999": pick(0.999),
        "max": s[-1],
    }
