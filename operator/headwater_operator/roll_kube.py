"""The roll engine's Kubernetes backend: the pods of the broker StatefulSet.

The chart gives the StatefulSet ``updateStrategy: OnDelete``, so Kubernetes
never restarts a broker by itself; a ``helm upgrade`` only moves the
StatefulSet's ``status.updateRevision``.  A pod needs a restart when its
``controller-revision-hash`` label is not that revision, or when
``headwater.io/manual-rolling-update: "true"`` is set on the pod or on the
StatefulSet.  Restarting is deleting the pod: the kubelet sends SIGTERM, the
broker does its controlled shutdown, and the StatefulSet controller creates
the pod again on the update revision.  A broker's id is its pod's ordinal.

Kubernetes is reached through :class:`KubeApi`, four calls on JSON-shaped
dicts, so unit tests use an in-memory fake and production uses
:class:`ClientKubeApi` over the official ``kubernetes`` client.  Roll progress
is written as annotations on the StatefulSet (state, current pod, started,
finished, message), and a finished manual roll clears the trigger annotation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from headwater.roll.engine import Member, RollEvent, RollResult, RollState, RollTarget

from headwater_operator import conditions
from headwater_operator.config import MANUAL_ROLL_ANNOTATION

Obj = dict[str, Any]

REVISION_LABEL = "controller-revision-hash"
VERSION_ANNOTATION = "headwater.io/version"
PROTOCOL_ANNOTATION = "headwater.io/inter-broker-protocol-version"
STATE_ANNOTATION = "headwater.io/roll-state"
CURRENT_ANNOTATION = "headwater.io/roll-current-pod"
STARTED_ANNOTATION = "headwater.io/roll-started"
FINISHED_ANNOTATION = "headwater.io/roll-finished"
MESSAGE_ANNOTATION = "headwater.io/roll-message"


class KubeApi(Protocol):
    """The Kubernetes calls a roll needs (objects as JSON dicts)."""

    def read_statefulset(self, namespace: str, name: str) -> Obj: ...
    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[Obj]: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...
    def annotate_statefulset(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None: ...


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def pod_ready(pod: Mapping[str, Any]) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False


def ordinal(pod_name: str) -> int:
    _, _, suffix = pod_name.rpartition("-")
    if not suffix.isdigit():
        raise ValueError(f"pod {pod_name!r} has no StatefulSet ordinal")
    return int(suffix)


def restart_reason(pod: Mapping[str, Any], sts: Mapping[str, Any]) -> str | None:
    """Why ``pod`` needs a restart (None: it is up to date)."""
    if _annotations(pod).get(MANUAL_ROLL_ANNOTATION) == "true":
        return f"annotation {MANUAL_ROLL_ANNOTATION} on the pod"
    if _annotations(sts).get(MANUAL_ROLL_ANNOTATION) == "true":
        return f"annotation {MANUAL_ROLL_ANNOTATION} on the StatefulSet"
    wanted = (sts.get("status") or {}).get("updateRevision")
    have = ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL)
    if wanted and have != wanted:
        return f"revision {have} is not the StatefulSet's update revision {wanted}"
    return None


class KubeBackend:
    """:class:`headwater.roll.engine.RollBackend` for one broker StatefulSet."""

    def __init__(self, api: KubeApi, *, namespace: str, statefulset: str) -> None:
        self.api = api
        self.namespace = namespace
        self.statefulset = statefulset

    def _sts(self) -> Obj:
        return self.api.read_statefulset(self.namespace, self.statefulset)

    def members(self) -> list[Member]:
        sts = self._sts()
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        prefix = self.statefulset + "-"
        out: list[Member] = []
        for pod in self.api.list_pods(self.namespace, selector):
            meta = pod.get("metadata") or {}
            name = str(meta.get("name") or "")
            if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
                continue
            out.append(
                Member(
                    broker_id=ordinal(name),
                    name=name,
                    ready=pod_ready(pod),
                    incarnation=str(meta.get("uid") or meta.get("resourceVersion") or ""),
                    restart_reason=restart_reason(pod, sts),
                )
            )
        return sorted(out, key=lambda m: m.broker_id)

    def target(self) -> RollTarget:
        template = ((self._sts().get("spec") or {}).get("template")) or {}
        ann = _annotations(template)
        return RollTarget(ann.get(VERSION_ANNOTATION), ann.get(PROTOCOL_ANNOTATION))

    def restart(self, member: Member) -> None:
        self.progress(RollEvent("Normal", "Restarting", "", member.name))
        self.api.delete_pod(self.namespace, member.name)

    def progress(self, event: RollEvent) -> None:
        """Record a step of the roll on the StatefulSet's annotations."""
        ann: dict[str, str | None] = {STATE_ANNOTATION: "Rolling"}
        if event.member is not None:
            ann[CURRENT_ANNOTATION] = event.member
        if event.message:
            ann[MESSAGE_ANNOTATION] = event.message
        self.api.annotate_statefulset(self.namespace, self.statefulset, ann)

    def started(self, now: str) -> None:
        self.api.annotate_statefulset(
            self.namespace,
            self.statefulset,
            {STATE_ANNOTATION: "Rolling", STARTED_ANNOTATION: now, FINISHED_ANNOTATION: None},
        )

    def finished(self, result: RollResult) -> None:
        ann: dict[str, str | None] = {
            STATE_ANNOTATION: str(result.state),
            CURRENT_ANNOTATION: None,
            FINISHED_ANNOTATION: conditions.now_rfc3339(),
            MESSAGE_ANNOTATION: result.message,
        }
        if result.state == RollState.FINISHED:
            ann[MANUAL_ROLL_ANNOTATION] = None
        self.api.annotate_statefulset(self.namespace, self.statefulset, ann)


class ClientKubeApi:
    """:class:`KubeApi` over the official ``kubernetes`` client (in-cluster or kubeconfig)."""

    def __init__(self, api_client: Any = None) -> None:
        import kubernetes

        if api_client is None:
            try:
                kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
            except kubernetes.config.ConfigException:
                kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
            api_client = kubernetes.client.ApiClient()
        self._core = kubernetes.client.CoreV1Api(api_client)
        self._apps = kubernetes.client.AppsV1Api(api_client)

    @staticmethod
    def _json(resp: Any) -> Obj:
        data: Obj = json.loads(resp.data)
        return data

    def read_statefulset(self, namespace: str, name: str) -> Obj:
        return self._json(
            self._apps.read_namespaced_stateful_set(name, namespace, _preload_content=False)
        )

    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[Obj]:
        label_selector = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
        resp = self._core.list_namespaced_pod(
            namespace, label_selector=label_selector, _preload_content=False
        )
        items: list[Obj] = self._json(resp).get("items") or []
        return items

    def delete_pod(self, namespace: str, name: str) -> None:
        self._core.delete_namespaced_pod(name, namespace)

    def annotate_statefulset(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        body = {"metadata": {"annotations": dict(annotations)}}
        self._apps.patch_namespaced_stateful_set(name, namespace, body)
