"""The kopf layer: Topic handlers, the broker roll trigger, settings and liveness.

Everything here adapts kopf's callbacks to the kopf-free logic in
:mod:`topic_reconciler` and :mod:`roll`, so the logic is tested without kopf
and this module is tested by running the real operator against kmock.

* Topics: one reconcile function on create, update, resume and a resync timer
  (``resync_interval_s``), a delete handler behind the finalizer
  ``headwater.io/topic``, and an index of every managed Topic by topic name
  for ``ResourceConflict``.  Every handler is filtered on the annotation
  ``headwater.io/managed`` not being ``"false"``, so detaching a Topic also
  drops its finalizer (kopf removes a finalizer no handler needs) and deleting
  it then leaves the topic.  kopf keeps its progress in ``headwater.io/*``
  annotations, not in ``status``, which the CRD's schema would prune.
* Rolls: watching the broker StatefulSet and its pods (event handlers, which
  need no finalizer, unlike kopf timers and daemons) pokes a
  :class:`RollRunner`, which runs at most one roll at a time in a thread.
* Scaling: the same watches poke a :class:`scaling_kube.ScalingRunner`, which
  steps :mod:`scaling` until the brokers are as many as
  ``headwater.io/desired-brokers`` asks.  A roll holds ``ops`` for its whole
  length and a scaling step holds it while it runs, so the two never overlap,
  and a roll is deferred while replicas move (a rebalance or drain).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

import kopf
from headwater.client import Admin
from headwater.roll.engine import (
    ClusterProbe,
    Roller,
    RollEvent,
    RollResult,
    RollSettings,
    RollState,
)
from headwater.roll.probe import AdminProbe

from headwater_operator import conditions, metrics, scaling, scaling_kube, user_handlers
from headwater_operator.config import (
    MANAGED_ANNOTATION,
    MANUAL_ROLL_ANNOTATION,
    PERSISTENCE_PREFIX,
    TOPIC_FINALIZER,
    OperatorConfig,
    peering_priority,
)
from headwater_operator.roll_kube import KubeApi, KubeBackend
from headwater_operator.topic_reconciler import (
    AdminTopics,
    Outcome,
    TopicAdmin,
    TopicReconciler,
    TopicResource,
)
from headwater_operator.topics import Claim

log = logging.getLogger(__name__)

TOPICS = ("headwater.io", "v1", "topics")


def managed(annotations: Mapping[str, str], **_: Any) -> bool:
    """``headwater.io/managed: "false"`` detaches a Topic from the operator."""
    return annotations.get(MANAGED_ANNOTATION, "true").strip().lower() != "false"


def claims_of(index: Any, topic_name: str) -> list[Claim]:
    """Every managed Topic naming ``topic_name``, from the kopf index (a mapping of stores)."""
    try:
        store = index[topic_name]
    except KeyError:
        return []
    return list(store)


def _post(body: Any, type_: str, reason: str, message: str) -> None:
    try:
        kopf.event(body, type=type_, reason=reason, message=message[:1024])
    except LookupError:  # no kopf context (the logic driven outside an operator)
        log.info("%s %s: %s", type_, reason, message)


class RollRunner:
    """Starts at most one roll at a time; does not retry a failed one for the same trigger
    until ``cooldown_s`` passed (so a refused or aborted roll is not hammered on every
    watch event)."""

    def __init__(
        self,
        start: Callable[[Mapping[str, Any]], RollResult],
        *,
        cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._start = start
        self._cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._failed: tuple[str, float] | None = None
        self.last: RollResult | None = None

    def poke(self, trigger: str, sts: Mapping[str, Any]) -> bool:
        """Start a roll for ``trigger`` (a key of what asked for it) unless one runs."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            if self._failed is not None:
                key, when = self._failed
                if key == trigger and self._clock() - when < self._cooldown_s:
                    return False
            ctx = contextvars.copy_context()  # kopf's event posting lives in contextvars
            self._thread = threading.Thread(
                target=ctx.run, args=(self._run, trigger, sts), name="headwater-roll", daemon=True
            )
            self._thread.start()
            return True

    def _run(self, trigger: str, sts: Mapping[str, Any]) -> None:
        try:
            result = self._start(sts)
        except Exception:
            log.exception("roll failed")
            result = RollResult(RollState.ABORTED, (), "roll failed with an exception")
        with self._lock:
            self.last = result
            failed = result.state in (RollState.ABORTED, RollState.REFUSED)
            self._failed = (trigger, self._clock()) if failed else None

    def join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)


def trigger_key(sts: Mapping[str, Any]) -> str:
    ann = (sts.get("metadata") or {}).get("annotations") or {}
    rev = (sts.get("status") or {}).get("updateRevision") or ""
    return f"{rev}|{ann.get(MANUAL_ROLL_ANNOTATION, '')}"


def register(
    registry: kopf.OperatorRegistry,
    config: OperatorConfig,
    *,
    topic_admin: Callable[[], TopicAdmin] | None = None,
    kube_api: Callable[[], KubeApi] | None = None,
    cluster_probe: Callable[[], ClusterProbe] | None = None,
    scaling_admin: Callable[[], scaling_kube.ReassignmentAdmin] | None = None,
    users: Mapping[str, Any] | None = None,
) -> None:
    """Register every handler on ``registry``; the factories let tests swap the clients
    (``users``: the keyword arguments of :func:`user_handlers.register`)."""
    state: dict[str, Any] = {}

    def reconciler() -> TopicReconciler:
        if "reconciler" not in state:
            admin = (
                topic_admin()
                if topic_admin
                else AdminTopics(Admin(config.bootstrap, **config.admin_options()))
            )
            state["reconciler"] = TopicReconciler(admin)
        rec: TopicReconciler = state["reconciler"]
        return rec

    @kopf.on.startup(registry=registry)
    def configure(**kw: Any) -> None:
        settings: kopf.OperatorSettings = kw["settings"]
        settings.persistence.finalizer = TOPIC_FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(
            prefix=PERSISTENCE_PREFIX
        )
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=PERSISTENCE_PREFIX, key="last-handled-configuration"
        )
        settings.posting.level = logging.INFO
        if config.pod_name and not settings.peering.priority:
            settings.peering.priority = peering_priority(config.pod_name)
        metrics.serve(config.metrics_port)

    @kopf.on.probe(id="topics", registry=registry)
    def probe_topics(**_: Any) -> int:
        return 1

    @kopf.index(*TOPICS, id="topic_claims", when=managed, registry=registry)
    def topic_claims(**kw: Any) -> dict[str, Claim]:
        name, namespace, meta, spec = kw["name"], kw["namespace"], kw["meta"], kw["spec"]
        topic_name = str(spec.get("topicName") or name)
        return {topic_name: Claim(str(meta.get("creationTimestamp") or ""), namespace, name)}

    def reconcile(**kw: Any) -> None:
        body: Mapping[str, Any] = kw["body"]
        patch: kopf.Patch = kw["patch"]
        resource = TopicResource.from_body(body)
        desired_name = str(resource.spec.get("topicName") or resource.name)
        with metrics.reconcile_timer("Topic"):
            outcome: Outcome = reconciler().reconcile(
                resource,
                claims=claims_of(kw["topic_claims"], desired_name),
                now=conditions.now_rfc3339(),
            )
        refused = outcome.refusal.reason if outcome.refusal else None
        metrics.reconciled("Topic", refused_reason=refused)
        status = dict(resource.status)
        status.update(outcome.status)
        if status != dict(resource.status):
            patch.setdefault("status", {}).update(outcome.status)
        for event in outcome.events:
            _post(body, event.type, event.reason, event.message)
        if outcome.retriable and outcome.refusal is not None:
            raise kopf.TemporaryError(outcome.refusal.message, delay=10)

    for decorator in (kopf.on.create, kopf.on.update, kopf.on.resume):
        decorator(*TOPICS, id="reconcile", when=managed, registry=registry)(reconcile)

    @kopf.timer(
        *TOPICS,
        id="resync",
        interval=config.resync_interval_s,
        initial_delay=config.resync_interval_s,
        when=managed,
        registry=registry,
    )
    def resync(**kw: Any) -> None:
        reconcile(**kw)

    @kopf.on.delete(*TOPICS, id="delete-topic", when=managed, registry=registry)
    def delete_topic(**kw: Any) -> None:
        body: Mapping[str, Any] = kw["body"]
        resource = TopicResource.from_body(body)
        claims = [
            c for c in claims_of(kw["topic_claims"], resource.topic_name) if c != resource.claim
        ]
        try:
            events = reconciler().finalize(resource, claims=claims)
        except Exception as exc:
            metrics.reconciled("Topic", error=True)
            raise kopf.TemporaryError(
                f"cannot delete topic {resource.topic_name}: {exc}", delay=10
            ) from exc
        for event in events:
            _post(body, event.type, event.reason, event.message)

    user_handlers.register(registry, config, **(users or {}))

    if config.broker_statefulset:
        _register_roll(
            registry,
            config,
            kube_api=kube_api,
            cluster_probe=cluster_probe,
            scaling_admin=scaling_admin,
        )


def _register_roll(
    registry: kopf.OperatorRegistry,
    config: OperatorConfig,
    *,
    kube_api: Callable[[], KubeApi] | None,
    cluster_probe: Callable[[], ClusterProbe] | None,
    scaling_admin: Callable[[], scaling_kube.ReassignmentAdmin] | None = None,
) -> None:
    sts_name = config.broker_statefulset
    holder: dict[str, KubeApi] = {}
    ops = threading.Lock()  # one roll or scaling step at a time

    def api() -> KubeApi:
        if "api" not in holder:
            holder["api"] = kube_api() if kube_api else scaling_kube.ClientScalingKubeApi()
        return holder["api"]

    def run_roll(sts: Mapping[str, Any]) -> RollResult:
        with ops:
            return _run_roll(sts)

    def _run_roll(sts: Mapping[str, Any]) -> RollResult:
        backend = KubeBackend(api(), namespace=config.namespace, statefulset=sts_name)
        phase = scaling_kube.phase_of(api().read_statefulset(config.namespace, sts_name))
        if phase in scaling.MOVING_PHASES:
            return RollResult(RollState.NOTHING_TO_DO, (), f"roll deferred: scaling is {phase}")

        def notify(event: RollEvent) -> None:
            _post(sts, event.type, event.reason, event.message)
            if event.member is not None and event.reason != "Restarting":
                backend.progress(event)

        if not any(m.restart_reason for m in backend.members()):
            return RollResult(RollState.NOTHING_TO_DO, (), "every broker is up to date")
        backend.started(conditions.now_rfc3339())
        with contextlib.ExitStack() as stack:
            if cluster_probe is not None:
                probe = cluster_probe()
            else:
                admin = stack.enter_context(Admin(config.bootstrap, **config.admin_options()))
                probe = AdminProbe(admin)
            roller = Roller(
                backend,
                probe,
                settings=RollSettings(operation_timeout_s=config.operation_timeout_s),
                notify=notify,
                metrics=metrics.PrometheusRollObserver(),
            )
            return roller.run()

    runner = RollRunner(run_roll, cooldown_s=config.operation_timeout_s)
    latest: dict[str, Mapping[str, Any]] = {}
    scaler = _scaling_runner(config, api=api, ops=ops, admin=scaling_admin, probe=cluster_probe)

    @kopf.on.cleanup(registry=registry)
    def stop_scaling(**_: Any) -> None:
        scaler.stop()

    def is_broker_sts(**kw: Any) -> bool:
        return bool(kw["name"] == sts_name and kw["namespace"] == config.namespace)

    def is_broker_pod(**kw: Any) -> bool:
        name: str = kw["name"]
        suffix = name[len(sts_name) + 1 :]
        return bool(
            kw["namespace"] == config.namespace
            and name.startswith(sts_name + "-")
            and suffix.isdigit()
        )

    @kopf.on.event("apps", "v1", "statefulsets", when=is_broker_sts, registry=registry)
    def broker_statefulset_changed(**kw: Any) -> None:
        body: Mapping[str, Any] = kw["body"]
        if kw.get("type") == "DELETED":
            return
        latest["sts"] = body
        runner.poke(trigger_key(body), body)
        scaler.poke()

    @kopf.on.event("", "v1", "pods", when=is_broker_pod, registry=registry)
    def broker_pod_changed(**kw: Any) -> None:
        body: Mapping[str, Any] = kw["body"]
        sts = latest.get("sts")
        ann = (body.get("metadata") or {}).get("annotations") or {}
        scaler.poke()  # readiness of a new broker, or a removed pod gone
        if (
            kw.get("type") != "DELETED"
            and sts is not None
            and ann.get(MANUAL_ROLL_ANNOTATION) == "true"
        ):
            runner.poke(f"pod|{body['metadata'].get('uid')}", sts)


def _scaling_runner(
    config: OperatorConfig,
    *,
    api: Callable[[], KubeApi],
    ops: threading.Lock,
    admin: Callable[[], scaling_kube.ReassignmentAdmin] | None,
    probe: Callable[[], ClusterProbe] | None,
) -> scaling_kube.ScalingRunner:
    """The broker-scaling loop; its Admin client is made on first use and kept."""
    held: dict[str, scaling_kube.Scaler] = {}

    def step() -> scaling.Decision:
        if "scaler" not in held:
            real = None if admin is not None else Admin(config.bootstrap, **config.admin_options())
            client = admin() if admin is not None else cast(scaling_kube.ReassignmentAdmin, real)
            kube: Any = api()  # a ScalingKubeApi: ClientScalingKubeApi, or a test's
            held["scaler"] = scaling_kube.Scaler(
                kube,
                client,
                probe() if probe is not None else AdminProbe(cast(Any, real or client)),
                namespace=config.namespace,
                statefulset=config.broker_statefulset,
                auto_rebalance=config.auto_rebalance,
                throttle_bytes_per_s=config.rebalance_throttle_bytes_per_s,
                notify=lambda type_, reason, message: _post(
                    api().read_statefulset(config.namespace, config.broker_statefulset),
                    type_,
                    reason,
                    message,
                ),
            )
        return held["scaler"].step()

    return scaling_kube.ScalingRunner(step, interval_s=config.scaling_check_interval_s, ops=ops)
