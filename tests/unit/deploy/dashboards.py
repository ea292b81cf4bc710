"""The chart's Grafana dashboards and alerts, and what their PromQL names.

:func:`queries` yields every PromQL of a dashboard (panel targets and the variables'
``label_values`` queries), :func:`rule_queries` every alert's; :func:`names` picks out
the series and label names an expression uses, so a test can check each against what
real brokers export.  A rough reading of PromQL, enough for these expressions:
Headwater's series all start with ``headwater_``, labels appear in ``{...}`` matchers,
``by``/``without`` clauses and ``label_values(metric, label)``, and legends name labels as
``{{label}}`` (alerts' annotations as ``$labels.label``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from tests.unit.deploy.chart import CHART_DIR

DASHBOARDS = CHART_DIR / "files" / "dashboards"
RULES = CHART_DIR / "files" / "alerts" / "headwater-rules.yaml"
TARGET_LABELS = frozenset({"instance", "job", "pod", "namespace", "service", "container"})
"""Labels Prometheus (or the ServiceMonitor) adds to every scraped series."""

_METRIC = re.compile(r"\bheadwater_[a-z0-9_]+\b")
_MATCHERS = re.compile(r"\{([^}]*)\}")
_MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*([a-zA-Z0-9_:]+)\s*,\s*([a-zA-Z0-9_]+)\s*\)")
_LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
_ANNOTATION_LABEL = re.compile(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)")


class Query(NamedTuple):
    dashboard: str
    where: str
    expr: str
    legend: str = ""


class Names(NamedTuple):
    metrics: frozenset[str]
    labels: frozenset[str]


def files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def queries(path: Path) -> Iterator[Query]:
    board = load(path)
    for panel in board.get("panels", []):
        for target in panel.get("targets", []):
            yield Query(
                path.name,
                f"panel {panel['title']!r}",
                target["expr"],
                target.get("legendFormat", ""),
            )
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]
            expr = query["query"] if isinstance(query, dict) else query
            yield Query(path.name, f"variable {var['name']!r}", expr)


def rules() -> list[dict[str, Any]]:
    """Every alerting rule of the chart's PrometheusRule."""
    loaded = yaml.safe_load(RULES.read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def rule_queries() -> Iterator[Query]:
    """Each alert's expression; its annotations' ``$labels.x`` count as its legend."""
    for rule in rules():
        used = " ".join(
            "{{" + label + "}}"
            for text in rule.get("annotations", {}).values()
            for label in _ANNOTATION_LABEL.findall(text)
        )
        yield Query(RULES.name, f"alert {rule['alert']}", rule["expr"], used)


def names(query: Query) -> Names:
    """The series and labels ``query`` names (the expression's and its legend's)."""
    expr = query.expr
    labels: set[str] = set()
    for inner in _MATCHERS.findall(expr):
        labels.update(_MATCHER_LABEL.findall(inner))
    for inner in _GROUPING.findall(expr):
        labels.update(n.strip() for n in inner.split(",") if n.strip())
    for _, label in _LABEL_VALUES.findall(expr):
        labels.add(label)
    labels.update(_LEGEND.findall(query.legend))
    return Names(frozenset(_METRIC.findall(expr)), frozenset(labels))
