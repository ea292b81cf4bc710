"""Real local clusters for the operator's e2e tests (``headwater.testing.Cluster``).

Clusters use the session's ZooKeeper (tests/e2e/conftest.py; a fresh chroot
each), so starting one costs only the broker processes.  Tests that restart
brokers take a cluster of their own (``fresh_cluster``): restarted brokers are
new child processes, which must be gone before the test's leak check runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from headwater.testing import Cluster
from headwater.testing.zookeeper import ZooKeeperServer

ClusterFactory = Callable[..., Cluster]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Three brokers shared by a module's tests (each test names its own topics)."""
    with Cluster(
        brokers=3,
        data_dir=tmp_path_factory.mktemp("op-cluster"),
        zookeeper=zookeeper.connect_string,
    ) as c:
        yield c


@pytest.fixture
def fresh_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterFactory]:
    """``fresh_cluster(brokers=3, overrides={...})``: a cluster closed after the test."""
    started: list[Cluster] = []

    def make(*, brokers: int = 3, overrides: dict[str, str] | None = None) -> Cluster:
        c = Cluster(
            brokers=brokers,
            data_dir=tmp_path_factory.mktemp("op-roll"),
            zookeeper=zookeeper.connect_string,
            overrides=overrides,
        )
        started.append(c.start())
        return c

    yield make
    for c in started:
        c.close()
