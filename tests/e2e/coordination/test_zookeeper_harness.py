"""The ZooKeeper test harness: starts, answers four-letter words, stops without leftovers,
and refuses clearly to start on a port that is in use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from headwater.testing.zookeeper import ZooKeeperServer, four_letter_word

pytestmark = pytest.mark.e2e


def test_start_answer_stop(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        assert four_letter_word(server.host, server.port, "ruok") == "imok"
        assert "Mode: standalone" in four_letter_word(server.host, server.port, "srvr")
        pid = server.process.pid if server.process else -1
    assert not server.running
    assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_port_in_use_is_refused(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    clash = ZooKeeperServer(tmp_path / "clash", port=zookeeper.port)
    with pytest.raises(RuntimeError, match="already in use"):
        clash.start(timeout_s=20)
    assert not clash.running
