"""A real two-broker cluster (brokers 0 and 1, in racks r1 and r2) and a console over it,
for the console's e2e tests; each test uses its own uniquely named topics and groups."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from headwater.console.server import RunningConsole
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

from tests.e2e.console.web import WebClient, serve_console


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    data_dir: Path = tmp_path_factory.mktemp("console-cluster")
    with Cluster(
        brokers=2,
        data_dir=data_dir,
        zookeeper=zookeeper.connect_string,
        broker_overrides={0: {"broker.rack": "r1"}, 1: {"broker.rack": "r2"}},
    ) as c:
        yield c


@pytest.fixture(scope="module")
def console(cluster: Cluster) -> Iterator[RunningConsole]:
    with serve_console(cluster.bootstrap) as running:
        yield running


@pytest.fixture
def web(console: RunningConsole) -> WebClient:
    return WebClient(console.url)
