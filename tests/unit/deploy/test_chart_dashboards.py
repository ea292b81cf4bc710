"""The chart's Grafana dashboards: ConfigMaps for Grafana's sidecar, off by default.

That every expression names a series the brokers really export is checked against real
brokers in tests/e2e/deploy/test_dashboard_metrics.py.
"""

from __future__ import annotations

import json

from tests.unit.deploy import chart, dashboards
from tests.unit.deploy.dashboards import Query

ON = {"metrics": {"dashboards": {"enabled": True}}}


def test_off_by_default() -> None:
    assert [
        o for o in chart.find(chart.render(), "ConfigMap") if "dashboard" in o["metadata"]["name"]
    ] == []


def test_one_configmap_per_dashboard_for_the_sidecar() -> None:
    objs = [
        o
        for o in chart.find(chart.render(ON), "ConfigMap")
        if "-dashboard-" in o["metadata"]["name"]
    ]
    assert sorted(o["metadata"]["name"] for o in objs) == [
        "hw-headwater-dashboard-brokers",
        "hw-headwater-dashboard-consumer-lag",
        "hw-headwater-dashboard-topics",
    ]
    uids = set()
    for obj in objs:
        assert obj["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert obj["metadata"]["namespace"] == chart.NAMESPACE
        assert chart.k8s_errors(obj) == []
        [(key, text)] = obj["data"].items()
        board = json.loads(text)
        assert board == dashboards.load(dashboards.DASHBOARDS / key)
        assert board["tags"] == ["headwater"]
        uids.add(board["uid"])
    assert len(uids) == 3


def test_labels_namespace_and_folder_are_settable() -> None:
    values = {
        "metrics": {
            "dashboards": {
                "enabled": True,
                "labels": {"team": "data"},
                "namespace": "monitoring",
                "folder": "Headwater",
            }
        }
    }
    objs = [
        o
        for o in chart.find(chart.render(values), "ConfigMap")
        if "-dashboard-" in o["metadata"]["name"]
    ]
    assert len(objs) == 3
    for obj in objs:
        assert obj["metadata"]["labels"]["team"] == "data"
        assert obj["metadata"]["namespace"] == "monitoring"
        assert obj["metadata"]["annotations"] == {"grafana_folder": "Headwater"}
    assert "dashboards" in chart.template_error({"metrics": {"dashboards": {"enabled": "yes"}}})


def test_every_panel_has_a_query_naming_a_headwater_series() -> None:
    for path in dashboards.files():
        board = dashboards.load(path)
        assert board["panels"], path.name
        for panel in board["panels"]:
            assert panel["targets"], f"{path.name}: {panel['title']}"
        for query in dashboards.queries(path):
            assert dashboards.names(query).metrics, query


def test_names_are_read_from_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, rpc) (rate(headwater_x_bucket{outcome!="ok", '
        'topic=~"$topic"}[5m]))) / ignoring(a) headwater_y'
    )
    got = dashboards.names(Query("d", "p", expr, "{{rpc}} {{ group }}"))
    assert got.metrics == {"headwater_x_bucket", "headwater_y"}
    assert got.labels == {"le", "rpc", "outcome", "topic", "group"}
    got = dashboards.names(Query("d", "v", "label_values(headwater_log_size_bytes, topic)"))
    assert got == dashboards.Names(frozenset({"headwater_log_size_bytes"}), frozenset({"topic"}))


def test_the_prometheus_rule_is_off_by_default_and_carries_the_alerts() -> None:
    assert chart.find(chart.render(), "PrometheusRule") == []
    values = {"metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "kps"}}}}
    [rule] = chart.find(chart.render(values), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kps"
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert alerts == dashboards.rules()
    assert {a["alert"] for a in alerts} >= {
        "HeadwaterNoActiveController",
        "HeadwaterOfflinePartitions",
        "HeadwaterUnderReplicatedPartitions",
        "HeadwaterIsrShrinking",
        "HeadwaterConsumerLagGrowing",
        "HeadwaterLogDirNearlyFull",
        "HeadwaterCertificateExpiring",
    }
    for alert in alerts:
        assert alert["labels"]["severity"] in ("warning", "critical"), alert["alert"]
        assert alert["annotations"]["summary"] and alert["annotations"]["runbook"]
        assert dashboards.names(dashboards.Query("", "", alert["expr"])).metrics


def test_annotation_labels_count_as_used() -> None:
    [lag] = [q for q in dashboards.rule_queries() if q.where == "alert HeadwaterConsumerLagGrowing"]
    assert dashboards.names(lag).labels == {"group", "topic"}
