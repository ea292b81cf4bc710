"""Committed offsets across a consumer process's death: after commit and SIGKILL, a new
process resumes at the committed offset; with auto-commit off and nothing committed, the
same records come again (at-least-once)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import headwater
import pytest

from tests.e2e.groups.conftest import produce

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).with_name("consumer_process.py")
ROOT = Path(__file__).resolve().parents[3]


def run_until(
    bootstrap: str, topic: str, group: str, mode: str, *, records: int
) -> list[tuple[int, int]]:
    """Run the consumer process until it printed ``records`` records, then SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "node")}
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), bootstrap, topic, group, mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    seen: list[tuple[int, int]] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            parts = line.split()
            if len(parts) == 2:
                seen.append((int(parts[0]), int(parts[1])))
            if len(seen) >= records and (mode != "commit" or parts == ["committed"]):
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
    return seen


def test_restart_after_sigkill_resumes_at_committed_offset(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str]
) -> None:
    name, group = topic(1), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 60)
    first = run_until(cluster.bootstrap, name, group, "commit", records=20)
    assert [o for _, o in first[:20]] == list(range(20))
    committed = admin.list_consumer_group_offsets(group)[headwater.TopicPartition(name, 0)].offset
    assert 20 <= committed <= 60
    second = run_until(cluster.bootstrap, name, group, "commit", records=1)
    assert second[0] == (0, committed)


def test_without_commit_the_same_records_come_again(
    cluster: Any, admin: headwater.Admin, topic: Callable[..., str]
) -> None:
    name, group = topic(1), f"grp-{uuid.uuid4().hex[:8]}"
    produce(cluster.bootstrap, name, 30)
    first = run_until(cluster.bootstrap, name, group, "nocommit", records=10)
    second = run_until(cluster.bootstrap, name, group, "nocommit", records=10)
    assert first[:10] == second[:10] == [(0, o) for o in range(10)]
    assert admin.list_consumer_group_offsets(group) == {}
