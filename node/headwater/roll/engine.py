"""Safe rolling restarts: one broker at a time, never below min.insync.replicas.

Strimzi's KafkaRoller is the model users compare us with; this engine is the
one implementation behind both the Kubernetes operator and
``headwater cluster roll``.  It sees brokers through two seams:

* a :class:`RollBackend` — the things that get restarted (pods of the broker
  StatefulSet in ``headwater_operator.roll_kube``, local processes in
  :mod:`headwater.roll.local`): who
  needs a restart and why, readiness, and the restart itself (a pod delete or
  SIGTERM, either way the broker's controlled shutdown moves its leaderships
  away first);
* a :class:`ClusterProbe` — what the cluster says through the Admin API:
  the controller, each broker's software and protocol version, every
  partition's replicas and ISR, and each topic's ``min.insync.replicas``.

The algorithm, each step re-reading both (the controller can move):

1. refuse the whole roll (nothing restarted) if it would raise
   ``inter.broker.protocol.version`` while brokers run mixed software, or
   lower it below the version in force;
2. pick the next broker needing a restart: unready ones first (they serve
   nothing), the active controller last, then by id;
3. wait, with backoff, until restarting it cannot take any of its partitions
   below ``min.insync.replicas`` (:func:`restart_blocker`);
4. restart it and wait until it is ready again, registered with the expected
   versions, and back in the ISR of every partition it hosts.

A wait longer than ``operation_timeout_s`` aborts the roll, touching no
further broker.  Time and sleep are passed in, so unit tests run on a fake
clock.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol

from headwater import errors
from headwater.retry import RetryPolicy

log = logging.getLogger(__name__)


class Member(NamedTuple):
    """A broker as its backend sees it: a pod or a local process."""

    broker_id: int
    name: str
    ready: bool
    incarnation: str
    """Changes when the broker restarts (pod uid, process id)."""
    restart_reason: str | None = None
    """Why it needs a restart (None: up to date)."""


class RollTarget(NamedTuple):
    """What restarted brokers must come back with (None: whatever they run)."""

    software_version: str | None = None
    protocol_version: str | None = None


class BrokerVersion(NamedTuple):
    version: str
    protocol_version: str


class PartitionState(NamedTuple):
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class ClusterState(NamedTuple):
    controller_id: int
    brokers: Mapping[int, BrokerVersion]
    """Registered (live) brokers."""
    partitions: Sequence[PartitionState]
    min_isr: Mapping[str, int]
    """Each topic's min.insync.replicas (missing: 1)."""


class RollBackend(Protocol):
    """The things that get restarted; methods may raise on transient failures."""

    def members(self) -> list[Member]: ...
    def target(self) -> RollTarget: ...
    def restart(self, member: Member) -> None: ...
    def finished(self, result: RollResult) -> None:
        """The roll ended (finished, aborted, refused): clear triggers, record status."""
        ...


class ClusterProbe(Protocol):
    def state(self) -> ClusterState: ...


class RollState(enum.StrEnum):
    NOTHING_TO_DO = "NothingToDo"
    FINISHED = "Finished"
    ABORTED = "Aborted"
    REFUSED = "Refused"


class RollResult(NamedTuple):
    state: RollState
    restarted: tuple[str, ...]
    message: str


class RollEvent(NamedTuple):
    """Progress worth an Event: ``type`` Normal or Warning."""

    type: str
    reason: str
    message: str
    member: str | None = None


@dataclasses.dataclass(frozen=True)
class RollSettings:
    operation_timeout_s: float = 300.0
    """Longest wait for one broker to become safe to restart, or to come back."""
    backoff_initial_s: float = 0.5
    """First pause between checks; doubles up to ``backoff_max_s``."""
    backoff_max_s: float = 5.0

    def backoff(self) -> RetryPolicy:
        """The package's retry policy with these pauses, without jitter (one roll at a time)."""
        initial_ms = round(self.backoff_initial_s * 1000)
        return RetryPolicy(
            retry_backoff_ms=initial_ms,
            retry_backoff_max_ms=max(initial_ms, round(self.backoff_max_s * 1000)),
            jitter=0.0,
        )


# -- pure decisions -----------------------------------------------------------------------


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """Orders "1" < "1.1" < "2" < "10" and "0.1.0" < "0.2.0"; non-numeric parts as text."""
    parts: list[tuple[int, str]] = []
    for part in version.replace("-", ".").split("."):
        parts.append((int(part), "") if part.isdigit() else (-1, part))
    while parts and parts[-1] == (0, ""):
        parts.pop()
    return tuple(parts)


def protocol_refusal(brokers: Mapping[int, BrokerVersion], target: RollTarget) -> str | None:
    """Why rolling onto ``target`` must not start (None: it may)."""
    if target.protocol_version is None or not brokers:
        return None
    in_force = max((b.protocol_version for b in brokers.values()), key=version_key)
    wanted = version_key(target.protocol_version)
    if wanted < version_key(in_force):
        return (
            f"refusing to lower inter.broker.protocol.version to {target.protocol_version} "
            f"below the version in force {in_force}"
        )
    if wanted > version_key(in_force):
        newest = max((b.version for b in brokers.values()), key=version_key)
        if target.software_version is not None:
            newest = max(newest, target.software_version, key=version_key)
        older = sorted(bid for bid, b in brokers.items() if b.version != newest)
        if older:
            return (
                f"refusing to raise inter.broker.protocol.version to "
                f"{target.protocol_version} while brokers {', '.join(map(str, older))} "
                f"run software older than {newest}; roll onto the new version first"
            )
    return None


def restart_order(members: Sequence[Member], *, controller_id: int, done: set[str]) -> list[Member]:
    """Brokers still to restart: unready first, the controller last, then by id."""
    todo = [m for m in members if m.restart_reason and m.name not in done]
    return sorted(todo, key=lambda m: (m.ready, m.broker_id == controller_id, m.broker_id))


def next_member(members: Sequence[Member], *, controller_id: int, done: set[str]) -> Member | None:
    """The next broker to restart if all were safe (see :func:`pick`)."""
    order = restart_order(members, controller_id=controller_id, done=done)
    return order[0] if order else None


def pick(
    members: Sequence[Member], state: ClusterState, *, done: set[str]
) -> tuple[Member | None, str | None]:
    """The first broker in restart order that is safe to restart now, or why none is.

    A broker that is not safe yet is passed over for the next one (Strimzi
    does the same), except that the controller waits until it is the last.
    """
    order = restart_order(members, controller_id=state.controller_id, done=done)
    if not order:
        return None, None
    others = [m for m in order if m.broker_id != state.controller_id]
    first_reason: str | None = None
    for m in others or order:
        why = restart_blocker(m.broker_id, state.partitions, state.min_isr, ready=m.ready)
        if why is None:
            return m, None
        first_reason = first_reason or f"{m.name}: {why}"
    return None, first_reason


def restart_blocker(
    broker_id: int,
    partitions: Sequence[PartitionState],
    min_isr: Mapping[str, int],
    *,
    ready: bool = True,
) -> str | None:
    """Why restarting ``broker_id`` now could make a partition unavailable (None: safe).

    For each partition the broker hosts: refuse if its ISR is already below
    min.insync.replicas, or equals it and includes the broker.  An unready
    broker is in no ISR, so restarting it cannot shrink one; only the second
    rule applies to it.
    """
    for p in partitions:
        if broker_id not in p.replicas:
            continue
        need = min_isr.get(p.topic, 1)
        if ready and len(p.isr) < need:
            return f"{p.topic}-{p.partition} has ISR {list(p.isr)} below min.insync.replicas={need}"
        if broker_id in p.isr and len(p.isr) <= need:
            return (
                f"{p.topic}-{p.partition} has ISR {list(p.isr)}: restarting broker "
                f"{broker_id} would take it below min.insync.replicas={need}"
            )
    return None


def not_back_reason(
    member: Member, state: ClusterState, target: RollTarget, *, current: Member | None
) -> str | None:
    """Why a restarted broker does not count as back yet (None: it is)."""
    if current is None:
        return f"{member.name} does not exist yet"
    if current.incarnation == member.incarnation:
        return f"{member.name} has not restarted yet"
    if not current.ready:
        return f"{member.name} is not ready"
    registered = state.brokers.get(member.broker_id)
    if registered is None:
        return f"broker {member.broker_id} is not registered"
    if target.software_version and registered.version != target.software_version:
        return (
            f"broker {member.broker_id} runs {registered.version}, "
            f"expected {target.software_version}"
        )
    if target.protocol_version and registered.protocol_version != target.protocol_version:
        return (
            f"broker {member.broker_id} speaks protocol {registered.protocol_version}, "
            f"expected {target.protocol_version}"
        )
    behind = [
        f"{p.topic}-{p.partition}"
        for p in state.partitions
        if member.broker_id in p.replicas and member.broker_id not in p.isr
    ]
    if behind:
        shown = ", ".join(behind[:5]) + (" ..." if len(behind) > 5 else "")
        return f"broker {member.broker_id} is not yet in the ISR of {shown}"
    return None


# -- the engine ---------------------------------------------------------------------------


class Roller:
    """Runs one roll to its end; not thread-safe (one roll at a time per cluster)."""

    def __init__(
        self,
        backend: RollBackend,
        probe: ClusterProbe,
        *,
        settings: RollSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        notify: Callable[[RollEvent], None] = lambda _e: None,
        metrics: RollObserver | None = None,
    ) -> None:
        self.backend = backend
        self.probe = probe
        self.settings = settings or RollSettings()
        self.clock = clock
        self.sleep = sleep
        self.notify = notify
        self.metrics = metrics or RollObserver()

    def run(self) -> RollResult:
        members = self.backend.members()
        if not any(m.restart_reason for m in members):
            return RollResult(RollState.NOTHING_TO_DO, (), "every broker is up to date")
        target = self.backend.target()
        state = self.probe.state()
        refusal = protocol_refusal(state.brokers, target)
        if refusal is not None:
            self.notify(RollEvent("Warning", "RollRefused", refusal))
            return self._end(RollResult(RollState.REFUSED, (), refusal))
        self.metrics.roll_started()
        done: list[str] = []
        for _ in range(2 * len(members) + 1):  # bounded: each member once
            members = self.backend.members()
            state = self.probe.state()
            if not restart_order(members, controller_id=state.controller_id, done=set(done)):
                break
            picked: list[Member] = []
            why = self._wait(
                functools.partial(self._pick, set(done), picked),
                what="a broker that is safe to restart",
                announce=True,
            )
            if why is not None or not picked:
                return self._abort(done, f"no broker could be restarted safely: {why}")
            member = picked[0]
            # Re-read: the wait may have taken a while and the pod may have changed.
            fresh = {m.name: m for m in self.backend.members()}.get(member.name, member)
            reason = fresh.restart_reason or member.restart_reason or "restart"
            self.notify(
                RollEvent("Normal", "Restarting", f"restarting {fresh.name}: {reason}", fresh.name)
            )
            self.backend.restart(fresh)
            self.metrics.restarted()
            why = self._wait(
                functools.partial(self._not_back, fresh, target), what=f"{fresh.name} to come back"
            )
            if why is not None:
                return self._abort(done, f"{fresh.name} did not come back: {why}")
            done.append(fresh.name)
            self.notify(RollEvent("Normal", "Restarted", f"{fresh.name} is back", fresh.name))
        message = f"restarted {', '.join(done)}" if done else "nothing restarted"
        self.notify(RollEvent("Normal", "RollFinished", message))
        return self._end(RollResult(RollState.FINISHED, tuple(done), message))

    # -- steps --------------------------------------------------------------------------

    def _pick(self, done: set[str], picked: list[Member]) -> str | None:
        member, why = pick(self.backend.members(), self.probe.state(), done=done)
        if member is not None:
            picked[:] = [member]
            return None
        return why or "no broker left to restart"

    def _not_back(self, member: Member, target: RollTarget) -> str | None:
        current = {m.name: m for m in self.backend.members()}.get(member.name)
        return not_back_reason(member, self.probe.state(), target, current=current)

    def _wait(
        self, check: Callable[[], str | None], *, what: str, announce: bool = False
    ) -> str | None:
        """Poll ``check`` with backoff until it returns None; the last reason on timeout."""
        backoff = self.settings.backoff()
        deadline = self.clock() + self.settings.operation_timeout_s
        started = self.clock()
        announced = False
        attempt = 0
        while True:
            attempt += 1
            try:
                reason = check()
            except (errors.HeadwaterError, OSError) as exc:
                reason = f"cannot check: {exc}"
            if reason is None:
                if announced:
                    self.metrics.blocked(self.clock() - started)
                return None
            if announce and not announced:
                announced = True
                self.notify(RollEvent("Normal", "Waiting", f"waiting for {what}: {reason}"))
            left = deadline - self.clock()
            if left <= 0:
                if announced:
                    self.metrics.blocked(self.clock() - started)
                return reason
            self.sleep(min(backoff.backoff_ms(attempt) / 1000.0, left))

    def _abort(self, done: list[str], message: str) -> RollResult:
        self.notify(RollEvent("Warning", "RollAborted", message))
        self.metrics.aborted()
        return self._end(RollResult(RollState.ABORTED, tuple(done), message))

    def _end(self, result: RollResult) -> RollResult:
        try:
            self.backend.finished(result)
        except Exception:  # recording status must not hide the roll's own result
            log.exception("could not record the end of the roll")
        return result


class RollObserver:
    """Hooks for metrics; the default does nothing (see :mod:`headwater_operator.metrics`)."""

    def roll_started(self) -> None: ...
    def restarted(self) -> None: ...
    def blocked(self, seconds: float) -> None: ...
    def aborted(self) -> None: ...
