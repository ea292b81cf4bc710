"""The operator's Prometheus metrics: reconciles and rolls.

Names follow Prometheus conventions with a ``headwater_operator_`` prefix and
a ``kind`` label (``Topic``, ``StatefulSet``), so one dashboard covers every
resource the operator handles.  Served on ``HEADWATER_OPERATOR_METRICS_PORT``
by :func:`serve`; kopf's own liveness endpoint is separate (``--liveness``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import prometheus_client
from headwater.roll.engine import RollObserver

RECONCILES = prometheus_client.Counter(
    "headwater_operator_reconciles",
    "Reconciles run, by resource kind and result (ok, refused, error).",
    ["kind", "result"],
)
RECONCILE_ERRORS = prometheus_client.Counter(
    "headwater_operator_reconcile_errors",
    "Reconciles that failed or were refused, by kind and reason.",
    ["kind", "reason"],
)
RECONCILE_SECONDS = prometheus_client.Histogram(
    "headwater_operator_reconcile_duration_seconds",
    "Time spent in one reconcile, by resource kind.",
    ["kind"],
)
ROLLS = prometheus_client.Counter("headwater_operator_rolls", "Rolling restarts started.")
ROLL_RESTARTS = prometheus_client.Counter(
    "headwater_operator_roll_restarts", "Brokers restarted by rolls."
)
ROLL_BLOCKED_SECONDS = prometheus_client.Counter(
    "headwater_operator_roll_blocked_seconds",
    "Time rolls spent waiting for a broker to become safe to restart or to come back.",
)
ROLLS_ABORTED = prometheus_client.Counter(
    "headwater_operator_rolls_aborted", "Rolls stopped because a wait timed out."
)


@contextlib.contextmanager
def reconcile_timer(kind: str) -> Iterator[None]:
    with RECONCILE_SECONDS.labels(kind).time():
        yield


def reconciled(kind: str, *, refused_reason: str | None = None, error: bool = False) -> None:
    result = "error" if error else "refused" if refused_reason else "ok"
    RECONCILES.labels(kind, result).inc()
    if refused_reason or error:
        RECONCILE_ERRORS.labels(kind, refused_reason or "Error").inc()


class PrometheusRollObserver(RollObserver):
    def roll_started(self) -> None:
        ROLLS.inc()

    def restarted(self) -> None:
        ROLL_RESTARTS.inc()

    def blocked(self, seconds: float) -> None:
        ROLL_BLOCKED_SECONDS.inc(max(0.0, seconds))

    def aborted(self) -> None:
        ROLLS_ABORTED.inc()


def serve(port: int, *, addr: str = "0.0.0.0") -> None:
    """Serve /metrics on ``port`` in a daemon thread (0: do nothing)."""
    if port:
        prometheus_client.start_http_server(port, addr=addr)
