"""The operator's rolls and scaling as the console shows them, read from Kubernetes.

The operator records both on the brokers' StatefulSet, and the pods say the rest:

* a roll: ``headwater.io/roll-state`` (``Rolling`` while it runs, then the engine's
  result: ``Finished``, ``NothingToDo``, ``Aborted``, ``Refused``),
  ``roll-current-pod`` (the broker being restarted or waited for), ``roll-started``,
  ``roll-finished``, ``roll-message``; it was asked for by a new
  ``status.updateRevision`` (a ``helm upgrade``) or by
  ``headwater.io/manual-rolling-update: "true"`` on the StatefulSet or a pod;
* scaling: ``headwater.io/desired-brokers`` (what the user asked for) and
  ``headwater.io/scaling-status``, JSON with ``phase``, ``desired``, ``replicas``,
  ``message``, the move's ``partitions``/``moves``/``bytes``/``throttleBytesPerSecond``,
  ``partitionsMoving`` while it runs, and a ``Scaled`` condition.

:func:`progress` turns a StatefulSet and its pods (Kubernetes JSON as dicts) into an
:class:`OperatorProgress`; it does no I/O and never raises on odd or missing fields (an
unreadable field reads as absent).  :class:`KubeReader` is the I/O: two GETs with the
console's read-only ServiceAccount (the chart's Role: get/list/watch on the StatefulSet and
the namespace's pods).  :func:`reader_from` decides whether the console has Kubernetes access
at all: in a pod with a mounted ServiceAccount token, or with ``--kubeconfig``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = Mapping[str, Any]

STATE_ANNOTATION = "headwater.io/roll-state"
CURRENT_ANNOTATION = "headwater.io/roll-current-pod"
STARTED_ANNOTATION = "headwater.io/roll-started"
FINISHED_ANNOTATION = "headwater.io/roll-finished"
MESSAGE_ANNOTATION = "headwater.io/roll-message"
MANUAL_ROLL_ANNOTATION = "headwater.io/manual-rolling-update"
DESIRED_ANNOTATION = "headwater.io/desired-brokers"
SCALING_STATUS_ANNOTATION = "headwater.io/scaling-status"
REVISION_LABEL = "controller-revision-hash"
ROLLING = "Rolling"
STEADY = "Steady"

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

NO_ACCESS = (
    "The operator's rolls and scaling need Kubernetes access: the console reads them from the "
    "brokers' StatefulSet. Run it in the chart (console.enabled, console.kubernetesAccess) "
    "or give `headwater console` a --kubeconfig that may read the StatefulSet and its pods."
)


@dataclass(frozen=True)
class BrokerPod:
    """One broker's pod: ``updated`` when a running roll has nothing left to do on it."""

    name: str
    broker_id: int
    ready: bool
    updated: bool
    restarting: bool


@dataclass(frozen=True)
class RollProgress:
    """The running or last roll.  ``state`` is empty when the operator never rolled.

    ``done`` of ``total`` brokers are Ready and need no restart; while a roll runs
    ``current`` is the broker being restarted or waited for."""

    state: str
    current: str | None
    started: str | None
    finished: str | None
    message: str
    done: int
    total: int
    waiting: tuple[str, ...]

    @property
    def running(self) -> bool:
        return self.state == ROLLING

    @property
    def percent(self) -> int:
        return 100 if self.total == 0 else self.done * 100 // self.total


@dataclass(frozen=True)
class ScalingProgress:
    """Scaling: the count asked for against the StatefulSet's and the Ready pods'."""

    phase: str
    desired: int | None
    replicas: int
    ready: int
    message: str
    partitions: int | None
    moves: int | None
    bytes: int | None
    throttle_bytes_per_s: int | None
    partitions_moving: int | None
    scaled: bool | None
    """The ``Scaled`` condition (None: not recorded yet)."""

    @property
    def running(self) -> bool:
        return self.phase != STEADY or (self.desired is not None and self.desired != self.ready)


@dataclass(frozen=True)
class OperatorProgress:
    namespace: str
    statefulset: str
    brokers: tuple[BrokerPod, ...]
    roll: RollProgress
    scaling: ScalingProgress


# -- parsing (pure) ------------------------------------------------------------------------


def _meta(obj: Obj) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _annotations(obj: Obj) -> Mapping[str, Any]:
    ann = _meta(obj).get("annotations")
    return ann if isinstance(ann, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(value: Any) -> int | None:
    """A non-negative int from JSON or an annotation's text; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def pod_ready(pod: Obj) -> bool:
    """Ready and not being deleted."""
    if _meta(pod).get("deletionTimestamp"):
        return False
    status = pod.get("status")
    for c in (status.get("conditions") if isinstance(status, Mapping) else None) or ():
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def broker_ordinal(statefulset: str, pod_name: str) -> int | None:
    """The ordinal of a pod of ``statefulset`` (None: not one of its pods)."""
    prefix = statefulset + "-"
    suffix = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def pod_updated(pod: Obj, sts: Obj) -> bool:
    """Whether the roll has nothing left to do on ``pod``: Ready, on the StatefulSet's
    update revision, and, for a roll asked for by the manual annotation, created after the
    roll started (the annotation stays until the whole roll finishes)."""
    if not pod_ready(pod):
        return False
    status = sts.get("status")
    wanted = status.get("updateRevision") if isinstance(status, Mapping) else None
    labels = _meta(pod).get("labels")
    have = labels.get(REVISION_LABEL) if isinstance(labels, Mapping) else None
    if wanted and have != wanted:
        return False
    manual = "true" in (
        _annotations(sts).get(MANUAL_ROLL_ANNOTATION),
        _annotations(pod).get(MANUAL_ROLL_ANNOTATION),
    )
    if manual:
        started = _time(_annotations(sts).get(STARTED_ANNOTATION))
        created = _time(_meta(pod).get("creationTimestamp"))
        return started is not None and created is not None and created >= started
    return True


def roll_progress(sts: Obj, brokers: Sequence[BrokerPod]) -> RollProgress:
    ann = _annotations(sts)
    state = _text(ann.get(STATE_ANNOTATION)) or ""
    return RollProgress(
        state=state,
        current=_text(ann.get(CURRENT_ANNOTATION)) if state == ROLLING else None,
        started=_text(ann.get(STARTED_ANNOTATION)),
        finished=_text(ann.get(FINISHED_ANNOTATION)),
        message=_text(ann.get(MESSAGE_ANNOTATION)) or "",
        done=sum(1 for b in brokers if b.updated),
        total=len(brokers),
        waiting=tuple(b.name for b in brokers if not b.updated),
    )


def scaling_status(sts: Obj) -> Mapping[str, Any]:
    """The operator's recorded scaling status (empty when absent or unreadable)."""
    raw = _annotations(sts).get(SCALING_STATUS_ANNOTATION)
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def scaling_progress(sts: Obj, brokers: Sequence[BrokerPod]) -> ScalingProgress:
    status = scaling_status(sts)
    spec = sts.get("spec")
    replicas = _count(spec.get("replicas") if isinstance(spec, Mapping) else None)
    desired = _count(_annotations(sts).get(DESIRED_ANNOTATION))
    if desired is None:
        desired = _count(status.get("desired"))
    scaled: bool | None = None
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == "Scaled":
            scaled = c.get("status") == "True"
    return ScalingProgress(
        phase=_text(status.get("phase")) or STEADY,
        desired=desired if desired is not None else replicas,
        replicas=replicas if replicas is not None else 1,
        ready=sum(1 for b in brokers if b.ready),
        message=_text(status.get("message")) or "",
        partitions=_count(status.get("partitions")),
        moves=_count(status.get("moves")),
        bytes=_count(status.get("bytes")),
        throttle_bytes_per_s=_count(status.get("throttleBytesPerSecond")),
        partitions_moving=_count(status.get("partitionsMoving")),
        scaled=scaled,
    )


def progress(namespace: str, sts: Obj, pods: Sequence[Obj]) -> OperatorProgress:
    """The StatefulSet's and its pods' state as the console shows it (pods of other
    workloads are ignored)."""
    name = _text(_meta(sts).get("name")) or ""
    ann = _annotations(sts)
    current = _text(ann.get(CURRENT_ANNOTATION)) if ann.get(STATE_ANNOTATION) == ROLLING else None
    brokers: list[BrokerPod] = []
    for pod in pods:
        pod_name = _text(_meta(pod).get("name")) or ""
        ordinal = broker_ordinal(name, pod_name)
        if ordinal is None:
            continue
        brokers.append(
            BrokerPod(
                name=pod_name,
                broker_id=ordinal,
                ready=pod_ready(pod),
                updated=pod_updated(pod, sts),
                restarting=pod_name == current,
            )
        )
    brokers.sort(key=lambda b: b.broker_id)
    return OperatorProgress(
        namespace=namespace,
        statefulset=name,
        brokers=tuple(brokers),
        roll=roll_progress(sts, brokers),
        scaling=scaling_progress(sts, brokers),
    )


# -- reading Kubernetes ---------------------------------------------------------------------


class KubeAccessError(Exception):
    """Kubernetes did not answer or refused (the message says which and why)."""


class KubeReader:
    """Reads one broker StatefulSet and its pods with the official ``kubernetes`` client."""

    def __init__(self, api_client: Any, *, namespace: str, statefulset: str) -> None:
        import kubernetes

        self.namespace = namespace
        self.statefulset = statefulset
        self._core = kubernetes.client.CoreV1Api(api_client)
        self._apps = kubernetes.client.AppsV1Api(api_client)

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Obj:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = fn(*args, _preload_content=False, _request_timeout=10, **kwargs)
        except ApiException as exc:
            raise KubeAccessError(f"Kubernetes refused {what}: {exc.status} {exc.reason}") from None
        except Exception as exc:  # urllib3's connection errors
            raise KubeAccessError(f"Kubernetes did not answer {what}: {exc}") from None
        data = json.loads(resp.data)
        if not isinstance(data, dict):
            raise KubeAccessError(f"Kubernetes answered {what} with no object")
        return data

    def read(self) -> OperatorProgress:
        sts = self._call(
            f"reading StatefulSet {self.namespace}/{self.statefulset}",
            self._apps.read_namespaced_stateful_set,
            self.statefulset,
            self.namespace,
        )
        spec = sts.get("spec") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        pods = self._call(
            f"listing the pods of {self.namespace}/{self.statefulset}",
            self._core.list_namespaced_pod,
            self.namespace,
            label_selector=",".join(f"{k}={v}" for k, v in sorted(selector.items())),
        )
        return progress(self.namespace, sts, pods.get("items") or [])


def in_cluster() -> bool:
    """A pod with a mounted ServiceAccount token (what the chart gives the console)."""
    return (
        bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        and (SERVICE_ACCOUNT_DIR / "token").is_file()
    )


def reader_from(
    *, kubeconfig: str | None, namespace: str | None, statefulset: str
) -> tuple[KubeReader | None, str]:
    """(a reader, "") when the console has Kubernetes access, else (None, why not).

    ``kubeconfig`` first; otherwise the pod's ServiceAccount when in a cluster.  The
    namespace defaults to the pod's own (in a cluster) or the kubeconfig context's."""
    if not kubeconfig and not in_cluster():
        return None, NO_ACCESS
    try:
        import kubernetes
    except ModuleNotFoundError:
        return None, (
            "The operator's rolls and scaling need the kubernetes package: "
            "pip install 'headwater[operator]'"
        )
    try:
        if kubeconfig:
            api_client = kubernetes.config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
            if namespace is None:
                _, context = kubernetes.config.list_kube_config_contexts(kubeconfig)  # type: ignore[no-untyped-call]
                namespace = (context.get("context") or {}).get("namespace") or "default"
        else:
            kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = kubernetes.client.ApiClient()
            if namespace is None:
                namespace = (SERVICE_ACCOUNT_DIR / "namespace").read_text().strip()
    except (kubernetes.config.ConfigException, OSError) as exc:
        return None, f"The operator's rolls and scaling are not shown: {exc}"
    return KubeReader(api_client, namespace=namespace, statefulset=statefulset), ""
