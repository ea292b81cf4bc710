"""Broker scaling's Kubernetes and cluster side: observe, act, record (no decisions).

:class:`Scaler` runs one step of :mod:`headwater_operator.scaling` at a time:
it reads the broker StatefulSet, its pods and the cluster into an
:class:`~headwater_operator.scaling.Observed`, asks
:func:`~headwater_operator.scaling.decide`, performs the one action, and
records the outcome.  The StatefulSet carries everything:

* ``headwater.io/desired-brokers`` — the broker count wanted (the chart's
  ``brokers.replicas``); ``spec.replicas`` is the operator's to move;
* ``headwater.io/drain-on-scale-down`` — ``"true"``: drain before shrinking;
* ``headwater.io/scaling-status`` — JSON written by the operator: ``phase``,
  ``desired``, ``replicas``, ``message``; the running (or last) move's
  ``partitions``, ``moves`` (replicas copied), ``bytes`` (estimated, from the
  plan) and ``throttleBytesPerSecond``; ``partitionsMoving`` while it runs;
  and a Kubernetes-style condition ``Scaled``
  (``False`` with the phase as reason while a scaling runs or is refused);
* ``headwater.io/scaling-plan`` — Kafka's reassignment JSON of the running
  move, so a restarted operator can still verify it and remove its throttle.

Events: one on every phase change (reason = the new phase, or
``RebalanceFinished``/``Scaled``), a Warning ``ScaleDownRefused`` when a
scale-down is refused, and a Warning ``ReassignmentFailed`` when a move ends
with partitions not where planned.

The Admin calls are the :class:`ReassignmentAdmin` Protocol (``headwater.Admin``
implements it); the brokers' registration and replica lists come from the
roll's :class:`~headwater.roll.engine.ClusterProbe`.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from headwater.client.reassignment import (
    BrokerInfo,
    ReassignmentPlan,
    RebalancePlan,
    VerifyResult,
    parse_plan,
    plan_drain,
)
from headwater.roll.engine import ClusterProbe
from headwater.values import TopicPartition

from headwater_operator import conditions, scaling
from headwater_operator.roll_kube import ClientKubeApi, KubeApi, ordinal, pod_ready, restart_reason
from headwater_operator.scaling import (
    Decision,
    FinishReassignment,
    Hold,
    Observed,
    Refuse,
    ScalingPhase,
    SetReplicas,
    StartDrain,
    StartRebalance,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DESIRED_ANNOTATION = "headwater.io/desired-brokers"
DRAIN_ANNOTATION = "headwater.io/drain-on-scale-down"
STATUS_ANNOTATION = "headwater.io/scaling-status"
PLAN_ANNOTATION = "headwater.io/scaling-plan"
PLAN_ANNOTATION_MAX_BYTES = 128 * 1024
"""Kubernetes allows 256 KiB of annotations per object; a larger plan is kept in memory only."""
CONDITION = "Scaled"


class ScalingKubeApi(KubeApi, Protocol):
    """The roll's Kubernetes calls plus setting the StatefulSet's replicas."""

    def scale_statefulset(self, namespace: str, name: str, replicas: int) -> None: ...


class ClientScalingKubeApi(ClientKubeApi):
    """:class:`ScalingKubeApi` over the official ``kubernetes`` client."""

    def scale_statefulset(self, namespace: str, name: str, replicas: int) -> None:
        self._apps.patch_namespaced_stateful_set(
            name, namespace, {"spec": {"replicas": replicas}}, _preload_content=False
        )


class ReassignmentAdmin(Protocol):
    """What scaling needs from ``headwater.Admin`` (its reassignment API)."""

    def plan_rebalance(self, *, brokers: Sequence[int] | None = None) -> RebalancePlan: ...
    def current_assignment(self) -> dict[TopicPartition, tuple[int, ...]]: ...
    def broker_infos(self) -> list[BrokerInfo]: ...
    def estimate_partition_sizes(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]: ...
    def execute_reassignment(
        self, plan: ReassignmentPlan | RebalancePlan, *, throttle_bytes_per_s: int | None = None
    ) -> Any: ...
    def verify_reassignment(self, plan: ReassignmentPlan | RebalancePlan) -> VerifyResult: ...
    def list_partition_reassignments(self) -> Mapping[TopicPartition, Any]: ...


def drain_plan(admin: ReassignmentAdmin, leaving: Sequence[int]) -> RebalancePlan:
    """Every replica off ``leaving`` (all at once, so none lands on another leaving broker),
    nothing else moved: the drain planner over the Admin's view of the cluster."""
    current = admin.current_assignment()
    gone = set(leaving)
    sizes = admin.estimate_partition_sizes(tp for tp, ids in current.items() if gone & set(ids))
    return plan_drain(current, brokers=admin.broker_infos(), drain=list(leaving), sizes=sizes)


# -- reading the StatefulSet ----------------------------------------------------------------


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def spec_replicas(sts: Mapping[str, Any]) -> int:
    raw = (sts.get("spec") or {}).get("replicas")
    return 1 if raw is None else int(raw)


def desired_brokers(sts: Mapping[str, Any]) -> int:
    """The annotation's count; ``spec.replicas`` when absent; 0 (invalid) when not a number."""
    raw = _annotations(sts).get(DESIRED_ANNOTATION)
    if raw is None or not raw.strip():
        return spec_replicas(sts)
    text = raw.strip()
    return int(text) if text.isdigit() else 0


def drain_on_scale_down(sts: Mapping[str, Any]) -> bool:
    return _annotations(sts).get(DRAIN_ANNOTATION, "false").strip().lower() == "true"


def scaling_status(sts: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded status (empty when none, or unreadable)."""
    raw = _annotations(sts).get(STATUS_ANNOTATION)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def phase_of(sts: Mapping[str, Any]) -> ScalingPhase:
    try:
        return ScalingPhase(scaling_status(sts).get("phase", ScalingPhase.STEADY))
    except ValueError:
        return ScalingPhase.STEADY


def replicas_per_broker(probe: ClusterProbe) -> tuple[frozenset[int], dict[int, int]]:
    """Registered brokers and how many replicas each broker holds."""
    state = probe.state()
    hosted: dict[int, int] = {}
    for p in state.partitions:
        for b in p.replicas:
            hosted[b] = hosted.get(b, 0) + 1
    return frozenset(state.brokers), hosted


# -- the adapter ----------------------------------------------------------------------------

EVENT_REASONS: Mapping[ScalingPhase, str] = {
    ScalingPhase.SCALING_UP: "ScalingUp",
    ScalingPhase.REBALANCING: "Rebalancing",
    ScalingPhase.DRAINING: "Draining",
    ScalingPhase.SCALING_DOWN: "ScalingDown",
    ScalingPhase.SCALE_DOWN_REFUSED: "ScaleDownRefused",
    ScalingPhase.STEADY: "Scaled",
}


class Scaler:
    """One scaling step at a time for one broker StatefulSet.

    Not thread-safe: the handlers' runner calls :meth:`step` from one thread,
    never while a roll runs.  The running move's plan is kept in memory and in
    the ``headwater.io/scaling-plan`` annotation (for a restarted operator).
    """

    def __init__(
        self,
        api: ScalingKubeApi,
        admin: ReassignmentAdmin,
        probe: ClusterProbe,
        *,
        namespace: str,
        statefulset: str,
        auto_rebalance: bool = True,
        throttle_bytes_per_s: int = 0,
        notify: Callable[[str, str, str], None] = lambda _t, _r, _m: None,
        now: Callable[[], str] = conditions.now_rfc3339,
    ) -> None:
        self.api = api
        self.admin = admin
        self.probe = probe
        self.namespace = namespace
        self.statefulset = statefulset
        self.auto_rebalance = auto_rebalance
        self.throttle_bytes_per_s = throttle_bytes_per_s
        self.notify = notify
        self.now = now
        self._plan: ReassignmentPlan | None = None

    def observe(self, sts: Mapping[str, Any]) -> Observed:
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        prefix = self.statefulset + "-"
        present: set[int] = set()
        ready: set[int] = set()
        pending = False
        for pod in self.api.list_pods(self.namespace, selector):
            name = str((pod.get("metadata") or {}).get("name") or "")
            if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
                continue
            present.add(ordinal(name))
            if pod_ready(pod):
                ready.add(ordinal(name))
            pending = pending or restart_reason(pod, sts) is not None
        phase, desired, spec = phase_of(sts), desired_brokers(sts), spec_replicas(sts)
        registered: frozenset[int] = frozenset()
        hosted: dict[int, int] = {}
        reassigning = 0
        if not scaling.is_quiet(phase=phase, desired=desired, spec_replicas=spec):
            registered, hosted = replicas_per_broker(self.probe)
            reassigning = len(self.admin.list_partition_reassignments())
        return Observed(
            phase=phase,
            desired=desired,
            spec_replicas=spec,
            pods_present=frozenset(present),
            pods_ready=frozenset(ready),
            registered=registered,
            hosted=hosted,
            reassigning=reassigning,
            auto_rebalance=self.auto_rebalance,
            drain_on_scale_down=drain_on_scale_down(sts),
            restarts_pending=pending,
        )

    def step(self) -> Decision:
        """Observe, decide, act, record; returns the decision taken."""
        sts = self.api.read_statefulset(self.namespace, self.statefulset)
        observed = self.observe(sts)
        decision = scaling.decide(observed)
        if isinstance(decision.action, SetReplicas):
            # Record first: once spec.replicas moved, the next observation looks quiet
            # (desired == spec), so a crash before recording would skip the rebalance.
            # Setting the replicas again after a crash is harmless.
            self._record(sts, observed, decision, {})
            self._perform(decision, sts)
        else:
            # Act first: a failed action leaves the phase as it was, to be tried again.
            extra = self._perform(decision, sts)
            self._record(sts, observed, decision, extra)
        return decision

    # -- actions ------------------------------------------------------------------------

    def _perform(self, decision: Decision, sts: Mapping[str, Any]) -> dict[str, Any]:
        """Do ``decision.action``; returns status fields to record beside it."""
        action = decision.action
        if isinstance(action, SetReplicas):
            self.api.scale_statefulset(self.namespace, self.statefulset, action.replicas)
        elif isinstance(action, StartRebalance):
            return self._execute(self.admin.plan_rebalance(brokers=list(action.brokers)))
        elif isinstance(action, StartDrain):
            return self._execute(drain_plan(self.admin, action.leaving))
        elif isinstance(action, FinishReassignment):
            self._finish(sts)
            if action.then_replicas is not None:
                self.api.scale_statefulset(self.namespace, self.statefulset, action.then_replicas)
            return {PLAN_ANNOTATION: None}
        elif isinstance(action, Refuse):
            self.notify("Warning", "ScaleDownRefused", action.reason)
        return {}

    def _execute(self, plan: RebalancePlan) -> dict[str, Any]:
        reassignment = ReassignmentPlan.of(plan.changed)
        self._plan = reassignment
        fields: dict[str, Any] = {
            "partitions": len(plan.changed),
            "moves": len(plan.moves),
            "bytes": plan.bytes_to_move,
            "throttleBytesPerSecond": self.throttle_bytes_per_s,
        }
        if plan.empty:
            return {**fields, PLAN_ANNOTATION: None}
        self.admin.execute_reassignment(
            reassignment, throttle_bytes_per_s=self.throttle_bytes_per_s or None
        )
        text = json.dumps(reassignment.to_json(), separators=(",", ":"))
        return {**fields, PLAN_ANNOTATION: text if len(text) <= PLAN_ANNOTATION_MAX_BYTES else None}

    def _finish(self, sts: Mapping[str, Any]) -> None:
        plan = self._plan or self._stored_plan(sts)
        self._plan = None
        if plan is None or not plan.partitions:
            return
        result = self.admin.verify_reassignment(plan)
        if result.failed:
            shown = ", ".join(str(p.tp) for p in result.failed[:5])
            self.notify(
                "Warning",
                "ReassignmentFailed",
                f"{len(result.failed)} partitions are not where the plan put them: {shown}",
            )

    @staticmethod
    def _stored_plan(sts: Mapping[str, Any]) -> ReassignmentPlan | None:
        raw = _annotations(sts).get(PLAN_ANNOTATION)
        if not raw:
            return None
        try:
            return parse_plan(raw)
        except Exception:
            log.warning("ignoring an unreadable %s annotation", PLAN_ANNOTATION)
            return None

    # -- status -------------------------------------------------------------------------

    def _record(
        self,
        sts: Mapping[str, Any],
        observed: Observed,
        decision: Decision,
        extra: Mapping[str, Any],
    ) -> None:
        old = scaling_status(sts)
        fields = {k: v for k, v in extra.items() if k != PLAN_ANNOTATION}
        status: dict[str, Any] = {
            k: old[k]
            for k in ("partitions", "moves", "bytes", "throttleBytesPerSecond")
            if k in old  # the last move's figures stay until the next move
        }
        status.update(fields)
        replicas = observed.spec_replicas
        if isinstance(decision.action, SetReplicas):
            replicas = decision.action.replicas
        elif isinstance(decision.action, FinishReassignment) and decision.action.then_replicas:
            replicas = decision.action.then_replicas
        status.update(
            phase=str(decision.phase),
            desired=observed.desired,
            replicas=replicas,
            message=decision.message,
        )
        if decision.phase in scaling.MOVING_PHASES:
            status["partitionsMoving"] = observed.reassigning
        done = decision.phase is ScalingPhase.STEADY and replicas == observed.desired
        status["conditions"] = conditions.set_condition(
            old.get("conditions"),
            type_=CONDITION,
            status=done,
            reason=EVENT_REASONS[decision.phase] if not done else "AsDesired",
            message=decision.message,
            now=self.now(),
        )
        same_condition = conditions.same(
            conditions.find(old.get("conditions"), CONDITION),
            conditions.find(status["conditions"], CONDITION),
        )
        rest_old = {k: v for k, v in old.items() if k != "conditions"}
        rest_new = {k: v for k, v in status.items() if k != "conditions"}
        if same_condition and rest_old == rest_new and PLAN_ANNOTATION not in extra:
            return  # nothing new: no patch, no watch event
        ann: dict[str, str | None] = {STATUS_ANNOTATION: json.dumps(status, sort_keys=True)}
        if PLAN_ANNOTATION in extra:
            ann[PLAN_ANNOTATION] = extra[PLAN_ANNOTATION]
        self.api.annotate_statefulset(self.namespace, self.statefulset, ann)
        if decision.phase is not observed.phase and not isinstance(decision.action, Refuse):
            reason = EVENT_REASONS[decision.phase]
            if observed.phase is ScalingPhase.REBALANCING:
                reason = "RebalanceFinished"
            elif observed.phase is ScalingPhase.DRAINING and decision.phase is ScalingPhase.STEADY:
                reason = "DrainFinished"
            self.notify("Normal", reason, decision.message)


class ScalingRunner:
    """Runs :meth:`Scaler.step` in a thread, every ``interval_s``, until the cluster is
    STEADY at the desired count; :meth:`poke` (any StatefulSet or pod event) starts it again.

    A step runs only while it holds ``ops``, the lock a roll holds for its whole
    length, so a scaling step and a roll never run at once.  A step that fails
    (cluster unreachable, API error) is logged and tried again after the interval.
    """

    def __init__(
        self,
        step: Callable[[], Decision],
        *,
        interval_s: float,
        ops: threading.Lock,
    ) -> None:
        self._step = step
        self._interval_s = interval_s
        self._ops = ops
        self._lock = threading.Lock()
        self._running = False
        self._again = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last: Decision | None = None

    def poke(self) -> bool:
        """Make sure a loop runs; True if this call started one."""
        with self._lock:
            self._again = True
            if self._running or self._stop.is_set():
                return False
            self._running = True
            ctx = contextvars.copy_context()  # kopf's event posting lives in contextvars
            self._thread = threading.Thread(
                target=ctx.run, args=(self._loop,), name="headwater-scaling", daemon=True
            )
            self._thread.start()
            return True

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    self._again = False
                decision = self._one_step()
                if (
                    decision is not None
                    and decision.phase is ScalingPhase.STEADY
                    and isinstance(decision.action, Hold)
                ):
                    with self._lock:
                        if not self._again:
                            self._running = False
                            return
                    continue
                self._stop.wait(self._interval_s)
        finally:
            with self._lock:
                self._running = False

    def _one_step(self) -> Decision | None:
        if not self._ops.acquire(blocking=False):
            return None  # a roll runs
        try:
            self.last = self._step()
            return self.last
        except Exception:
            log.exception("scaling step failed; trying again in %.0f s", self._interval_s)
            return None
        finally:
            self._ops.release()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
