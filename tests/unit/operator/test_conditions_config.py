"""Condition bookkeeping (transition times) and the operator's settings from the environment."""

from __future__ import annotations

import pytest
from headwater_operator import conditions
from headwater_operator.config import OperatorConfig, peering_priority


def test_transition_time_moves_only_when_status_changes() -> None:
    first = conditions.set_condition(
        None, type_="Ready", status=False, reason="A", message="a", now="t1"
    )
    again = conditions.set_condition(
        first, type_="Ready", status=False, reason="B", message="b", now="t2"
    )
    flipped = conditions.set_condition(
        again, type_="Ready", status=True, reason="C", message="c", now="t3"
    )
    assert [c["lastTransitionTime"] for c in (first[0], again[0], flipped[0])] == ["t1", "t1", "t3"]
    assert again[0]["reason"] == "B" and flipped[0]["status"] == "True"


def test_other_conditions_are_kept() -> None:
    out = conditions.set_condition(
        [{"type": "Other", "status": "True"}],
        type_="Ready",
        status=True,
        reason="R",
        message="",
        now="t",
    )
    assert [c["type"] for c in out] == ["Other", "Ready"]


def test_config_from_the_charts_environment() -> None:
    cfg = OperatorConfig.from_env(
        {
            "HEADWATER_BOOTSTRAP": "hw-headwater:9092",
            "HEADWATER_BROKER_STATEFULSET": "hw-headwater-broker",
            "POD_NAMESPACE": "kafka",
            "POD_NAME": "hw-headwater-operator-5d8-abcde",
            "HEADWATER_OPERATOR_METRICS_PORT": "9405",
        }
    )
    assert (cfg.bootstrap, cfg.namespace, cfg.broker_statefulset) == (
        "hw-headwater:9092",
        "kafka",
        "hw-headwater-broker",
    )
    assert (
        cfg.metrics_port == 9405 and cfg.resync_interval_s == 120 and cfg.operation_timeout_s == 300
    )


def test_bad_numbers_are_refused_with_the_variable_named() -> None:
    with pytest.raises(ValueError, match="HEADWATER_OPERATOR_METRICS_PORT"):
        OperatorConfig.from_env({"HEADWATER_OPERATOR_METRICS_PORT": "lots"})


def test_peering_priorities_differ_between_replicas_and_are_stable() -> None:
    a, b = peering_priority("op-5d8-abcde"), peering_priority("op-5d8-fghij")
    assert a != b and a == peering_priority("op-5d8-abcde")
    assert 0 < a < 2**31 and peering_priority("") == 0
