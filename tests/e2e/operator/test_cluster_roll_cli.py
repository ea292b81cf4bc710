"""``headwater cluster roll`` against a real ``headwater dev`` cluster, as a user runs it.

Starts a dev cluster (its own processes, detached), rolls it (every broker
restarted once, JSON result on stdout), checks the protocol-version refusal
exits non-zero, and always takes the cluster down again; ``cluster describe``
then shows every broker's software and protocol version.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater import __version__

pytestmark = pytest.mark.e2e


def headwater(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[Path]:
    data_dir = tmp_path / "dev"
    up = headwater("dev", "up", "--data-dir", str(data_dir), "--brokers", "3", "-o", "json")
    try:
        assert up.returncode == 0, up.stderr
        yield data_dir
    finally:
        headwater("dev", "down", "--data-dir", str(data_dir), timeout=120)


def test_roll_restarts_every_dev_broker_once(dev_cluster: Path) -> None:
    before = json.loads((dev_cluster / "state.json").read_text())
    done = headwater("cluster", "roll", "--data-dir", str(dev_cluster), "-o", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "Finished"
    assert sorted(result["restarted"]) == ["broker-0", "broker-1", "broker-2"]
    after = json.loads((dev_cluster / "state.json").read_text())
    old = {b["id"]: b["pid"] for b in before["brokers"]}
    assert all(b["pid"] != old[b["id"]] for b in after["brokers"])
    assert "RollFinished" in done.stderr
    # Every broker came back registered on this software and the protocol in force.
    bootstrap = ",".join(f"127.0.0.1:{b['port']}" for b in after["brokers"])
    described = headwater("cluster", "describe", "--bootstrap", bootstrap, "-o", "json")
    assert described.returncode == 0, described.stderr
    brokers = json.loads(described.stdout)["brokers"]
    assert {b["id"] for b in brokers} == {0, 1, 2}
    assert {(b["version"], b["protocol_version"]) for b in brokers} == {(__version__, "1")}


def test_protocol_downgrade_is_refused_and_exits_non_zero(dev_cluster: Path) -> None:
    done = headwater("cluster", "roll", "--data-dir", str(dev_cluster), "--to-version", "0")
    assert done.returncode == 1
    assert "Refused" in done.stdout and "below the version in force 1" in done.stdout
