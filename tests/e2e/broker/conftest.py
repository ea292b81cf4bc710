"""Fixtures for the broker e2e tests: clusters sharing the session's ZooKeeper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer


@pytest.fixture(scope="module")
def single(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """One broker, for the single-broker path and bad inputs."""
    data_dir: Path = tmp_path_factory.mktemp("single")
    overrides = {"message.max.bytes": "100000"}
    with Cluster(
        brokers=1, data_dir=data_dir, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as cluster:
        yield cluster


@pytest.fixture
def trio(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """Three fresh brokers, min.insync.replicas=2 and short lag times, for fault tests."""
    overrides = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "1500"}
    with Cluster(
        brokers=3, data_dir=tmp_path, zookeeper=zookeeper.connect_string, overrides=overrides
    ) as cluster:
        yield cluster
