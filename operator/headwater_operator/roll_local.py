"""The roll engine's local backend: broker processes on this machine.

``headwater cluster roll`` gives clusters outside Kubernetes (``headwater dev``,
:class:`headwater.testing.Cluster`, hand-started brokers) the same safe roll
the operator does for pods: the same engine, the same min.insync.replicas
checks and the same waits; only restarting differs.  Restarting a process is
SIGTERM (the broker's controlled shutdown moves its leaderships away), waiting
for it to exit, and starting it again with the cluster's configuration — plus
``inter.broker.protocol.version`` when the roll raises it (``--to-version``).

The processes are reached through :class:`LocalProcesses`, which
:class:`headwater.testing.Cluster` satisfies as it is; a broker's incarnation
is its process id.  Every broker is restarted once per roll.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Protocol

from headwater import __version__

from headwater_operator.roll import Member, RollResult, RollTarget

PROTOCOL_KEY = "inter.broker.protocol.version"


class BrokerProcessLike(Protocol):
    @property
    def pid(self) -> int | None: ...
    @property
    def address(self) -> str: ...
    @property
    def running(self) -> bool: ...


class LocalProcesses(Protocol):
    """What a local cluster offers (``headwater.testing.Cluster`` has all of it)."""

    @property
    def brokers(self) -> Mapping[int, BrokerProcessLike]: ...
    @property
    def overrides(self) -> MutableMapping[str, str]: ...
    def stop(self, broker_id: int, *, timeout_s: float = ...) -> int | None: ...
    def start_broker(self, broker_id: int, *, wait: bool = ...) -> None: ...


class LocalBackend:
    """:class:`headwater_operator.roll.RollBackend` for local broker processes."""

    def __init__(
        self,
        processes: LocalProcesses,
        *,
        healthy: Callable[[str], bool],
        protocol_version: str | None = None,
        software_version: str | None = __version__,
        stop_timeout_s: float = 120.0,
        reason: str = "rolling restart requested",
    ) -> None:
        self.processes = processes
        self.healthy = healthy
        self.protocol_version = protocol_version
        self.software_version = software_version
        self.stop_timeout_s = stop_timeout_s
        self.reason = reason
        self.result: RollResult | None = None

    def members(self) -> list[Member]:
        out = []
        for broker_id, proc in sorted(self.processes.brokers.items()):
            running = proc.running
            out.append(
                Member(
                    broker_id=broker_id,
                    name=f"broker-{broker_id}",
                    ready=running and self.healthy(proc.address),
                    incarnation=str(proc.pid) if running else "stopped",
                    restart_reason=self.reason,
                )
            )
        return out

    def target(self) -> RollTarget:
        return RollTarget(self.software_version, self.protocol_version)

    def restart(self, member: Member) -> None:
        if self.protocol_version is not None:
            self.processes.overrides[PROTOCOL_KEY] = self.protocol_version
        self.processes.stop(member.broker_id, timeout_s=self.stop_timeout_s)
        self.processes.start_broker(member.broker_id, wait=False)

    def finished(self, result: RollResult) -> None:
        self.result = result
