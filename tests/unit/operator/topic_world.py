"""The Kubernetes side of Topic reconciling, in memory: resources, their status, Events.

:class:`TopicWorld` plays the API server and the kopf layer for
:class:`headwater_operator.topic_reconciler.TopicReconciler`: it stores Topic
resources, computes the claims index as the operator's kopf index does, merges
the returned status into the resource and keeps the Events.  The cluster side
is whatever :class:`TopicAdmin` it is given (a fake here, a real cluster in e2e).
"""

from __future__ import annotations

import itertools
from typing import Any

from headwater_operator.topic_reconciler import (
    Event,
    Outcome,
    TopicAdmin,
    TopicReconciler,
    TopicResource,
)
from headwater_operator.topics import Claim


class TopicWorld:
    def __init__(self, admin: TopicAdmin, *, namespace: str = "default") -> None:
        self.admin = admin
        self.reconciler = TopicReconciler(admin)
        self.namespace = namespace
        self.resources: dict[str, dict[str, Any]] = {}
        self.events: dict[str, list[Event]] = {}
        self._clock = itertools.count(1)

    def _now(self) -> str:
        return f"2026-01-01T00:00:{next(self._clock):02d}Z"

    def apply(
        self, name: str, spec: dict[str, Any], *, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """kubectl apply: create or replace the spec (generation moves on spec changes)."""
        body = self.resources.get(name)
        if body is None:
            body = {
                "apiVersion": "headwater.io/v1",
                "kind": "Topic",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "creationTimestamp": self._now(),
                    "generation": 1,
                },
                "spec": spec,
            }
            self.resources[name] = body
        elif body["spec"] != spec:
            body["spec"] = spec
            body["metadata"]["generation"] += 1
        body["metadata"]["annotations"] = dict(annotations or {})
        return body

    def claims(self, topic_name: str) -> list[Claim]:
        return [
            Claim(b["metadata"]["creationTimestamp"], self.namespace, n)
            for n, b in self.resources.items()
            if (b["spec"].get("topicName") or n) == topic_name
            and (b["metadata"].get("annotations") or {}).get("headwater.io/managed") != "false"
        ]

    def reconcile(self, name: str) -> Outcome:
        body = self.resources[name]
        resource = TopicResource.from_body(body)
        wanted = str(resource.spec.get("topicName") or name)
        outcome = self.reconciler.reconcile(resource, claims=self.claims(wanted), now=self._now())
        body.setdefault("status", {}).update(outcome.status)
        self.events.setdefault(name, []).extend(outcome.events)
        return outcome

    def delete(self, name: str) -> list[Event]:
        body = self.resources.pop(name)
        resource = TopicResource.from_body(body)
        events = self.reconciler.finalize(resource, claims=self.claims(resource.topic_name))
        self.events.setdefault(name, []).extend(events)
        return events

    def ready(self, name: str) -> dict[str, Any]:
        (cond,) = [c for c in self.resources[name]["status"]["conditions"] if c["type"] == "Ready"]
        return cond
