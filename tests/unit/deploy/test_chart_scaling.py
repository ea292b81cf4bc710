"""The chart's side of broker scaling: the desired count, the drain switch, the operator's
rebalance settings, and the schema refusing bad values.

``brokers.replicas`` becomes the StatefulSet annotation ``headwater.io/desired-brokers``,
which the operator reads (the same parser is applied to the rendered object here); the
rendered ``spec.replicas`` is ``brokers.replicas`` on an install.  On an upgrade the
template keeps the live ``spec.replicas`` through ``lookup``, which ``helm template``
cannot exercise (no cluster: lookup returns nothing); the Kubernetes tier
(tests/e2e/k8s/test_k8s_scaling.py) covers that path.
"""

from __future__ import annotations

from typing import Any

import pytest
from headwater_operator import scaling_kube
from headwater_operator.config import OperatorConfig

from tests.unit.deploy import chart


def operator_env(objs: list[dict[str, Any]]) -> dict[str, str]:
    (deploy,) = chart.component(objs, "Deployment", "operator")
    (container,) = deploy["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def test_defaults_desire_three_brokers_without_drain_and_rebalance_throttled() -> None:
    objs = chart.render()
    sts = chart.broker_statefulset(objs)
    ann = sts["metadata"]["annotations"]
    assert ann["headwater.io/desired-brokers"] == "3"
    assert ann["headwater.io/drain-on-scale-down"] == "false"
    assert sts["spec"]["replicas"] == 3
    env = operator_env(objs)
    assert env["HEADWATER_AUTO_REBALANCE"] == "true"
    assert env["HEADWATER_REBALANCE_THROTTLE_BYTES_PER_S"] == "10485760"
    config = OperatorConfig.from_env(env)
    assert config.auto_rebalance is True
    assert config.rebalance_throttle_bytes_per_s == 10485760


def test_values_reach_the_annotations_and_the_operator() -> None:
    objs = chart.render(
        {
            "brokers": {"replicas": 5, "drainOnScaleDown": True},
            "operator": {"autoRebalance": False, "rebalanceThrottleBytesPerSecond": 0},
        }
    )
    sts = chart.broker_statefulset(objs)
    assert scaling_kube.desired_brokers(sts) == 5
    assert scaling_kube.drain_on_scale_down(sts) is True
    assert sts["spec"]["replicas"] == 5  # an install: nothing live to keep
    config = OperatorConfig.from_env(operator_env(objs))
    assert config.auto_rebalance is False and config.rebalance_throttle_bytes_per_s == 0


def test_a_large_throttle_renders_as_an_integer() -> None:
    objs = chart.render({"operator": {"rebalanceThrottleBytesPerSecond": 2_000_000_000}})
    assert operator_env(objs)["HEADWATER_REBALANCE_THROTTLE_BYTES_PER_S"] == "2000000000"


def test_without_the_operator_helm_owns_the_replicas() -> None:
    sts = chart.broker_statefulset(chart.render({"operator": {"enabled": False}}))
    assert sts["spec"]["replicas"] == 3


def test_rendered_statefulset_still_validates() -> None:
    sts = chart.broker_statefulset(chart.render({"brokers": {"replicas": 4}}))
    assert chart.k8s_errors(sts) == []


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"brokers": {"drainOnScaleDown": "yes"}}, "drainOnScaleDown"),
        ({"operator": {"autoRebalance": "no"}}, "autoRebalance"),
        ({"operator": {"rebalanceThrottleBytesPerSecond": -1}}, "rebalanceThrottleBytesPerSecond"),
        ({"operator": {"rebalanceThrottleBytesPerSecond": "10MB"}}, "rebalanceThrottle"),
        ({"brokers": {"replicas": 0}}, "replicas"),
    ],
)
def test_bad_scaling_values_are_refused(values: dict[str, Any], where: str) -> None:
    assert where in chart.template_error(values)
