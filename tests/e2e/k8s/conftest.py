"""The Kubernetes tier's failure report: the cluster's state when a test or its setup fails.

A wait that times out in CI leaves nothing behind (the cluster is stopped afterwards), so the
first failures carry :func:`kube.diagnose` in their report.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from tests.e2e.k8s import kube

DIAGNOSES_LEFT = [2]
"""How many more failure reports carry the cluster's state (a failed module fixture fails every
test after it the same way)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and DIAGNOSES_LEFT[0] > 0 and kube.missing() is None:
        DIAGNOSES_LEFT[0] -= 1
        report.sections.append((f"the cluster when {report.when} failed", kube.diagnose()))
    return report
