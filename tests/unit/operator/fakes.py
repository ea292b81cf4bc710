"""In-memory stand-ins for the cluster (TopicAdmin, ClusterProbe) and Kubernetes (KubeApi).

They hold state like the real thing and refuse what the real thing refuses
(unknown configs, shrinking partitions), so the operator's logic is tested
on behaviour rather than on mocked calls.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from headwater import errors
from headwater.roll.engine import BrokerVersion, ClusterState, PartitionState
from headwater_operator import topics
from headwater_operator.topics import Action, ActualTopic

KNOWN_CONFIGS = {
    "retention.ms": "604800000",
    "cleanup.policy": "delete",
    "min.insync.replicas": "1",
    "segment.bytes": "1073741824",
}


class FakeTopicAdmin:
    """A cluster of ``brokers`` brokers holding topics; counts every mutation."""

    def __init__(self, *, brokers: int = 3, num_partitions: int = 1) -> None:
        self.brokers = brokers
        self.num_partitions = num_partitions
        self.topics: dict[str, ActualTopic] = {}
        self.mutations = 0
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise errors.NetworkError("cannot reach any broker")

    def describe(self, name: str) -> ActualTopic | None:
        self._check()
        return self.topics.get(name)

    def _validate_configs(self, configs: Mapping[str, str]) -> None:
        for k, v in configs.items():
            if k not in KNOWN_CONFIGS:
                raise errors.InvalidConfigError(f"unknown topic config {k!r}")
            if k != "cleanup.policy" and not v.lstrip("-").isdigit():
                raise errors.InvalidConfigError(f"{k} must be an integer, not {v!r}")

    def validate(self, action: Action) -> None:
        self._check()
        if isinstance(action, topics.CreateTopic):
            if action.name in self.topics:
                raise errors.TopicAlreadyExistsError(f"topic {action.name!r} already exists")
            if action.replicas > self.brokers:
                raise errors.InvalidReplicationFactorError(
                    f"replication factor {action.replicas} larger than {self.brokers} brokers"
                )
            self._validate_configs(action.config)
        elif isinstance(action, topics.AlterConfigs):
            self._validate_configs(action.set_configs)

    def apply(self, action: Action) -> None:
        self.validate(action)
        self.mutations += 1
        if isinstance(action, topics.CreateTopic):
            self.topics[action.name] = ActualTopic(
                action.name,
                action.partitions if action.partitions > 0 else self.num_partitions,
                action.replicas if action.replicas > 0 else 1,
                {**KNOWN_CONFIGS, **action.config},
                dict(action.config),
            )
        elif isinstance(action, topics.CreatePartitions):
            t = self.topics[action.name]
            self.topics[action.name] = t._replace(partitions=action.new_total)
        else:
            t = self.topics[action.name]
            dynamic = {k: v for k, v in t.dynamic_config.items() if k not in action.delete_configs}
            dynamic.update(action.set_configs)
            self.topics[action.name] = t._replace(
                dynamic_config=dynamic, config={**KNOWN_CONFIGS, **dynamic}
            )

    def delete(self, name: str) -> bool:
        self._check()
        self.mutations += 1
        return self.topics.pop(name, None) is not None

    def out_of_band(self, name: str, **changes: Any) -> None:
        """Somebody changed the topic with the CLI, behind the operator's back."""
        self.topics[name] = self.topics[name]._replace(**changes)


class World:
    """A broker StatefulSet and the cluster its pods form (for the roll engine).

    Deleting a pod makes it come back ``restart_steps`` observations later with a
    new uid on the update revision; while it is gone its broker is unregistered and
    out of every ISR.  A broker in ``never_back`` stays gone.
    """

    def __init__(self, *, brokers: int = 3, revision: str = "rev-1") -> None:
        self.namespace = "ns"
        self.name = "hw-headwater-broker"
        self.update_revision = revision
        self.sts_annotations: dict[str, str] = {}
        self._uids = itertools.count(1)
        self.pods: dict[str, dict[str, Any]] = {}
        for i in range(brokers):
            self._make_pod(i, revision)
        self.controller_id = 0
        self.partitions: list[PartitionState] = []
        self.min_isr: dict[str, int] = {}
        self.restart_steps = 2
        self.coming_back: dict[str, int] = {}
        self.never_back: set[int] = set()
        self.deleted: list[str] = []
        self.software = {i: "0.1.0" for i in range(brokers)}
        self.protocol = {i: "1" for i in range(brokers)}
        self.template_annotations: dict[str, str] = {}
        self.on_delete: list[Any] = []
        self.annotate_calls: list[dict[str, str | None]] = []
        self.stuck_topics: set[str] = set()

    def _make_pod(self, ordinal: int, revision: str, annotations: Mapping[str, str] = {}) -> None:
        name = f"{self.name}-{ordinal}"
        self.pods[name] = {
            "metadata": {
                "name": name,
                "uid": f"uid-{next(self._uids)}",
                "labels": {"app": "broker", "controller-revision-hash": revision},
                "annotations": dict(annotations),
            },
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }

    def set_ready(self, ordinal: int, ready: bool) -> None:
        pod = self.pods[f"{self.name}-{ordinal}"]
        pod["status"]["conditions"][0]["status"] = "True" if ready else "False"

    def ready(self, ordinal: int) -> bool:
        pod = self.pods.get(f"{self.name}-{ordinal}")
        return pod is not None and pod["status"]["conditions"][0]["status"] == "True"

    def tick(self) -> None:
        for name, steps in list(self.coming_back.items()):
            if steps <= 1:
                del self.coming_back[name]
                self._make_pod(int(name.rsplit("-", 1)[1]), self.update_revision)
            else:
                self.coming_back[name] = steps - 1

    # -- KubeApi ----------------------------------------------------------------------

    def read_statefulset(self, namespace: str, name: str) -> dict[str, Any]:
        assert (namespace, name) == (self.namespace, self.name)
        return {
            "metadata": {"name": name, "annotations": dict(self.sts_annotations)},
            "spec": {
                "selector": {"matchLabels": {"app": "broker"}},
                "template": {"metadata": {"annotations": dict(self.template_annotations)}},
            },
            "status": {"updateRevision": self.update_revision},
        }

    def list_pods(self, namespace: str, selector: Mapping[str, str]) -> list[dict[str, Any]]:
        self.tick()
        return [
            p for p in self.pods.values() if selector.items() <= p["metadata"]["labels"].items()
        ]

    def delete_pod(self, namespace: str, name: str) -> None:
        del self.pods[name]
        self.deleted.append(name)
        ordinal = int(name.rsplit("-", 1)[1])
        if ordinal not in self.never_back:
            self.coming_back[name] = self.restart_steps
        for hook in self.on_delete:
            hook(ordinal)

    def annotate_statefulset(
        self, namespace: str, name: str, annotations: Mapping[str, str | None]
    ) -> None:
        self.annotate_calls.append(dict(annotations))
        for k, v in annotations.items():
            if v is None:
                self.sts_annotations.pop(k, None)
            else:
                self.sts_annotations[k] = v

    # -- ClusterProbe -----------------------------------------------------------------

    def state(self) -> ClusterState:
        live = {i for i in self.software if self.ready(i)}
        brokers = {i: BrokerVersion(self.software[i], self.protocol[i]) for i in sorted(live)}
        parts = [p._replace(isr=tuple(b for b in p.isr if b in live)) for p in self.partitions]
        # A broker that is back rejoins the ISR of what it hosts.
        parts = [
            p._replace(isr=tuple(sorted({*p.isr, *(b for b in p.replicas if b in live)})))
            if p.topic not in self.stuck_topics
            else p
            for p in parts
        ]
        return ClusterState(self.controller_id, brokers, parts, dict(self.min_isr))
