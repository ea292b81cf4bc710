"""``headwater dev up/status/restart/down`` against the session's ZooKeeper."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from headwater.testing.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.e2e


def headwater(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "headwater.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_dev_cluster_lifecycle(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    data = str(tmp_path / "dev")
    up = headwater(
        "dev", "up", "--brokers", "1", "--data-dir", data,
        "--zookeeper", zookeeper.connect_string, "--output", "json",
    )  # fmt: skip
    try:
        assert up.returncode == 0, up.stderr
        info = json.loads(up.stdout)
        assert info["bootstrap"] == f"127.0.0.1:{info['brokers'][0]['port']}"
        assert info["zookeeper"].startswith(zookeeper.connect_string)
        assert info["kafka_bootstrap"] == f"127.0.0.1:{info['brokers'][0]['kafka_port']}"
        assert _kafka_answers(info["kafka_bootstrap"])
        status = headwater("dev", "status", "--data-dir", data, "--output", "json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["brokers"][0]["healthy"] is True
        restart = headwater("dev", "restart", "0", "--data-dir", data, "--output", "json")
        assert restart.returncode == 0, restart.stderr
        assert json.loads(restart.stdout)["pid"] != info["brokers"][0]["pid"]
        assert _kafka_answers(info["kafka_bootstrap"])  # the same port after a restart
    finally:
        down = headwater("dev", "down", "--data-dir", data)
    assert down.returncode == 0, down.stderr
    again = headwater("dev", "status", "--data-dir", data)
    assert again.returncode != 0 and "no dev cluster" in again.stderr


def _kafka_answers(bootstrap: str) -> bool:
    """The Kafka listener answers ApiVersions v0 (raw bytes: no Kafka client needed)."""
    host, _, port = bootstrap.partition(",")[0].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        request = struct.pack(">hhih", 18, 0, 1, -1)
        sock.sendall(struct.pack(">i", len(request)) + request)
        header = b""
        while len(header) < 10:
            chunk = sock.recv(10 - len(header))
            assert chunk, "the Kafka listener closed the connection"
            header += chunk
    _size, correlation_id, error = struct.unpack(">iih", header)
    return (correlation_id, error) == (1, 0)
