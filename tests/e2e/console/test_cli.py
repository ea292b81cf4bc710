"""``headwater console`` as a user runs it: help, one-line failures, and serving pages."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from headwater.testing import Cluster

pytestmark = pytest.mark.e2e
BASE = [sys.executable, "-m", "headwater.cli.main", "console"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BASE, *args], capture_output=True, text=True, timeout=120, check=False)


def test_help_says_what_it_does() -> None:
    result = run("--help")
    assert result.returncode == 0
    for option in (
        "--bootstrap",
        "--command-config",
        "--port",
        "--host",
        "--read-only",
        "--kubeconfig",
        "--broker-statefulset",
    ):
        assert option in result.stdout
    assert "ACLs" in result.stdout


def test_failures_are_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    result = run("--bootstrap", dead, "--request-timeout-ms", "1000", "--port", "0")
    assert result.returncode == 1
    assert result.stderr.startswith(f"headwater: error: cannot describe the cluster at {dead}")
    assert result.stderr.count("\n") == 1, result.stderr

    result = run("--port", "70000")
    assert (result.returncode, result.stderr) == (
        2,
        "headwater: error: --port 70000: expected 0 to 65535\n",
    )
    result = run("--port", "http")
    assert result.returncode == 2 and result.stderr.count("\n") == 1


def test_a_bad_command_config_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=CARRIER_PIGEON\n")
    result = run("--command-config", str(config))
    assert result.returncode == 2
    assert result.stderr.startswith(f"headwater: error: --command-config {config}: ")
    assert result.stderr.count("\n") == 1


def test_serves_the_cluster(cluster: Cluster) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.pop("HEADWATER_CONSOLE_KUBECONFIG", None)
    proc = subprocess.Popen(
        [*BASE, "--bootstrap", cluster.bootstrap, "--port", "0", "--read-only"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Headwater Console (read-only) for cluster "), line
        assert "as ANONYMOUS (PLAINTEXT)" in line
        url = line.split(" at ")[1].split(" ")[0]
        with urllib.request.urlopen(url + "cluster", timeout=60) as resp:
            body = resp.read().decode()
        assert resp.status == 200
        assert "Read-only console" in body
        note = proc.stdout.readline()  # no kubeconfig, not in a pod
        assert note.startswith("note: The operator's rolls and scaling need Kubernetes access"), (
            note
        )
        with urllib.request.urlopen(url + "operator", timeout=60) as resp:
            body = resp.read().decode()
        assert resp.status == 200
        assert 'id="no-kubernetes-access"' in body
        assert "--kubeconfig" in body

        port = int(url.rstrip("/").rsplit(":", 1)[1])
        busy = run("--bootstrap", cluster.bootstrap, "--port", str(port))
        assert busy.returncode == 1
        assert busy.stderr.startswith(f"headwater: error: cannot listen on 127.0.0.1:{port}: ")
        assert busy.stderr.count("\n") == 1, busy.stderr
        proc.terminate()
        assert proc.wait(timeout=30) == 0  # SIGTERM stops it cleanly
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
