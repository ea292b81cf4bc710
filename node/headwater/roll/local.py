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

Like the kubelet with a crashing container, the backend starts a restarted
broker again if its process exits before it is back (at most every
``crash_backoff_s``), e.g. when the old process's ZooKeeper session has not
expired yet; the engine's ``operation_timeout_s`` still bounds the whole wait.
A broker whose SIGTERM shutdown takes longer than ``stop_timeout_s`` is
killed, as Kubernetes does after ``terminationGracePeriodSeconds``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Protocol

from headwater import __version__
from headwater.roll.engine import Member, RollResult, RollTarget

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
    """:class:`headwater.roll.engine.RollBackend` for local broker processes."""

    def __init__(
        self,
        processes: LocalProcesses,
        *,
        healthy: Callable[[str], bool],
        protocol_version: str | None = None,
        software_version: str | None = __version__,
        stop_timeout_s: float = 60.0,
        crash_backoff_s: float = 2.0,
        reason: str = "rolling restart requested",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.processes = processes
        self.healthy = healthy
        self.protocol_version = protocol_version
        self.software_version = software_version
        self.stop_timeout_s = stop_timeout_s
        self.reason = reason
        self.crash_backoff_s = crash_backoff_s
        self.clock = clock
        self.result: RollResult | None = None
        self.crash_restarts = 0
        self._coming_back: dict[int, float] = {}  # broker id -> when last started

    def _supervise(self, broker_id: int, proc: BrokerProcessLike) -> None:
        started = self._coming_back.get(broker_id)
        if started is None or proc.running:
            return
        if self.clock() - started >= self.crash_backoff_s:
            self.processes.start_broker(broker_id, wait=False)
            self._coming_back[broker_id] = self.clock()
            self.crash_restarts += 1

    def members(self) -> list[Member]:
        out = []
        for broker_id, proc in sorted(self.processes.brokers.items()):
            self._supervise(broker_id, proc)
            running = proc.running
            ready = running and self.healthy(proc.address)
            if ready:
                self._coming_back.pop(broker_id, None)
            out.append(
                Member(
                    broker_id=broker_id,
                    name=f"broker-{broker_id}",
                    ready=ready,
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
        self._coming_back[member.broker_id] = self.clock()

    def finished(self, result: RollResult) -> None:
        self.result = result
