"""The operator's settings, read once from the environment the Helm chart sets.

The Deployment passes everything the operator needs as environment variables
(``HEADWATER_BOOTSTRAP``, ``HEADWATER_BROKER_STATEFULSET``, ``POD_NAMESPACE``,
``POD_NAME``, ``HEADWATER_OPERATOR_METRICS_PORT``) and kopf's own flags on the
command line, so a value object built from a mapping is all the handlers see;
tests build one directly.

With more than one replica, kopf elects the active operator by peering
priority; replicas with equal priorities would all stand down ("priority
conflict"), so each replica derives a distinct priority from its pod name.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Mapping
from typing import Any

from headwater_operator.security_config import ClientSecurity

TOPIC_FINALIZER = "headwater.io/topic"
USER_FINALIZER = "headwater.io/user"
MANAGED_ANNOTATION = "headwater.io/managed"
MANUAL_ROLL_ANNOTATION = "headwater.io/manual-rolling-update"
PERSISTENCE_PREFIX = "headwater.io"


@dataclasses.dataclass(frozen=True)
class OperatorConfig:
    """What the handlers need to know; immutable, shared by every handler thread."""

    bootstrap: str = "127.0.0.1:9092"
    """Brokers the Admin client connects to (``HEADWATER_BOOTSTRAP``)."""
    namespace: str = "default"
    """Namespace of the Topics and of the broker StatefulSet (``POD_NAMESPACE``)."""
    broker_statefulset: str = ""
    """Name of the broker StatefulSet to roll; empty: rolling is off."""
    pod_name: str = ""
    """This operator replica's pod name (``POD_NAME``), for its peering priority."""
    metrics_port: int = 0
    """Prometheus HTTP port (``HEADWATER_OPERATOR_METRICS_PORT``; 0: off)."""
    resync_interval_s: float = 120.0
    """How often every Topic is reconciled again, reverting out-of-band changes."""
    operation_timeout_s: float = 300.0
    """How long one broker restart (or one safety wait) may take before a roll aborts."""
    roll_check_interval_s: float = 15.0
    """How often the broker StatefulSet is checked for pods needing a restart."""
    request_timeout_ms: int = 30000
    """The Admin client's request timeout."""
    auto_rebalance: bool = True
    """After a scale-up, rebalance onto the new brokers (``HEADWATER_AUTO_REBALANCE``)."""
    rebalance_throttle_bytes_per_s: int = 10 * 1024 * 1024
    """Replication throttle of the operator's rebalances and drains, bytes/s per broker
    (``HEADWATER_REBALANCE_THROTTLE_BYTES_PER_S``; 0: unthrottled)."""
    scaling_check_interval_s: float = 10.0
    """How often a scaling in progress (or refused) is looked at again."""
    security: ClientSecurity = dataclasses.field(default_factory=ClientSecurity)
    """How every Admin authenticates, and the Users' CA (:mod:`security_config`)."""

    def admin_options(self) -> dict[str, Any]:
        """Keyword arguments of every :class:`headwater.Admin` the operator builds."""
        return {"request_timeout_ms": self.request_timeout_ms, **self.security.admin_options()}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OperatorConfig:
        def num(key: str, default: float) -> float:
            raw = env.get(key, "").strip()
            if not raw:
                return default
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{key} must be a number, not {raw!r}") from None
            if value < 0:
                raise ValueError(f"{key} must be >= 0, not {raw!r}")
            return value

        def flag(key: str, default: bool) -> bool:
            raw = env.get(key, "").strip().lower()
            if not raw:
                return default
            if raw not in ("true", "false"):
                raise ValueError(f"{key} must be true or false, not {raw!r}")
            return raw == "true"

        return cls(
            bootstrap=env.get("HEADWATER_BOOTSTRAP", cls.bootstrap) or cls.bootstrap,
            namespace=env.get("POD_NAMESPACE", cls.namespace) or cls.namespace,
            broker_statefulset=env.get("HEADWATER_BROKER_STATEFULSET", ""),
            pod_name=env.get("POD_NAME", ""),
            metrics_port=int(num("HEADWATER_OPERATOR_METRICS_PORT", 0)),
            resync_interval_s=num("HEADWATER_RESYNC_INTERVAL_S", cls.resync_interval_s),
            operation_timeout_s=num("HEADWATER_OPERATION_TIMEOUT_S", cls.operation_timeout_s),
            roll_check_interval_s=num("HEADWATER_ROLL_CHECK_INTERVAL_S", cls.roll_check_interval_s),
            auto_rebalance=flag("HEADWATER_AUTO_REBALANCE", cls.auto_rebalance),
            rebalance_throttle_bytes_per_s=int(
                num("HEADWATER_REBALANCE_THROTTLE_BYTES_PER_S", cls.rebalance_throttle_bytes_per_s)
            ),
            scaling_check_interval_s=num(
                "HEADWATER_SCALING_CHECK_INTERVAL_S", cls.scaling_check_interval_s
            ),
            security=ClientSecurity.from_env(env),
        )


def peering_priority(pod_name: str) -> int:
    """A stable priority in ``[1, 2**31)`` distinct per pod name (0 for no name).

    kopf's peering makes the highest priority the active operator and makes
    equal priorities all pause, so replicas must not share one.
    """
    if not pod_name:
        return 0
    return 1 + zlib.crc32(pod_name.encode("utf-8")) % (2**31 - 1)
