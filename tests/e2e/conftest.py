"""Shared e2e fixtures: one real ZooKeeper per test session, a fresh chroot per test.

``zookeeper`` starts a real standalone ZooKeeper (``headwater.testing.zookeeper``)
once per session; ``zk_connect`` gives each test its own ``host:port/hw-<uuid>``
``zookeeper.connect`` so tests never see each other's znodes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.testing.zookeeper import ZooKeeperServer


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    data_dir: Path = tmp_path_factory.mktemp("zookeeper")
    with ZooKeeperServer(data_dir) as server:
        yield server


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """A ``zookeeper.connect`` string with a chroot unique to this test."""
    return zookeeper.chroot_connect_string(f"/hw-{uuid.uuid4().hex[:12]}")
